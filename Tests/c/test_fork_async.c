/* fork() from a parent with non-blocking calls in flight, as a pre-fork
 * server with an async app does (issue #31: before the fix, 47 of 100
 * children hung in the process-wide operation table):
 *  - the parent keeps 256 non-blocking reads in flight on two clients
 *    (each completion starts the next; the server holds each 50 ms), two
 *    threads start and cancel reads in a loop on a third client (the
 *    issue's reproduction), one thread tracks events
 *    and a config listener runs on a live config;
 *  - the main thread forks 50 children (500 in make test-soak, or
 *    $APPNORTH_TEST_FORKS), 4 at a time; each one makes a client, a config and an events handle,
 *    makes blocking and non-blocking calls, cancels one, frees everything
 *    and exits 0; each is watched for 10 s, then killed and counted hung;
 *  - dispatch mode: a fork while the parent's completions are queued; the
 *    child's inherited client is refused, its own client's descriptor is
 *    its own, and the parent still dispatches every queued completion. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "support.h"

#define PARENT_APP "forkasync"
#define CHILD_APP "forkchild"
#define IN_FLIGHT 256

static const char *server;
static appnorth_client *clients[3]; /* two refilled, one churned */
static atomic_int running = 1;
static atomic_long completed, failed_starts;
static char refill_error[256];

/* ---- The busy parent -------------------------------------------------------- */

/* Each completion starts the next read on the same client while running. */
static void refill(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)status; (void)err; (void)json;
    atomic_fetch_add(&completed, 1);
    appnorth_client *c = user;
    appnorth_error e;
    if (atomic_load(&running) && appnorth_client_list_boards_async(c, refill, c, NULL, &e) != APPNORTH_OK &&
        atomic_fetch_add(&failed_starts, 1) == 0)
        snprintf(refill_error, sizeof refill_error, "%s", e.message);
}

static void ignore(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)status; (void)err; (void)json; (void)user;
}

/* The churn: start a read and cancel it at once, in a loop. */
static void *churn(void *arg) {
    appnorth_client *c = arg;
    while (atomic_load(&running)) {
        uint64_t op = 0;
        if (appnorth_client_list_boards_async(c, ignore, NULL, &op, NULL) == APPNORTH_OK) appnorth_op_cancel(op, NULL);
    }
    return NULL;
}

static void *track(void *arg) {
    appnorth_events *events = arg;
    while (atomic_load(&running)) {
        appnorth_events_track(events, "parent", "{\"busy\":true}", NULL, NULL);
        sleep_ms(1);
    }
    return NULL;
}

static void on_config(const char *config, const char *changed, int32_t tier, void *user) {
    (void)config; (void)changed; (void)tier;
    atomic_fetch_add((atomic_int *)user, 1);
}

/* A new config for the parent's app: its live listener is called. */
static void publish(int version) {
    char body[64];
    snprintf(body, sizeof body, "{\"config\":{\"version\":%d}}", version);
    long status = admin_request(server, "POST", "/admin/apps/" PARENT_APP "/config", body, NULL);
    CHECK(status == 201, "publish -> %ld", status);
}

/* ---- The child -------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int32_t status[3];
} child_ops;

static void child_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)err; (void)json;
    child_ops *ops = user;
    pthread_mutex_lock(&ops->mu);
    ops->status[ops->done < 3 ? ops->done : 2] = status;
    ops->done++;
    pthread_cond_broadcast(&ops->cv);
    pthread_mutex_unlock(&ops->mu);
}

/* What a forked worker does; the exit code names the failing step. */
static int child_work(int index, const char *dir) {
    appnorth_error err;
    if (appnorth_client_list_boards_async(clients[0], ignore, NULL, NULL, &err) != APPNORTH_E_WRONG_STATE) return 10;
    appnorth_client_options *o = appnorth_client_options_new();
    if (appnorth_client_options_set_api_url(o, server, &err) || appnorth_client_options_set_app_id(o, CHILD_APP, &err) ||
        appnorth_client_options_set_timeouts(o, 5000, 5000, &err))
        return 11;
    appnorth_client *c = NULL;
    if (appnorth_client_new(o, &c, &err) != APPNORTH_OK) return 12;
    appnorth_client_options_free(o);
    char *json = NULL;
    if (appnorth_client_list_boards(c, &json, &err) != APPNORTH_OK) return 13;
    appnorth_string_free(json);
    child_ops ops = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0, 0, 0}};
    uint64_t cancelled = 0;
    if (appnorth_client_list_boards_async(c, child_done, &ops, NULL, &err) != APPNORTH_OK) return 14;
    if (appnorth_client_list_ideas_async(c, NULL, child_done, &ops, &cancelled, &err) != APPNORTH_OK) return 15;
    appnorth_op_cancel(cancelled, NULL);

    char sub[256];
    snprintf(sub, sizeof sub, "%s/child%d", dir, index);
    appnorth_events_options *eo = appnorth_events_options_new();
    appnorth_events_options_set_client(eo, c, &err);
    appnorth_events_options_set_data_dir(eo, sub, &err);
    appnorth_events *e = NULL;
    if (appnorth_events_new(eo, &e, &err) != APPNORTH_OK) return 16;
    appnorth_events_options_free(eo);
    if (appnorth_events_track(e, "child", NULL, NULL, &err) != APPNORTH_OK) return 17;
    if (appnorth_events_flush_async(e, 5000, child_done, &ops, NULL, &err) != APPNORTH_OK) return 18;
    appnorth_config_options *co = appnorth_config_options_new();
    appnorth_config_options_set_client(co, c, &err);
    appnorth_config_options_set_data_dir(co, sub, &err);
    appnorth_config *config = NULL;
    if (appnorth_config_new(co, &config, &err) != APPNORTH_OK) return 19;
    appnorth_config_options_free(co);
    if (appnorth_config_refresh(config, &err) != APPNORTH_OK) return 20;

    pthread_mutex_lock(&ops.mu);
    while (ops.done < 3) pthread_cond_wait(&ops.cv, &ops.mu); /* the parent's watchdog bounds it */
    pthread_mutex_unlock(&ops.mu);
    appnorth_config_free(config);
    appnorth_events_free(e);
    appnorth_client_free(c);
    return 0;
}

