/* A consent change crosses processes, through the real libappnorth.so
 * against the local API server ($APPNORTH_TEST_SERVER).
 *
 * This program re-executes itself as a child (--child DATA_DIR) that opens
 * the event queue on the parent's data directory with a busy flush policy
 * (every 50 ms or 5 events: uploads run all the time) and tracks "b-<n>"
 * in a loop, printing "<n> <queued>" after each track, until its stdin
 * closes. The parent, with its own handle on the same directory:
 *   1. grants consent and waits until the child's events reach the server;
 *   2. revokes; once that call has returned, the server's request log must
 *      show no event upload later, and its stored events must not grow,
 *      while the child keeps tracking (the parent waits until the child has
 *      reported 200 dropped tracks: several of its upload cycles);
 *   3. starts a second child, which must open revoked (its first track is
 *      dropped);
 *   4. grants again: the first child's new events arrive.
 * Everything waits on events (lines from the child, the server's admin
 * state) with generous deadlines, never on bare sleeps. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#include "admin.h"
#include "fixtures.h"
#include "support.h"

#define APP "tconsent"
#define EVENTS_PATH "/v1/apps/" APP "/events"
/* Deadline for each awaited event on a loaded machine. */
#define DEADLINE_MS 60000

static const char *server;

static appnorth_events *open_events(appnorth_client *c, const char *dir, int32_t interval_ms, int32_t threshold) {
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events *e = NULL;
    if (appnorth_events_options_set_client(o, c, &err) != APPNORTH_OK ||
        appnorth_events_options_set_data_dir(o, dir, &err) != APPNORTH_OK ||
        appnorth_events_options_set_flush_policy(o, interval_ms, threshold, &err) != APPNORTH_OK ||
        appnorth_events_new(o, &e, &err) != APPNORTH_OK)
        fprintf(stderr, "events: %s\n", err.message);
    appnorth_events_options_free(o);
    return e;
}

/* ---- the child ----------------------------------------------------------------- */

/* The child's client waits 60 s for an answer: an upload that timed out
 * before the server answered would end (and let a revocation return)
 * while the server still stores it, which is not what this test checks. */
