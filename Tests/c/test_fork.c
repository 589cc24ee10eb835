/* fork() from a busy parent, as pre-fork servers do (gunicorn --preload,
 * Celery prefork, multiprocessing's fork):
 *  - a child that makes new handles works every time, while the parent
 *    tracks on one thread and its uploader runs: no hang, no crash, and
 *    every child's events reach the server exactly once;
 *  - handles inherited from the parent are refused in the child
 *    (APPNORTH_E_WRONG_STATE) and freeing them is harmless;
 *  - a child that only exits or execs does not deadlock;
 *  - a child does not keep its parent's event journal locked: when the
 *    parent is killed, the next open recovers its journal while the child
 *    still lives. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "check.h"

/* Waits for a child for at most `seconds`; a hung child is killed. */
static int wait_child(pid_t pid, int seconds) {
    for (int i = 0; i < seconds * 100; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* The host of the exit test: makes handles, keeps the uploader busy, and
 * exits without freeing anything. */
static int exit_with_live_handles(const char *server, const char *dir) {
    appnorth_client_options *co = appnorth_client_options_new();
    appnorth_client_options_set_api_url(co, server, NULL);
    appnorth_client_options_set_app_id(co, "fork", NULL);
    appnorth_client *c = NULL;
    if (appnorth_client_new(co, &c, NULL) != APPNORTH_OK) return 3;
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events_options_set_client(o, c, NULL);
    appnorth_events_options_set_data_dir(o, dir, NULL);
    appnorth_events_options_set_flush_policy(o, 10, 1, NULL);
    appnorth_events *e = NULL;
    if (appnorth_events_new(o, &e, NULL) != APPNORTH_OK) return 4;
    for (int i = 0; i < 50; i++) appnorth_events_track(e, "leak", NULL, NULL, NULL);
    exit(0);
}

/* The owner process: tracks 3 events into its own handle (no uploads: a
 * closed port), forks a child that only sleeps, reports the child's pid and
 * waits to be killed. */
static void journal_owner(const char *dir, int report_fd) {
    appnorth_client_options *co = appnorth_client_options_new();
    appnorth_client_options_set_api_url(co, "http://127.0.0.1:9", NULL);
    appnorth_client_options_set_app_id(co, "fork", NULL);
    appnorth_client *c = NULL;
    appnorth_events *e = NULL;
    appnorth_events_options *o = appnorth_events_options_new();
    if (appnorth_client_new(co, &c, NULL) != APPNORTH_OK || appnorth_events_options_set_client(o, c, NULL) != 0 ||
        appnorth_events_options_set_data_dir(o, dir, NULL) != 0 ||
        appnorth_events_options_set_flush_policy(o, 3600000, 10000, NULL) != 0 ||
        appnorth_events_new(o, &e, NULL) != APPNORTH_OK)
        _exit(3);
    for (int i = 0; i < 3; i++)
        if (appnorth_events_track(e, "journaled", NULL, NULL, NULL) != APPNORTH_OK) _exit(4);
    pid_t keeper = fork();
    if (keeper == 0) {
        sleep(60);
        _exit(0);
    }
    if (write(report_fd, &keeper, sizeof keeper) != (ssize_t)sizeof keeper) _exit(5);
    for (;;) pause();
}

static void a_killed_parents_journal_is_recovered_while_its_child_lives(const char *base) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/journal-owner", base);
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    pid_t owner = fork();
    if (owner == 0) {
        close(fds[0]);
        journal_owner(dir, fds[1]);
    }
    close(fds[1]);
    pid_t keeper = 0;
    CHECK(read(fds[0], &keeper, sizeof keeper) == (ssize_t)sizeof keeper && keeper > 0, "the owner reports its child");
    close(fds[0]);
    kill(owner, SIGKILL);
    waitpid(owner, NULL, 0);

    appnorth_error err;
    appnorth_client_options *co = appnorth_client_options_new();
    appnorth_client_options_set_api_url(co, "http://127.0.0.1:9", &err);
    appnorth_client_options_set_app_id(co, "fork", &err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(co, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(co);
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events_options_set_client(o, c, &err);
    appnorth_events_options_set_data_dir(o, dir, &err);
    appnorth_events_options_set_flush_policy(o, 3600000, 10000, &err);
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    char *stats = NULL;
    if (e) CHECK_STATUS(appnorth_events_stats(e, &stats, &err), APPNORTH_OK, err);
    json_t *s = stats ? json_loads(stats, 0, NULL) : NULL;
    CHECK(json_integer_value(json_object_get(s, "queued")) == 3,
          "the killed owner's 3 journaled events are recovered while its child lives: %s", stats ? stats : "");
    json_decref(s);
    appnorth_string_free(stats);
    appnorth_events_free(e);
    appnorth_client_free(c);
    if (keeper > 0) kill(keeper, SIGKILL);
}

/* The parent's busy thread: tracks until told to stop. */
static atomic_int tracking = 1;
static atomic_long tracked;

static void *track_loop(void *arg) {
    appnorth_events *events = arg;
    while (atomic_load(&tracking)) {
        if (appnorth_events_track(events, "parent", "{\"busy\":true}", NULL, NULL) == APPNORTH_OK)
            atomic_fetch_add(&tracked, 1);
        usleep(1000);
    }
    return NULL;
}

#define CHILD_EVENTS 3

/* A forked worker: the inherited handle is refused, new handles on the
 * same data directory work. Exit codes name the step that failed. */
static int child_work(const char *server, const char *dir, appnorth_events *inherited, int index) {
    appnorth_error err;
    if (appnorth_events_track(inherited, "inherited", NULL, NULL, &err) != APPNORTH_E_WRONG_STATE) return 10;
    appnorth_events_free(inherited); /* harmless: left to the parent */
    appnorth_client_options *co = appnorth_client_options_new();
    if (appnorth_client_options_set_api_url(co, server, &err) != APPNORTH_OK) return 11;
    if (appnorth_client_options_set_app_id(co, "fork", &err) != APPNORTH_OK) return 11;
    if (appnorth_client_options_set_timeouts(co, 5000, 5000, &err) != APPNORTH_OK) return 11;
    appnorth_client *c = NULL;
    if (appnorth_client_new(co, &c, &err) != APPNORTH_OK) return 12;
    appnorth_client_options_free(co);
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events_options_set_client(o, c, &err);
    appnorth_events_options_set_data_dir(o, dir, &err);
    appnorth_events *e = NULL;
    if (appnorth_events_new(o, &e, &err) != APPNORTH_OK) {
        fprintf(stderr, "child %d: events_new: %s\n", index, err.message);
        return 13;
    }
    appnorth_events_options_free(o);
    for (int k = 0; k < CHILD_EVENTS; k++) {
        char props[64];
        snprintf(props, sizeof props, "{\"child\":%d,\"k\":%d}", index, k);
        if (appnorth_events_track(e, "fork child", props, NULL, &err) != APPNORTH_OK) return 14;
    }
    int32_t rc = appnorth_events_flush(e, 20000, &err);
    if (rc != APPNORTH_OK) {
        fprintf(stderr, "child %d: flush: %s: %s\n", index, appnorth_status_str(rc), err.message);
        return 15;
    }
    appnorth_events_free(e);
    appnorth_client_free(c);
    return 0;
}

/* How many events of each child the server holds; returns the number of
 * (child, k) pairs seen exactly once. */
static int server_child_events(const char *server, int children, int *duplicates) {
    json_t *state = NULL;
    admin_request(server, "GET", "/admin/apps/fork/state", NULL, &state);
    int *seen = calloc((size_t)children * CHILD_EVENTS, sizeof *seen);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(state, "events"), i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name || strcmp(name, "fork child") != 0) continue;
        json_t *p = json_object_get(e, "properties");
        json_int_t child = json_integer_value(json_object_get(p, "child"));
        json_int_t k = json_integer_value(json_object_get(p, "k"));
        if (child >= 0 && child < children && k >= 0 && k < CHILD_EVENTS) seen[child * CHILD_EVENTS + k]++;
    }
    int once = 0;
    *duplicates = 0;
    for (int j = 0; j < children * CHILD_EVENTS; j++) {
        if (seen[j] == 1) once++;
        if (seen[j] > 1) (*duplicates)++;
    }
    free(seen);
    json_decref(state);
    return once;
}

/* Children 4 at a time (20 in make test, 200 in make test-soak,
 * $APPNORTH_TEST_FORKS if set), each
 * watched for $APPNORTH_TEST_FORK_HANG_SECONDS (30 by default); a child
 * still running then is killed and counts as hung. */
static void forks_from_busy_parent(const char *server, const char *dir, appnorth_events *events) {
    int children = test_count("APPNORTH_TEST_FORKS", 20, 200);
    const char *hang_env = getenv("APPNORTH_TEST_FORK_HANG_SECONDS");
    double hang_seconds = hang_env && atoi(hang_env) > 0 ? atoi(hang_env) : 30;
    enum { PARALLEL = 4 };
    pthread_t tracker;
    pthread_create(&tracker, NULL, track_loop, events);
    pid_t running[PARALLEL] = {0};
    int64_t started[PARALLEL] = {0};
    int next = 0, done = 0, hung = 0, crashed = 0, failed = 0;
    int64_t t0 = mono_ms();
    while (done < children) {
        for (int s = 0; s < PARALLEL; s++) {
            if (running[s] == 0 && next < children) {
                int index = next++;
                pid_t pid = fork();
                if (pid == 0) exit(child_work(server, dir, events, index));
                running[s] = pid;
                started[s] = mono_ms();
            }
            if (running[s] == 0) continue;
            int status;
            pid_t got = waitpid(running[s], &status, WNOHANG);
            if (got == running[s]) {
                if (WIFSIGNALED(status)) {
                    crashed++;
                    fprintf(stderr, "fork child crashed: signal %d\n", WTERMSIG(status));
                } else if (WEXITSTATUS(status) != 0) {
                    failed++;
                    fprintf(stderr, "fork child failed: exit %d\n", WEXITSTATUS(status));
                }
                running[s] = 0;
                done++;
            } else if (mono_ms() - started[s] > hang_seconds * 1000) {
                kill(running[s], SIGKILL);
                waitpid(running[s], NULL, 0);
                hung++;
                running[s] = 0;
                done++;
            }
        }
        usleep(2000);
    }
    double elapsed = (double)(mono_ms() - t0) / 1000;
    atomic_store(&tracking, 0);
    pthread_join(tracker, NULL);
    printf("fork: %d children from a busy parent (%ld parent events) in %.1f s: %d hung, %d crashed, %d failed\n",
           children, atomic_load(&tracked), elapsed, hung, crashed, failed);
    CHECK(hung == 0, "%d of %d children hung", hung, children);
    CHECK(crashed == 0, "%d of %d children crashed", crashed, children);
    CHECK(failed == 0, "%d of %d children failed", failed, children);

    /* Every child flushed before exiting: its events are on the server. */
    int once = 0, duplicates = 0;
    for (int64_t end = mono_ms() + 30000; mono_ms() < end; sleep_ms(200)) {
        once = server_child_events(server, children, &duplicates);
        if (once == children * CHILD_EVENTS) break;
    }
    CHECK(once == children * CHILD_EVENTS, "server holds %d of %d child events once", once,
          children * CHILD_EVENTS);
    CHECK(duplicates == 0, "%d child events duplicated", duplicates);

    /* And the parent's own events all arrive too. */
    appnorth_error err;
    CHECK_STATUS(appnorth_events_flush(events, 30000, &err), APPNORTH_OK, err);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--exit-with-live-handles") == 0)
        return exit_with_live_handles(argv[2], argv[3]);
    const char *self = argv[0];
    (void)argc;
    const char *server = getenv("APPNORTH_TEST_SERVER");
    if (!server) server = "http://127.0.0.1:9";
    alarm(300); /* the whole program's watchdog; children are watched one by one */
    char dir[] = "/tmp/appnorth-fork-XXXXXX";
    if (!mkdtemp(dir)) return 2;

    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, "fork", &err);
    appnorth_client *client = NULL;
    CHECK_STATUS(appnorth_client_new(o, &client, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);

    appnorth_events_options *eo = appnorth_events_options_new();
    appnorth_events_options_set_client(eo, client, &err);
    appnorth_events_options_set_data_dir(eo, dir, &err);
    appnorth_events_options_set_flush_policy(eo, 10, 1, &err); /* the uploader is always busy */
    appnorth_events *events = NULL;
    CHECK_STATUS(appnorth_events_new(eo, &events, &err), APPNORTH_OK, err);
    appnorth_events_options_free(eo);

    for (int round = 0, rounds = test_count(NULL, 5, 20); round < rounds; round++) {
        appnorth_events_track(events, "before fork", "{\"round\":1}", NULL, NULL);
        pid_t pid = fork();
        if (pid == 0) exit(0); /* runs atexit handlers and stdio flushing */
        CHECK(wait_child(pid, 10) == 0, "child that exits, round %d", round);

        pid = fork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        CHECK(wait_child(pid, 10) == 0, "child that execs, round %d", round);
    }

    forks_from_busy_parent(server, dir, events);
    a_killed_parents_journal_is_recovered_while_its_child_lives(dir);

    /* A host that exits without freeing its handles, while the upload
     * thread is busy, exits cleanly (a fresh process: this program exec'd
     * again). */
    for (int round = 0, rounds = test_count(NULL, 3, 10); round < rounds; round++) {
        char child_dir[64];
        snprintf(child_dir, sizeof child_dir, "%s/child%d", dir, round);
        pid_t pid = fork();
        if (pid == 0) {
            execl(self, self, "--exit-with-live-handles", server, child_dir, (char *)NULL);
            _exit(127);
        }
        CHECK(wait_child(pid, 10) == 0, "host exiting with live handles, round %d", round);
    }

    /* The parent's handles still work after its children are gone. */
    CHECK_STATUS(appnorth_events_track(events, "after fork", NULL, NULL, &err), APPNORTH_OK, err);
    appnorth_events_free(events);
    appnorth_client_free(client);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
