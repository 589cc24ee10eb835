/* Shared helpers for the benchmark programs: clocks, statistics, a tiny JSON
 * writer for results, scratch directories, a closed loopback port and the
 * dev server's admin API (through plain libcurl, not the library).
 *
 * Each bench program prints exactly one JSON object on stdout; everything
 * else goes to stderr. bench/run.sh collects the objects and
 * bench/report.py turns them into the table. */
#ifndef APPNORTH_BENCH_H
#define APPNORTH_BENCH_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <appnorth.h>

#define BENCH_UNUSED __attribute__((unused))

/* ---- failing loudly ------------------------------------------------------ */

static BENCH_UNUSED void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

/* ---- clocks -------------------------------------------------------------- */

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static BENCH_UNUSED void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* ---- statistics ---------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of n values, nearest-rank on a sorted copy. */
static BENCH_UNUSED double quantile(const double *values, size_t n, double q) {
    if (n == 0) return 0;
    double *copy = malloc(n * sizeof *copy);
    if (!copy) die("out of memory");
    memcpy(copy, values, n * sizeof *copy);
    qsort(copy, n, sizeof *copy, cmp_double);
    size_t rank = (size_t)(q * (double)(n - 1) + 0.5);
    if (rank >= n) rank = n - 1;
    double v = copy[rank];
    free(copy);
    return v;
}

static BENCH_UNUSED double median(const double *values, size_t n) {
    if (n == 0) return 0;
    double *copy = malloc(n * sizeof *copy);
    if (!copy) die("out of memory");
    memcpy(copy, values, n * sizeof *copy);
    qsort(copy, n, sizeof *copy, cmp_double);
    double v = n % 2 ? copy[n / 2] : (copy[n / 2 - 1] + copy[n / 2]) / 2;
    free(copy);
    return v;
}

/* ---- a minimal JSON writer (numbers, strings, arrays of numbers) --------- */

typedef struct {
    FILE *out;
    int depth;
    int first[16];
} jw;

static BENCH_UNUSED void jw_sep(jw *w) {
    if (!w->first[w->depth]) fputc(',', w->out);
    w->first[w->depth] = 0;
}

static BENCH_UNUSED void jw_str_raw(jw *w, const char *s) {
    fputc('"', w->out);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(w->out, "\\%c", c);
        else if (c < 0x20) fprintf(w->out, "\\u%04x", c);
        else fputc(c, w->out);
    }
    fputc('"', w->out);
}

static BENCH_UNUSED void jw_begin(jw *w, FILE *out) {
    w->out = out;
    w->depth = 0;
    w->first[0] = 1;
    fputc('{', out);
}

static BENCH_UNUSED void jw_end(jw *w) {
    fputs("}\n", w->out);
    fflush(w->out);
}

static BENCH_UNUSED void jw_key(jw *w, const char *key) {
    jw_sep(w);
    jw_str_raw(w, key);
    fputc(':', w->out);
}

static BENCH_UNUSED void jw_num(jw *w, const char *key, double v) {
    jw_key(w, key);
    fprintf(w->out, "%.9g", v);
}

static BENCH_UNUSED void jw_int(jw *w, const char *key, long long v) {
    jw_key(w, key);
    fprintf(w->out, "%lld", v);
}

static BENCH_UNUSED void jw_string(jw *w, const char *key, const char *v) {
    jw_key(w, key);
    if (v) jw_str_raw(w, v);
    else fputs("null", w->out);
}

static BENCH_UNUSED void jw_array(jw *w, const char *key, const double *v, size_t n) {
    jw_key(w, key);
    fputc('[', w->out);
    for (size_t i = 0; i < n; i++) fprintf(w->out, "%s%.9g", i ? "," : "", v[i]);
    fputc(']', w->out);
}

static BENCH_UNUSED void jw_open(jw *w, const char *key) {
    jw_key(w, key);
    fputc('{', w->out);
    w->first[++w->depth] = 1;
}

static BENCH_UNUSED void jw_close(jw *w) {
    fputc('}', w->out);
    w->depth--;
}

/* ---- scratch directories ------------------------------------------------- */