/* A hung child's stacks on stderr before it is killed, when gdb is there:
 * the one hang this test saw in 500-fork runs (a child spinning in
 * libcurl's global lock inside curl_easy_init) was found that way. */
static void print_stacks(pid_t pid) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "command -v gdb >/dev/null && gdb -p %d -batch -ex 'thread apply all bt 25' 2>&1 | "
                              "grep -v '^\\[New LWP' >&2", (int)pid);
    if (system(cmd) != 0) fprintf(stderr, "(no stacks for %d: gdb missing or failed)\n", (int)pid);
}

/* Runs `children` forks, PARALLEL at a time, each watched for 10 s. */
static void fork_children(int children, const char *dir, int *hung, int *failed) {
    enum { PARALLEL = 4 };
    pid_t running_pid[PARALLEL] = {0};
    int64_t started[PARALLEL] = {0};
    int next = 0, done = 0;
    while (done < children) {
        for (int s = 0; s < PARALLEL; s++) {
            if (running_pid[s] == 0 && next < children) {
                int index = next++;
                if (index % 25 == 0) publish(index); /* the parent's listener runs across forks */
                pid_t pid = fork();
                if (pid == 0) _exit(child_work(index, dir));
                running_pid[s] = pid;
                started[s] = mono_ms();
            }
            if (running_pid[s] == 0) continue;
            int status;
            if (waitpid(running_pid[s], &status, WNOHANG) == running_pid[s]) {
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    (*failed)++;
                    fprintf(stderr, "fork child failed: %s %d\n", WIFEXITED(status) ? "exit" : "signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                }
                running_pid[s] = 0;
                done++;
            } else if (mono_ms() - started[s] > 10000) {
                fprintf(stderr, "fork child %d hung; its stacks:\n", (int)running_pid[s]);
                print_stacks(running_pid[s]);
                kill(running_pid[s], SIGKILL);
                waitpid(running_pid[s], NULL, 0);
                (*hung)++;
                running_pid[s] = 0;
                done++;
            }
        }
        sleep_ms(2);
    }
}

static void test_forks_with_operations_in_flight(void) {
    int children = test_count("APPNORTH_TEST_FORKS", 50, 500);
    char *dir = make_temp_dir("fork-async");
    admin_reset(server);
    char *board = admin_board(server, CHILD_APP, "child-board");
    free(board);
    CHECK(admin_request(server, "POST", "/admin/apps/" CHILD_APP "/config", "{\"config\":{\"child\":true}}", NULL) == 201,
          "the children's config");
    /* Every parent read is held 50 ms at the server: many stay in flight. */
    admin_add_fault(server, "{\"delay_ms\":50,\"path_prefix\":\"/v1/apps/" PARENT_APP "/boards\","
                            "\"for_ms\":600000}");
    for (int i = 0; i < 3; i++) clients[i] = client_with_timeouts(server, PARENT_APP, 30000, 30000);
    appnorth_error err;
    for (int i = 0; i < IN_FLIGHT; i++)
        CHECK_STATUS(appnorth_client_list_boards_async(clients[i % 2], refill, clients[i % 2], NULL, &err), APPNORTH_OK,
                     err);
    char parent_dir[300];
    snprintf(parent_dir, sizeof parent_dir, "%s/parent", dir);
    appnorth_events *events = events_in(clients[0], parent_dir);
    appnorth_config *config = config_in(clients[1], parent_dir);
    atomic_int changes = 0;
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, on_config, &changes, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    pthread_t threads[3];
    pthread_create(&threads[0], NULL, churn, clients[2]);
    pthread_create(&threads[1], NULL, churn, clients[2]);
    pthread_create(&threads[2], NULL, track, events);

    int hung = 0, failed = 0;
    int64_t t0 = mono_ms();
    fork_children(children, dir, &hung, &failed);
    double seconds = (double)(mono_ms() - t0) / 1000;
    printf("fork with operations in flight: %d children in %.1f s (parent: %ld reads completed meanwhile): "
           "%d hung, %d failed\n", children, seconds, atomic_load(&completed), hung, failed);
    CHECK(hung == 0, "%d of %d children hung", hung, children);
    CHECK(failed == 0, "%d of %d children failed", failed, children);
    CHECK(atomic_load(&failed_starts) == 0, "%ld refills refused (%s)", atomic_load(&failed_starts), refill_error);
    CHECK(atomic_load(&completed) > 0, "the parent's reads completed during the forks");

    for (int64_t end = mono_ms() + 10000; atomic_load(&changes) == 0 && mono_ms() < end;) sleep_ms(20);
    CHECK(atomic_load(&changes) > 0, "the parent's config listener ran");

    atomic_store(&running, 0);
    for (int i = 0; i < 3; i++) pthread_join(threads[i], NULL);
    appnorth_config_free(config);
    appnorth_events_free(events);
    for (int i = 0; i < 3; i++) appnorth_client_free(clients[i]); /* waits for the refills' last completions */
    admin_clear_faults(server);
    remove_tree(dir);
}

/* ---- Dispatch mode ---------------------------------------------------------- */

static appnorth_client *dispatch_client(const char *app) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, app, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, 1, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static void count_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)err; (void)json;
    if (status == APPNORTH_OK) (*(int *)user)++;
}

