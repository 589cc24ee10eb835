/* Dispatch mode through the real libappnorth.so, against the local server
 * ($APPNORTH_TEST_SERVER): every callback runs inside appnorth_dispatch() on
 * the thread that calls it (checked by thread id), the descriptor is
 * readable exactly while something waits, config changes coalesce, log
 * lines past the bound are dropped and counted, removal and free with
 * callbacks queued, the synchronous callbacks (secure store) run on the
 * calling thread, and a process exits with live handles in both modes,
 * in the default mode with a library thread blocked in a host callback. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "support.h"

static const char *server;
static pthread_t main_thread;
static int app_counter;

static const char *new_app(char *buf, size_t size) {
    snprintf(buf, size, "dtest-%d-%d", (int)getpid(), ++app_counter);
    return buf;
}

static void publish(const char *app, const char *config_json) { admin_publish_config(server, app, config_json); }

/* What the callbacks saw. Only the main thread should ever touch it; the
 * off_main counter is atomic so that a wrong thread is counted, not raced. */
typedef struct {
    int logs, changes;
    atomic_int off_main;
    char last_log[512];
    char keys[512];
    char json[512];
    appnorth_client *free_client_on_log; /* frees it from inside a callback */
} seen_t;

static void note_thread(seen_t *s) {
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&s->off_main, 1);
}

static void on_log(int32_t level, const char *message, void *user_data) {
    (void)level;
    seen_t *s = user_data;
    note_thread(s);
    s->logs++;
    snprintf(s->last_log, sizeof s->last_log, "%s", message);
    if (s->free_client_on_log) {
        appnorth_client *c = s->free_client_on_log;
        s->free_client_on_log = NULL;
        appnorth_client_free(c);
    }
}

static void on_change(const char *json, const char *keys, int32_t tier, void *user_data) {
    (void)tier;
    seen_t *s = user_data;
    note_thread(s);
    s->changes++;
    snprintf(s->keys, sizeof s->keys, "%s", keys);
    snprintf(s->json, sizeof s->json, "%s", json);
}