static BENCH_UNUSED char *scratch_dir(const char *tag) {
    const char *base = getenv("BENCH_TMP");
    if (!base || !*base) base = "/tmp";
    char *path = malloc(4096);
    if (!path) die("out of memory");
    snprintf(path, 4096, "%s/appnorth-bench-%s-XXXXXX", base, tag);
    if (!mkdtemp(path)) die("mkdtemp %s: %s", path, strerror(errno));
    return path;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

static BENCH_UNUSED void remove_tree(const char *path) {
    if (path) nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- loopback ports ------------------------------------------------------ */

/* A loopback port that nothing listens on: bound, read and closed again.
 * Connections to it are refused at once. */
static BENCH_UNUSED int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) die("closed_port: %s", strerror(errno));
    int port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* ---- the dev server's admin API, through plain libcurl ------------------- */

/* Tests/c/admin.h: admin_request_text() (the body as text) and
 * admin_request() (parsed by jansson), shared with the C tests. */
#include "../../Tests/c/admin.h"

/* ---- the library, checked ------------------------------------------------ */

/* Calls that pass &E as their error out-parameter; a failure ends the run
 * with the library's message. (One thread at a time: E is shared.) */
static BENCH_UNUSED appnorth_error E;
#define CHECK(call)                                                                     \
    do {                                                                                \
        int32_t check_rc_ = (call);                                                     \
        if (check_rc_ != 0) die("%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call,       \
                                appnorth_status_str(check_rc_), E.message);             \
    } while (0)

/* Small properties, as the issue asks: a handful of keys, ~100 bytes. */
#define BENCH_PROPERTIES \
    "{\"screen\":\"home\",\"price\":9.99,\"items\":3,\"premium\":true,\"ref\":\"campaign-42\"}"
#define BENCH_EVENT_NAME "screen_view"

static BENCH_UNUSED int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

/* A client for `url` and `app`, anonymous, short timeouts. */
static BENCH_UNUSED appnorth_client *make_client(const char *url, const char *app) {
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client *c = NULL;
    CHECK(appnorth_client_options_set_api_url(o, url, &E));
    CHECK(appnorth_client_options_set_app_id(o, app, &E));
    CHECK(appnorth_client_options_set_timeouts(o, 10000, 10000, &E));
    CHECK(appnorth_client_new(o, &c, &E));
    appnorth_client_options_free(o);
    return c;
}

/* An events handle in `dir`. No automatic flush before `threshold` events
 * wait (the flush interval is a day); `max_events` queue limit (bytes limit
 * 1 GiB); `retries` retries, 1 s apart, after a failed upload. */
static BENCH_UNUSED appnorth_events *make_events(appnorth_client *client, const char *dir, int32_t threshold,
                                                 int32_t max_events, int32_t retries) {
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events *ev = NULL;
    CHECK(appnorth_events_options_set_client(o, client, &E));
    CHECK(appnorth_events_options_set_data_dir(o, dir, &E));
    CHECK(appnorth_events_options_set_flush_policy(o, 86400000, threshold, &E));
    CHECK(appnorth_events_options_set_limits(o, max_events, max_events > 10000 ? (int64_t)1 << 30 : 5242880,
                                             65536, &E));
    CHECK(appnorth_events_options_set_retry(o, 1000, retries, 120000, 100, &E));
    CHECK(appnorth_events_new(o, &ev, &E));
    appnorth_events_options_free(o);
    return ev;
}

/* A URL nothing answers on. */
static BENCH_UNUSED char *closed_url(void) {
    char *url = malloc(64);
    if (!url) die("out of memory");
    snprintf(url, 64, "http://127.0.0.1:%d", closed_port());
    return url;
}

/* VmRSS (or another /proc/self/status field) in KiB. */
static BENCH_UNUSED long proc_status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') { v = atol(line + n + 1); break; }
    fclose(f);
    return v;
}

/* Runs this program again (/proc/self/exe) with `args` (NULL-terminated,
 * without argv[0]) in a fresh process and returns its stdout (malloc'd).
 * *t_spawn receives the monotonic time just before the process was made. */
#include <spawn.h>
#include <sys/wait.h>
extern char **environ;
static BENCH_UNUSED char *run_self(const char *const *args, uint64_t *t_spawn) {
    int fds[2];
    if (pipe(fds) != 0) die("pipe: %s", strerror(errno));
    const char *argv[16] = {"bench-child"};
    int n = 1;
    for (; args[n - 1] && n < 15; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    *t_spawn = now_ns();
    if (posix_spawn(&pid, "/proc/self/exe", &fa, NULL, (char *const *)argv, environ) != 0)
        die("posix_spawn: %s", strerror(errno));
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    admin_buffer out = {0};
    char chunk[4096];
    ssize_t got;
    while ((got = read(fds[0], chunk, sizeof chunk)) > 0) admin_write(chunk, 1, (size_t)got, &out);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) die("child failed (status %d)", status);
    if (!out.data) die("child printed nothing");
    return out.data;
}

/* A number after "key": in a flat JSON text; NAN if absent. */
#include <math.h>
static BENCH_UNUSED double json_number(const char *text, const char *key) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(text, pattern);
    return p ? strtod(p + strlen(pattern), NULL) : NAN;
}

#endif /* APPNORTH_BENCH_H */
