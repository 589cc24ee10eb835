/* Crash safety of the analytics event queue, through the real
 * libappnorth.so against the local API server ($APPNORTH_TEST_SERVER).
 *
 * The seed: "Events are persisted to disk immediately when tracked ...
 * Events survive app crashes and force quits." The header: track "writes
 * the event to the data directory's SQLite database (WAL) before it
 * returns: it survives the host being killed right after".
 *
 * The story: this program re-executes itself as a child (--child DATA_DIR
 * FIRST_N) that opens the event queue on a shared data directory with a
 * busy flush policy (threshold 20, every 50 ms: uploads run all the time)
 * and tracks "crash-<n>" events in a loop, printing each n on stdout only
 * after appnorth_events_track() returned APPNORTH_OK with out_queued 1.
 * The parent reads those lines and SIGKILLs the child at a random moment
 * 0-150 ms after its first line: during a journal append, a drain of the
 * journal into SQLite, an upload, between an upload's 2xx and the deletion
 * of its rows, or while the child's open imports the journals that earlier
 * children left. Every other child tracks from 3 threads at once (numbers
 * interleaved), so its events sit in several stripes' journal files when it
 * dies. 20 rounds (200 in make test-soak: about a minute), each child
 * continuing the numbering. Then the parent opens the queue itself,
 * flushes it empty and checks the server: every printed n is there exactly
 * once, no name is there twice, and at most one unprinted event per
 * tracking thread and round (tracked, then killed before printing)
 * arrived. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"

#define APP "tcrash"
/* Rounds of kill -9: 20 in make test, 200 in make test-soak;
 * APPNORTH_CRASH_ROUNDS overrides both. */
static int kill_rounds;

static const char *server;

static appnorth_client *make_client(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client *c = NULL;
    if (appnorth_client_options_set_api_url(o, server, &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(o, APP, &err) != APPNORTH_OK ||
        appnorth_client_options_set_timeouts(o, 3000, 3000, &err) != APPNORTH_OK ||
        appnorth_client_new(o, &c, &err) != APPNORTH_OK)
        fprintf(stderr, "client: %s\n", err.message);
    appnorth_client_options_free(o);
    return c;
}

/* Options shared by the children and the parent: no count or byte drops
 * (a drop would look like a lost event). */
static appnorth_events_options *options_for(appnorth_client *c, const char *dir, int32_t interval_ms,
                                            int32_t threshold, appnorth_error *err) {
    appnorth_events_options *o = appnorth_events_options_new();
    if (appnorth_events_options_set_client(o, c, err) != APPNORTH_OK ||
        appnorth_events_options_set_data_dir(o, dir, err) != APPNORTH_OK ||
        appnorth_events_options_set_flush_policy(o, interval_ms, threshold, err) != APPNORTH_OK ||
        appnorth_events_options_set_limits(o, 1000000, 1 << 30, 65536, err) != APPNORTH_OK ||
        appnorth_events_options_set_retry(o, 10, 3, 120000, 5, err) != APPNORTH_OK) {
        appnorth_events_options_free(o);
        return NULL;
    }
    return o;
}

/* ---- the child ----------------------------------------------------------------- */

/* Threads a multi-threaded child tracks from; numbers never collide while
 * this stays below the gap the parent leaves between children (10). */
#define CHILD_THREADS 3

typedef struct {
    appnorth_events *events;
    long first, step;
} tracker;

static void *track_loop(void *arg) {
    tracker *t = arg;
    appnorth_error err;
    for (long n = t->first; n < t->first + 1000000 * t->step; n += t->step) {
        char name[64], props[64];
        snprintf(name, sizeof name, "crash-%ld", n);
        snprintf(props, sizeof props, "{\"n\":%ld}", n);
        int32_t queued = 0;
        if (appnorth_events_track(t->events, name, props, &queued, &err) != APPNORTH_OK || queued != 1) {
            fprintf(stderr, "child: track %ld failed: %s\n", n, err.message);
            _exit(1);
        }
        /* Only now is n promised to survive (one printf is one line). */
        printf("%ld\n", n);
        fflush(stdout);
        usleep(500);
    }
    return NULL;
}

static int child_main(const char *dir, long first, int threads) {
    appnorth_error err;
    appnorth_client *c = make_client();
    appnorth_events_options *o = c ? options_for(c, dir, 50, 20, &err) : NULL;
    appnorth_events *e = NULL;
    if (!o || appnorth_events_new(o, &e, &err) != APPNORTH_OK) {
        fprintf(stderr, "child: cannot open the queue: %s\n", err.message);
        return 1;
    }
    appnorth_events_options_free(o);
    if (threads < 1 || threads > CHILD_THREADS) threads = 1;
    pthread_t tid[CHILD_THREADS];
    tracker work[CHILD_THREADS];
    for (int i = 0; i < threads; i++) {
        work[i] = (tracker){e, first + i, threads};
        if (pthread_create(&tid[i], NULL, track_loop, &work[i]) != 0) return 1;
    }
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    appnorth_events_free(e);
    appnorth_client_free(c);
    return 0;
}

/* ---- the parent ------------------------------------------------------------------ */

typedef struct {
    long *items;
    size_t len, cap;
} longs;

static void longs_push(longs *l, long v) {
    if (l->len == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 1024;
        l->items = realloc(l->items, l->cap * sizeof *l->items);
    }
    l->items[l->len++] = v;
}

/* Takes the complete lines out of buf (len bytes), appending their numbers
 * to `printed`; returns how many bytes of a partial line remain at the front. */
static size_t take_lines(char *buf, size_t len, longs *printed, long *max_printed) {
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n') continue;
        buf[i] = 0;
        char *end = NULL;
        long n = strtol(buf + start, &end, 10);
        if (end && *end == 0 && end != buf + start) {
            longs_push(printed, n);
            if (n > *max_printed) *max_printed = n;
        }
        start = i + 1;
    }
    memmove(buf, buf + start, len - start);
    return len - start;
}