static appnorth_client *dispatch_client(const char *app, seen_t *seen, int32_t level) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, app, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 3000, 3000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, 1, &err), APPNORTH_OK, err);
    if (seen) CHECK_STATUS(appnorth_client_options_set_logger(o, on_log, level, seen, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static appnorth_config *live_config(appnorth_client *client) {
    appnorth_error err;
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_poll_interval_ms(o, 100, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(o, 20, 200, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    return config;
}

static int fd_readable(int fd, int timeout_ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc;
    do rc = poll(&p, 1, timeout_ms); while (rc < 0 && errno == EINTR);
    return rc == 1 && (p.revents & POLLIN);
}

static int64_t config_int(appnorth_config *config, const char *key) {
    int64_t v = -1;
    appnorth_config_get_int(config, key, -1, &v, NULL);
    return v;
}

/* Waits (on the descriptor, then the getter) until `key` reads `value`,
 * without dispatching. */
static int wait_for_value(int fd, appnorth_config *config, const char *key, int64_t value) {
    double deadline = mono_ms() + 15000;
    while (mono_ms() < deadline) {
        if (config_int(config, key) == value) return 1;
        fd_readable(fd, 20);
    }
    return 0;
}

static int dispatch_all(appnorth_client *client) {
    int32_t ran = -1;
    appnorth_error err;
    CHECK_STATUS(appnorth_dispatch(client, 0, &ran, &err), APPNORTH_OK, err);
    return ran;
}

/* ---- arguments and states ------------------------------------------------- */

static void test_bad_arguments_and_default_mode(void) {
    char app[64];
    appnorth_error err;
    int32_t ran = 7, fd = 7;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, 2, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_client_options_free(o);

    CHECK_STATUS(appnorth_dispatch(NULL, 0, &ran, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(ran == 0, "ran is 0 on failure: %d", ran);
    CHECK_STATUS(appnorth_dispatch_fd(NULL, &fd, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(fd == -1, "fd is -1 on failure: %d", fd);

    appnorth_client *plain = make_client(server, new_app(app, sizeof app), NULL, NULL);
    CHECK_STATUS(appnorth_dispatch(plain, 0, &ran, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(strstr(err.message, "dispatch mode") != NULL, "message names the mode: %s", err.message);
    CHECK_STATUS(appnorth_dispatch_fd(plain, &fd, &err), APPNORTH_E_WRONG_STATE, err);
    appnorth_client_free(plain);

    appnorth_client *c = dispatch_client(app, NULL, 0);
    CHECK_STATUS(appnorth_dispatch(c, -1, &ran, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_dispatch_fd(c, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_dispatch_fd(c, &fd, &err), APPNORTH_OK, err);
    CHECK(fd >= 0, "a descriptor: %d", fd);
    CHECK(!fd_readable(fd, 0), "nothing pending: not readable");
    CHECK_STATUS(appnorth_dispatch(c, 0, &ran, &err), APPNORTH_OK, err);
    CHECK(ran == 0, "nothing ran: %d", ran);
    CHECK_STATUS(appnorth_dispatch(c, 0, NULL, NULL), APPNORTH_OK, err);
    appnorth_client_free(c);
}

/* ---- every callback on the dispatching thread ------------------------------ */

static void test_every_callback_runs_on_the_dispatching_thread(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"level\":1}");
    seen_t seen = {0};
    appnorth_error err;
    appnorth_client *client = dispatch_client(app, &seen, APPNORTH_LOG_DEBUG);
    int32_t fd = -1;
    CHECK_STATUS(appnorth_dispatch_fd(client, &fd, &err), APPNORTH_OK, err);

    /* An events queue whose upload thread logs, and a live config whose
     * stream thread logs and delivers changes. */
    char *dir = make_temp_dir("dispatch");
    appnorth_events_options *eo = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(eo, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(eo, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_flush_policy(eo, 50, 1, &err), APPNORTH_OK, err);
    appnorth_events *events = NULL;
    CHECK_STATUS(appnorth_events_new(eo, &events, &err), APPNORTH_OK, err);
    appnorth_events_options_free(eo);
    appnorth_config *config = live_config(client);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, &seen, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_track(events, "level_up", "{\"n\":1}", NULL, &err), APPNORTH_OK, err);

    CHECK(wait_for_value(fd, config, "level", 1), "the live stream brought level 1");
    CHECK(fd_readable(fd, 5000), "the descriptor is readable with callbacks queued");
    CHECK(seen.logs == 0 && seen.changes == 0, "nothing ran before a dispatch: %d logs, %d changes",
          seen.logs, seen.changes);

    /* The host's loop: wait on the descriptor, dispatch, until both kinds arrived. */
    publish(app, "{\"level\":2}");
    double deadline = mono_ms() + 15000;
    while (mono_ms() < deadline && !(seen.changes >= 1 && strstr(seen.json, "\"level\":2"))) {
        if (fd_readable(fd, 100)) dispatch_all(client);
    }
    CHECK(strstr(seen.json, "\"level\":2") != NULL, "the listener saw level 2: %s", seen.json);
    CHECK(seen.logs > 0, "log lines ran: %d", seen.logs);
    appnorth_events_close(events, 3000, NULL);
    appnorth_config_free(config);
    dispatch_all(client);
    CHECK(atomic_load(&seen.off_main) == 0, "%d callback(s) ran off the dispatching thread",
          atomic_load(&seen.off_main));
    CHECK(!fd_readable(fd, 0), "drained: the descriptor is not readable");
    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- coalescing, removal and free with callbacks queued --------------------- */

static void test_config_changes_coalesce(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"a\":1}");
    seen_t seen = {0};
    appnorth_client *client = dispatch_client(app, NULL, 0);
    int32_t fd = -1;
    appnorth_dispatch_fd(client, &fd, NULL);
    appnorth_config *config = live_config(client);
    int64_t token = 0;
    appnorth_config_add_listener(config, on_change, &seen, &token, NULL);
    CHECK(wait_for_value(fd, config, "a", 1), "a=1 arrived");
    dispatch_all(client);
    CHECK(seen.changes == 1, "one change so far: %d", seen.changes);

    publish(app, "{\"a\":1,\"b\":2}");
    CHECK(wait_for_value(fd, config, "b", 2), "b=2 arrived");
    publish(app, "{\"a\":1,\"b\":2,\"c\":3}");
    CHECK(wait_for_value(fd, config, "c", 3), "c=3 arrived");
    int ran = dispatch_all(client);
    CHECK(ran == 1 && seen.changes == 2, "two changes, one call: ran %d, changes %d", ran, seen.changes);
    CHECK(strcmp(seen.keys, "[\"b\",\"c\"]") == 0, "the union of the changed keys: %s", seen.keys);
    CHECK(strstr(seen.json, "\"c\":3") != NULL, "the latest values: %s", seen.json);
    CHECK(atomic_load(&seen.off_main) == 0, "on the dispatching thread");

    /* Removed with a change queued: never called. */
    publish(app, "{\"a\":1,\"b\":2,\"c\":4}");
    CHECK(wait_for_value(fd, config, "c", 4), "c=4 arrived");
    CHECK(fd_readable(fd, 5000), "a change is queued");
    CHECK_STATUS(appnorth_config_remove_listener(config, token, NULL), APPNORTH_OK, (appnorth_error){0});
    dispatch_all(client);
    CHECK(seen.changes == 2, "a removed listener is not called for its queued change: %d", seen.changes);

    /* Freed with a change queued: nothing runs. */
    appnorth_config_add_listener(config, on_change, &seen, &token, NULL);
    publish(app, "{\"a\":1,\"b\":2,\"c\":5}");
    CHECK(wait_for_value(fd, config, "c", 5), "c=5 arrived");
    appnorth_config_free(config);
    dispatch_all(client);
    CHECK(seen.changes == 2, "a freed config's queued change does not run: %d", seen.changes);
    appnorth_client_free(client);
}

static void test_log_lines_past_the_bound_are_counted(void) {
    char app[64];
    new_app(app, sizeof app);
    seen_t seen = {0};
    appnorth_client *client = dispatch_client(app, &seen, APPNORTH_LOG_DEBUG);
    char *out = NULL;
    /* Each request logs at least one DEBUG line. */
    for (int i = 0; i < APPNORTH_DISPATCH_LOG_LIMIT + 50; i++) {
        appnorth_client_list_boards(client, &out, NULL);
        appnorth_string_free(out);
        out = NULL;
    }
    CHECK(seen.logs == 0, "no line ran inside the calls: %d", seen.logs);
    int ran = dispatch_all(client);
    CHECK(ran == APPNORTH_DISPATCH_LOG_LIMIT + 1, "the bound plus one summary line: %d", ran);
    CHECK(strstr(seen.last_log, "log line(s) dropped") != NULL, "the last line counts the dropped: %s", seen.last_log);
    CHECK(dispatch_all(client) == 0, "nothing left");

    /* max_callbacks: at most that many. */
    appnorth_client_list_boards(client, &out, NULL);
    appnorth_string_free(out);
    appnorth_client_list_boards(client, &out, NULL);
    appnorth_string_free(out);
    int32_t one = -1;
    CHECK_STATUS(appnorth_dispatch(client, 1, &one, NULL), APPNORTH_OK, (appnorth_error){0});
    CHECK(one == 1, "max 1 runs one: %d", one);
    CHECK(dispatch_all(client) >= 1, "the rest later");
    appnorth_client_free(client);
}

static void test_client_free_with_callbacks_queued(void) {
    char app[64];
    new_app(app, sizeof app);
    seen_t seen = {0};
    appnorth_client *client = dispatch_client(app, &seen, APPNORTH_LOG_DEBUG);
    char *out = NULL;
    appnorth_client_list_boards(client, &out, NULL);
    appnorth_string_free(out);
    int32_t fd = -1;
    appnorth_dispatch_fd(client, &fd, NULL);
    CHECK(fd_readable(fd, 0), "lines queued");
    appnorth_client_free(client);
    CHECK(seen.logs == 0, "freed with lines queued: none ran (%d)", seen.logs);

    /* Freed from inside a callback: the dispatch runs nothing after it. */
    client = dispatch_client(app, &seen, APPNORTH_LOG_DEBUG);
    for (int i = 0; i < 3; i++) {
        appnorth_client_list_boards(client, &out, NULL);
        appnorth_string_free(out);
    }
    seen.free_client_on_log = client;
    int32_t ran = -1;
    CHECK_STATUS(appnorth_dispatch(client, 0, &ran, NULL), APPNORTH_OK, (appnorth_error){0});
    CHECK(ran == 1 && seen.logs == 1, "nothing ran after the free: ran %d, logs %d", ran, seen.logs);
}

/* A dispatch from inside a callback runs nothing. */
static appnorth_client *nested_client;
static int nested_ran = -1;
static void on_log_nested(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    int32_t ran = -1;
    if (nested_ran < 0 && appnorth_dispatch(nested_client, 0, &ran, NULL) == APPNORTH_OK) nested_ran = ran;
}

static void test_nested_dispatch_runs_nothing(void) {
    char app[64];
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, new_app(app, sizeof app), &err);
    appnorth_client_options_set_dispatch_mode(o, 1, &err);
    appnorth_client_options_set_logger(o, on_log_nested, APPNORTH_LOG_DEBUG, NULL, &err);
    CHECK_STATUS(appnorth_client_new(o, &nested_client, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    char *out = NULL;
    appnorth_client_list_boards(nested_client, &out, NULL);
    appnorth_string_free(out);
    CHECK(dispatch_all(nested_client) >= 1, "lines ran");
    CHECK(nested_ran == 0, "a nested dispatch ran nothing: %d", nested_ran);
    appnorth_client_free(nested_client);
}

/* ---- synchronous callbacks: only on the calling thread ---------------------- */

typedef struct {
    atomic_int calls, off_main;
    char anonymous[128];
} secure_t;

static int32_t secure_get(void *user_data, const char *key, appnorth_buffer *out) {
    secure_t *s = user_data;
    atomic_fetch_add(&s->calls, 1);
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&s->off_main, 1);
    if (strcmp(key, "anonymous_id") == 0 && s->anonymous[0])
        appnorth_buffer_set(out, s->anonymous, strlen(s->anonymous), NULL);
    return 0;
}

static int32_t secure_set(void *user_data, const char *key, const char *value) {
    secure_t *s = user_data;
    atomic_fetch_add(&s->calls, 1);
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&s->off_main, 1);
    if (strcmp(key, "anonymous_id") == 0 && value) snprintf(s->anonymous, sizeof s->anonymous, "%s", value);
    return 0;
}

static void test_secure_store_runs_on_the_calling_thread(void) {
    char app[64];
    new_app(app, sizeof app);
    seen_t seen = {0};
    secure_t secure = {0};
    appnorth_error err;
    appnorth_client *client = dispatch_client(app, &seen, APPNORTH_LOG_DEBUG);
    char *dir = make_temp_dir("dispatch-secure");
    appnorth_events_options *eo = appnorth_events_options_new();
    appnorth_events_options_set_client(eo, client, &err);
    appnorth_events_options_set_data_dir(eo, dir, &err);
    appnorth_events_options_set_flush_policy(eo, 20, 1, &err);
    CHECK_STATUS(appnorth_events_options_set_secure_store(eo, secure_get, secure_set, NULL, &secure, &err),
                 APPNORTH_OK, err);
    appnorth_events *events = NULL;
    CHECK_STATUS(appnorth_events_new(eo, &events, &err), APPNORTH_OK, err);
    appnorth_events_options_free(eo);
    CHECK_STATUS(appnorth_events_identify(events, "user-1", &err), APPNORTH_OK, err);
    for (int i = 0; i < 5; i++) appnorth_events_track(events, "e", NULL, NULL, &err);
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_reset(events, &err), APPNORTH_OK, err);
    appnorth_events_track(events, "e", NULL, NULL, &err);
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_OK, err);
    appnorth_events_free(events);
    dispatch_all(client);
    CHECK(atomic_load(&secure.calls) > 0, "the secure store was used");
    CHECK(atomic_load(&secure.off_main) == 0, "%d secure-store call(s) ran on a library thread",
          atomic_load(&secure.off_main));
    CHECK(atomic_load(&seen.off_main) == 0, "log lines on the dispatching thread");
    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- publish -> listener through the descriptor ------------------------------ */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_publish_to_dispatched_listener_latency(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"n\":0}");
    seen_t seen = {0};
    appnorth_client *client = dispatch_client(app, NULL, 0);
    int32_t fd = -1;
    appnorth_dispatch_fd(client, &fd, NULL);
    appnorth_config *config = live_config(client);
    int64_t token = 0;
    appnorth_config_add_listener(config, on_change, &seen, &token, NULL);
    CHECK(wait_for_value(fd, config, "n", 0), "n=0 arrived");
    dispatch_all(client);
    enum { ROUNDS = 15 };
    double lat[ROUNDS];
    int got = 0;
    for (int i = 1; i <= ROUNDS; i++) {
        char body[64];
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        int before = seen.changes;
        double start = mono_ms();
        publish(app, body);
        double deadline = start + 10000;
        while (seen.changes == before && mono_ms() < deadline) {
            if (fd_readable(fd, 1000)) dispatch_all(client);
        }
        if (seen.changes > before) lat[got++] = mono_ms() - start;
    }
    CHECK(got == ROUNDS, "every publish reached the listener: %d of %d", got, ROUNDS);
    if (got > 0) {
        qsort(lat, got, sizeof lat[0], cmp_double);
        printf("dispatch: publish->listener through the descriptor: p50 %.2f ms over %d (max %.2f; target <= 5)\n",
               lat[got / 2], got, lat[got - 1]);
    }
    appnorth_config_free(config);
    appnorth_client_free(client);
}

/* ---- exit with live handles ----------------------------------------------------- */

/* A logger that, called on a library thread, blocks for ever (as a runtime's
 * callback does that waits for an interpreter lock the exiting thread holds). */
static pthread_mutex_t block_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t block_cv; /* cond_init_mono in exit_with_live_handles */
static int blocked;

static void on_log_blocking(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    if (pthread_equal(pthread_self(), main_thread)) return;
    pthread_mutex_lock(&block_mu);
    blocked++;
    pthread_cond_broadcast(&block_cv);
    for (;;) pthread_cond_wait(&block_cv, &block_mu);
}

/* The child: live handles with running threads, then exit() from main
 * without freeing them. Default mode: a library thread is blocked inside
 * the host's log callback at the moment of exit. */
static int exit_with_live_handles(int dispatch_mode) {
    cond_init_mono(&block_cv);
    char app[64], *dir = make_temp_dir("dispatch-exit");
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, new_app(app, sizeof app), &err);
    appnorth_client_options_set_dispatch_mode(o, dispatch_mode, &err);
    appnorth_client_options_set_logger(o, on_log_blocking, APPNORTH_LOG_DEBUG, NULL, &err);
    appnorth_client *client = NULL;
    if (appnorth_client_new(o, &client, &err) != APPNORTH_OK) return 3;
    appnorth_client_options_free(o);
    appnorth_events_options *eo = appnorth_events_options_new();
    appnorth_events_options_set_client(eo, client, &err);
    appnorth_events_options_set_data_dir(eo, dir, &err);
    appnorth_events_options_set_flush_policy(eo, 20, 1, &err);
    appnorth_events *events = NULL;
    if (appnorth_events_new(eo, &events, &err) != APPNORTH_OK) return 3;
    appnorth_events_options_free(eo);
    appnorth_config *config = live_config(client);
    (void)config;
    appnorth_events_track(events, "exit", NULL, NULL, &err);
    if (!dispatch_mode) {
        int64_t deadline = mono_ms() + 15000;
        pthread_mutex_lock(&block_mu);
        while (blocked == 0 && cond_wait_until(&block_cv, &block_mu, deadline) == 0) {}
        int ok = blocked > 0;
        pthread_mutex_unlock(&block_mu);
        if (!ok) return 4; /* no library thread ever logged */
    } else {
        int32_t fd = -1;
        appnorth_dispatch_fd(client, &fd, NULL);
        if (!fd_readable(fd, 15000)) return 4; /* nothing was queued */
        if (blocked != 0) return 5;            /* a library thread called the host */
    }
    exit(0); /* handles live, threads running (one blocked in the host) */
}

static void test_exit_with_live_handles(const char *self, const char *mode) {
    double start = mono_ms();
    pid_t pid = fork();
    if (pid == 0) {
        execl(self, self, "--exit-with-live-handles", mode, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    pid_t done = 0;
    while ((done = waitpid(pid, &status, WNOHANG)) == 0 && mono_ms() - start < 30000) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (done == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK(done == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s mode: exit with live handles (a thread blocked in a callback) ended %s, status %d",
          mode, done == 0 ? "hung (killed after 30 s)" : "", status);
    printf("dispatch: %s-mode exit with live handles took %.0f ms\n", mode, mono_ms() - start);
}

int main(int argc, char **argv) {
    server = test_start("test_dispatch", 180);
    if (!server) return 2;
    main_thread = pthread_self();
    (void)admin_board, (void)admin_idea;
    curl_global_init(CURL_GLOBAL_ALL);
    if (argc == 3 && strcmp(argv[1], "--exit-with-live-handles") == 0)
        return exit_with_live_handles(strcmp(argv[2], "dispatch") == 0);
    RUN(test_bad_arguments_and_default_mode);
    RUN(test_every_callback_runs_on_the_dispatching_thread);
    RUN(test_config_changes_coalesce);
    RUN(test_log_lines_past_the_bound_are_counted);
    RUN(test_client_free_with_callbacks_queued);
    RUN(test_nested_dispatch_runs_nothing);
    RUN(test_secure_store_runs_on_the_calling_thread);
    RUN(test_publish_to_dispatched_listener_latency);
    RUN_WITH(test_exit_with_live_handles, argv[0], "default");
    RUN_WITH(test_exit_with_live_handles, argv[0], "dispatch");
    curl_global_cleanup();
    return check_summary();
}