/* Dispatches until `want` completions ran or 10 s pass, polling `fd`. */
static void dispatch_until(appnorth_client *c, int fd, int *count, int want) {
    for (int64_t end = mono_ms() + 10000; *count < want && mono_ms() < end;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) appnorth_dispatch(c, 0, NULL, NULL);
    }
}

/* In the child: the inherited client is refused; a new dispatch-mode
 * client has a descriptor of its own and completes a read on it. */
static int dispatch_child(appnorth_client *inherited, int parent_fd) {
    int32_t fd = -1;
    if (appnorth_dispatch_fd(inherited, &fd, NULL) != APPNORTH_E_WRONG_STATE) return 10;
    if (appnorth_dispatch(inherited, 0, NULL, NULL) != APPNORTH_E_WRONG_STATE) return 11;
    appnorth_client *c = dispatch_client(CHILD_APP);
    if (!c || appnorth_dispatch_fd(c, &fd, NULL) != APPNORTH_OK) return 12;
    if (fd == parent_fd || fd < 0) return 13;
    int count = 0;
    if (appnorth_client_list_boards_async(c, count_done, &count, NULL, NULL) != APPNORTH_OK) return 14;
    dispatch_until(c, fd, &count, 1);
    if (count != 1) return 15;
    appnorth_client_free(c);
    return 0;
}

static void test_dispatch_mode_fork_with_completions_queued(void) {
    admin_reset(server);
    appnorth_client *c = dispatch_client(PARENT_APP);
    appnorth_error err;
    int32_t fd = -1;
    CHECK_STATUS(appnorth_dispatch_fd(c, &fd, &err), APPNORTH_OK, err);
    int count = 0;
    enum { QUEUED = 8 };
    for (int i = 0; i < QUEUED; i++)
        CHECK_STATUS(appnorth_client_list_boards_async(c, count_done, &count, NULL, &err), APPNORTH_OK, err);
    struct pollfd p = {fd, POLLIN, 0};
    CHECK(poll(&p, 1, 10000) == 1, "a completion is queued before the fork");
    for (int round = 0, rounds = test_count(NULL, 3, 10); round < rounds; round++) {
        pid_t pid = fork();
        if (pid == 0) _exit(dispatch_child(c, fd));
        int status = 0;
        int64_t end = mono_ms() + 10000;
        while (waitpid(pid, &status, WNOHANG) == 0 && mono_ms() < end) sleep_ms(2);
        if (mono_ms() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
        }
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "dispatch child, round %d: status %d", round, status);
    }
    CHECK(count == 0, "nothing dispatched in the parent before its own dispatch");
    dispatch_until(c, fd, &count, QUEUED);
    CHECK(count == QUEUED, "the parent dispatches its %d queued completions after the forks (got %d)", QUEUED, count);
    appnorth_client_free(c);
}

int main(void) {
    server = test_start("test_fork_async", 240);
    if (!server) return 2;
    RUN(test_forks_with_operations_in_flight);
    RUN(test_dispatch_mode_fork_with_completions_queued);
    return check_summary();
}