/* One child: spawn, read, kill after a random 0-150 ms past its first
 * line, read what it printed before dying. Returns the printed count. */
static size_t run_round(const char *self, const char *dir, int round, long first, longs *printed,
                        long *max_printed) {
    int fds[2];
    if (pipe(fds) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return 0;
    }
    char first_text[32], threads_text[8];
    snprintf(first_text, sizeof first_text, "%ld", first);
    /* Every other child tracks from several threads. */
    int threads = round % 2 ? CHILD_THREADS : 1;
    snprintf(threads_text, sizeof threads_text, "%d", threads);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(self, self, "--child", dir, first_text, threads_text, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    CHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid <= 0) {
        close(fds[0]);
        return 0;
    }

    int kill_after = rand() % 151;
    int64_t started = mono_ms(), kill_at = -1;
    size_t before = printed->len, pending = 0;
    char buf[8192];
    int killed = 0, eof = 0;
    while (!eof) {
        int64_t now = mono_ms();
        if (!killed && printed->len > before && kill_at < 0) kill_at = now + kill_after;
        if (!killed && ((kill_at >= 0 && now >= kill_at) || now - started > 5000)) {
            kill(pid, SIGKILL);
            killed = 1;
        }
        struct pollfd p = {fds[0], POLLIN, 0};
        int wait = killed ? 1000 : (kill_at >= 0 ? (int)(kill_at - now) : 20);
        if (wait < 0) wait = 0;
        if (poll(&p, 1, wait) <= 0) continue;
        ssize_t got = read(fds[0], buf + pending, sizeof buf - pending - 1);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            eof = 1;
            break;
        }
        pending = take_lines(buf, pending + (size_t)got, printed, max_printed);
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "round %d: child killed by SIGKILL (status %d)",
          round, status);
    size_t count = printed->len - before;
    CHECK(count > 0, "round %d: the child tracked before it was killed", round);
    if (round < 5 || round % 50 == 0)
        printf("round %d: %d thread(s), killed %d ms after the first line, %zu events printed (from %ld)\n", round,
               threads, kill_after, count, first);
    return count;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void check_database_integrity(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/appnorth.sqlite3", dir);
    sqlite3 *db = NULL;
    char result[64] = "";
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 2000);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            snprintf(result, sizeof result, "%s", (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    CHECK(strcmp(result, "ok") == 0, "the database survived the kills: integrity_check '%s'", result);
}

static int parent_main(void) {
    long status = admin_request(server, "POST", "/admin/reset", "{}", NULL);
    CHECK(status == 200, "admin reset: HTTP %ld", status);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0, "own path");
    if (len <= 0) return check_summary();
    self[len] = 0;
    char tmpl[] = "/tmp/appnorth-crash-XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp");
    if (!dir) return check_summary();
    srand((unsigned)(wall_ms() ^ getpid()));

    longs printed = {0};
    long max_printed = -1, first = 0;
    int64_t start = mono_ms();
    for (int round = 0; round < kill_rounds; round++) {
        run_round(self, dir, round, first, &printed, &max_printed);
        /* A killed child may have tracked one more event than it printed:
         * never reuse its number. */
        first = (max_printed >= first ? max_printed : first) + 10;
    }
    check_database_integrity(dir);
    /* The children were uploading while they were killed. */
    json_t *mid = NULL;
    admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &mid);
    size_t by_children = json_array_size(json_object_get(mid, "events"));
    json_decref(mid);
    CHECK(by_children > 0, "the children uploaded before dying: %zu events", by_children);

    /* The parent takes over the data directory and delivers what is left. */
    appnorth_error err;
    appnorth_client *c = make_client();
    appnorth_events_options *o = options_for(c, dir, 3600000, 10000, &err);
    appnorth_events *e = NULL;
    CHECK(o && appnorth_events_new(o, &e, &err) == APPNORTH_OK, "parent opens the queue: %s", err.message);
    appnorth_events_options_free(o);
    if (e) {
        CHECK_STATUS(appnorth_events_set_network_type(e, APPNORTH_NETWORK_WIFI, &err), APPNORTH_OK, err);
        int32_t rc = appnorth_events_flush(e, 10000, &err);
        CHECK_STATUS(rc, APPNORTH_OK, err);
        char *stats = NULL;
        appnorth_events_stats(e, &stats, NULL);
        json_t *s = stats ? json_loads(stats, 0, NULL) : NULL;
        CHECK(json_integer_value(json_object_get(s, "queued")) == 0, "everything delivered: %s", stats ? stats : "");
        json_decref(s);
        appnorth_string_free(stats);
    }
    appnorth_events_free(e);
    appnorth_client_free(c);

    /* Count names on the server. */
    json_t *state = NULL;
    admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &state);
    json_t *events = json_object_get(state, "events");
    size_t total = json_array_size(events);
    size_t range = (size_t)(first + 1);
    unsigned char *seen = calloc(range, 1);
    size_t duplicates = 0, strangers = 0, i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *name = json_string_value(json_object_get(ev, "name"));
        char *end = NULL;
        long n = name && strncmp(name, "crash-", 6) == 0 ? strtol(name + 6, &end, 10) : -1;
        if (n < 0 || (size_t)n >= range || !end || *end) {
            strangers++;
            continue;
        }
        if (seen[n]++) duplicates++;
    }
    size_t missing = 0;
    long first_missing = -1;
    for (size_t k = 0; k < printed.len; k++) {
        if (!seen[printed.items[k]]) {
            if (first_missing < 0) first_missing = printed.items[k];
            missing++;
        }
    }
    CHECK(duplicates == 0, "no event name arrived twice: %zu duplicates", duplicates);
    CHECK(missing == 0, "every printed event arrived: %zu of %zu missing (first: crash-%ld)", missing, printed.len,
          first_missing);
    CHECK(strangers == 0, "no unexpected events: %zu", strangers);
    CHECK(total >= printed.len && total - printed.len <= (size_t)kill_rounds * CHILD_THREADS,
          "at most one unprinted event per tracking thread and round: %zu stored, %zu printed", total, printed.len);
    printf("crash test: %d rounds, %zu events printed, %zu uploaded by the children, %zu stored in all, %lld ms\n",
           kill_rounds, printed.len, by_children, total, (long long)(mono_ms() - start));
    free(seen);
    json_decref(state);
    free(printed.items);
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    return check_summary();
}