static appnorth_client *patient_client(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client *c = NULL;
    if (appnorth_client_options_set_api_url(o, server, &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(o, APP, &err) != APPNORTH_OK ||
        appnorth_client_options_set_timeouts(o, 60000, 60000, &err) != APPNORTH_OK ||
        appnorth_client_new(o, &c, &err) != APPNORTH_OK)
        fprintf(stderr, "child: client: %s\n", err.message);
    appnorth_client_options_free(o);
    return c;
}

static int child_main(const char *dir) {
    appnorth_client *c = patient_client();
    appnorth_events *e = c ? open_events(c, dir, 50, 5) : NULL;
    if (!e) return 1;
    for (long n = 0;; n++) {
        /* The parent closes our stdin to end us. */
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        if (poll(&p, 1, 0) > 0) break;
        char name[64];
        snprintf(name, sizeof name, "b-%ld", n);
        int32_t queued = -1;
        appnorth_error err;
        if (appnorth_events_track(e, name, NULL, &queued, &err) != APPNORTH_OK) {
            fprintf(stderr, "child: track %ld failed: %s\n", n, err.message);
            return 1;
        }
        printf("%ld %d\n", n, (int)queued);
        fflush(stdout);
        usleep(1000);
    }
    appnorth_events_free(e);
    appnorth_client_free(c);
    return 0;
}

/* ---- the parent ------------------------------------------------------------------ */

typedef struct {
    pid_t pid;
    int out;    /* its stdout */
    int in;     /* its stdin: closed to end it */
    char buf[8192];
    size_t pending;
    long last_n;
    int last_queued;
} child;

static int spawn(child *ch, const char *self, const char *dir) {
    int out[2], in[2];
    memset(ch, 0, sizeof *ch);
    ch->last_n = -1;
    if (pipe(out) != 0 || pipe(in) != 0) return 0;
    ch->pid = fork();
    if (ch->pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(in[0], STDIN_FILENO);
        close(out[0]); close(out[1]); close(in[0]); close(in[1]);
        execl(self, self, "--child", dir, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    ch->out = out[0];
    ch->in = in[1];
    return ch->pid > 0;
}

/* Reads the child's lines until `want` says stop (true) or the deadline
 * passes (false). `want` sees each line's n and queued flag. */
static int read_until(child *ch, int (*want)(long n, int queued, void *ctx), void *ctx) {
    int64_t deadline = mono_ms() + DEADLINE_MS;
    while (mono_ms() < deadline) {
        struct pollfd p = {ch->out, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t got = read(ch->out, ch->buf + ch->pending, sizeof ch->buf - ch->pending - 1);
        if (got <= 0) {
            if (got < 0 && errno == EINTR) continue;
            return 0;  /* the child ended */
        }
        size_t len = ch->pending + (size_t)got, start = 0;
        int done = 0;
        for (size_t i = 0; i < len && !done; i++) {
            if (ch->buf[i] != '\n') continue;
            ch->buf[i] = 0;
            long n = -1;
            int queued = -1;
            if (sscanf(ch->buf + start, "%ld %d", &n, &queued) == 2) {
                ch->last_n = n;
                ch->last_queued = queued;
                done = want(n, queued, ctx);
            }
            start = i + 1;
        }
        memmove(ch->buf, ch->buf + start, len - start);
        ch->pending = len - start;
        if (done) return 1;
    }
    return 0;
}

static int end_child(child *ch) {
    close(ch->in);
    /* Drain its output so that it never blocks on a full pipe while ending. */
    char sink[4096];
    while (read(ch->out, sink, sizeof sink) > 0) {}
    close(ch->out);
    int status = 0;
    waitpid(ch->pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static int any_line(long n, int queued, void *ctx) {
    (void)n; (void)ctx;
    return queued == 1;
}

static int dropped_count(long n, int queued, void *ctx) {
    (void)n;
    long *left = ctx;
    if (queued == 0) --*left;
    return *left <= 0;
}

static int first_line(long n, int queued, void *ctx) {
    (void)n;
    *(int *)ctx = queued;
    return 1;
}

static int accepted_from(long n, int queued, void *ctx) {
    long *from = ctx;
    if (queued == 1 && *from < 0) *from = n;
    return *from >= 0;
}

/* The server's stored events of this app. */
static size_t stored_events(long *max_n) {
    json_t *state = NULL;
    admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &state);
    json_t *events = json_object_get(state, "events");
    size_t i, count = json_array_size(events);
    json_t *ev;
    if (max_n) *max_n = -1;
    json_array_foreach(events, i, ev) {
        const char *name = json_string_value(json_object_get(ev, "name"));
        long n = name && strncmp(name, "b-", 2) == 0 ? atol(name + 2) : -1;
        if (max_n && n > *max_n) *max_n = n;
    }
    json_decref(state);
    return count;
}

/* Event uploads logged after request-log sequence number `since`; the
 * largest seq seen goes to *last (when not NULL). */
static size_t event_posts_since(long since, long *last) {
    char path[128];
    snprintf(path, sizeof path, "/admin/requests?since=%ld", since);
    json_t *reply = NULL;
    admin_request(server, "GET", path, NULL, &reply);
    size_t i, posts = 0;
    json_t *r;
    if (last) *last = since;
    json_array_foreach(json_object_get(reply, "requests"), i, r) {
        long seq = (long)json_integer_value(json_object_get(r, "seq"));
        if (last && seq > *last) *last = seq;
        const char *p = json_string_value(json_object_get(r, "path"));
        if (p && strcmp(p, EVENTS_PATH) == 0) posts++;
    }
    json_decref(reply);
    return posts;
}

static int wait_for_stored(size_t at_least, long min_n) {
    int64_t deadline = mono_ms() + DEADLINE_MS;
    while (mono_ms() < deadline) {
        long max_n = -1;
        if (stored_events(&max_n) >= at_least && max_n >= min_n) return 1;
        usleep(20000);
    }
    return 0;
}

static int parent_main(void) {
    long status = admin_request(server, "POST", "/admin/reset", "{}", NULL);
    CHECK(status == 200, "admin reset: HTTP %ld", status);
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0, "own path");
    if (len <= 0) return check_summary();
    self[len] = 0;
    char *dir = make_temp_dir("consent");
    if (!dir) return check_summary();

    appnorth_error err;
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_events *a = c ? open_events(c, dir, 3600000, 10000) : NULL;
    CHECK(a != NULL, "the parent opens the queue");
    if (!a) return check_summary();
    CHECK_STATUS(appnorth_events_set_consent(a, 1, &err), APPNORTH_OK, err);

    /* 1. The child tracks and uploads. */
    child b;
    CHECK(spawn(&b, self, dir), "spawn the child");
    CHECK(read_until(&b, any_line, NULL), "the child tracks");
    CHECK(wait_for_stored(1, 0), "the child's events reach the server");

    /* 2. Revoke here; nothing from the child arrives after the return. */
    int64_t revoke_started = mono_ms();
    CHECK_STATUS(appnorth_events_set_consent(a, 0, &err), APPNORTH_OK, err);
    int64_t revoke_ms = mono_ms() - revoke_started;
    long last = 0;
    event_posts_since(0, &last);
    size_t stored_at_revoke = stored_events(NULL);
    long dropped = 200;
    CHECK(read_until(&b, dropped_count, &dropped), "the child's tracks are dropped (last line %ld %d)", b.last_n,
          b.last_queued);
    size_t late = event_posts_since(last, NULL);
    size_t stored_later = stored_events(NULL);
    CHECK(late == 0, "no event upload after the revocation returned: %zu", late);
    CHECK(stored_later == stored_at_revoke, "no event stored after the revocation returned: %zu then %zu",
          stored_at_revoke, stored_later);

    printf("consent across processes: the revocation returned in %lld ms while the child uploaded; "
           "%zu events stored before it, none after\n", (long long)revoke_ms, stored_at_revoke);

    /* 3. A process that opens now starts revoked. */
    child fresh;
    int fresh_queued = -1;
    CHECK(spawn(&fresh, self, dir), "spawn a second child");
    CHECK(read_until(&fresh, first_line, &fresh_queued), "the second child tracks");
    CHECK(fresh_queued == 0, "a process opened after the revocation drops events: queued %d", fresh_queued);
    CHECK(end_child(&fresh) == 0, "the second child ends cleanly");

    /* 4. Grant here; the child's new events arrive. */
    CHECK_STATUS(appnorth_events_set_consent(a, 1, &err), APPNORTH_OK, err);
    long accepted = -1;
    CHECK(read_until(&b, accepted_from, &accepted), "the child accepts events again");
    CHECK(wait_for_stored(stored_later + 1, accepted), "the child's events after the grant arrive (from b-%ld)",
          accepted);
    CHECK(end_child(&b) == 0, "the child ends cleanly");

    appnorth_events_free(a);
    appnorth_client_free(c);
    remove_tree(dir);
    return check_summary();
}

int main(int argc, char **argv) {
    (void)admin_board; /* admin.h helpers this test does not need */
    (void)admin_idea;
    if (argc == 3 && strcmp(argv[1], "--child") == 0) {
        server = getenv("APPNORTH_TEST_SERVER");
        return server ? child_main(argv[2]) : 2;
    }
    server = test_start("test_consent_processes", 300);
    if (!server) return 2;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_ALL);
    int rc = parent_main();
    curl_global_cleanup();
    return rc;
}