static void watchdog(int sig) {
    (void)sig;
    static const char msg[] = "test_events_crash: watchdog fired (a call hung?)\n";
    if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
    _exit(3);
}

int main(int argc, char **argv) {
    server = getenv("APPNORTH_TEST_SERVER");
    if (!server) {
        fprintf(stderr, "APPNORTH_TEST_SERVER is not set (run through scripts/with-devserver.sh)\n");
        return 2;
    }
    (void)admin_board; /* admin.h helpers this test does not need */
    (void)admin_idea;
    if (argc == 5 && strcmp(argv[1], "--child") == 0) return child_main(argv[2], atol(argv[3]), atoi(argv[4]));
    signal(SIGALRM, watchdog);
    kill_rounds = test_count("APPNORTH_CRASH_ROUNDS", 20, 200);
    if (kill_rounds > 100000) kill_rounds = 100000;
    /* A round takes well under a second even on a loaded machine. */
    alarm(getenv("APPNORTH_TEST_TIMEOUT") ? (unsigned)atoi(getenv("APPNORTH_TEST_TIMEOUT"))
                                          : 60 + (unsigned)kill_rounds);
    curl_global_init(CURL_GLOBAL_ALL);
    int rc = parent_main();
    curl_global_cleanup();
    return rc;
}
