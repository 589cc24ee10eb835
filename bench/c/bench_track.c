/* track() from C against the old floor: a bare SQLite WAL insert of the same
 * row bytes, measured in the same process, interleaved in rounds. track()
 * itself appends to the handle's journal file; the bare insert is what each
 * track() paid when it committed to SQLite on the calling thread.
 *
 *   library: appnorth_events_track(events, "screen_view", BENCH_PROPERTIES)
 *   bare:    one autocommit INSERT INTO events (id, payload, bytes) through a
 *            cached prepared statement, into the library's own table schema
 *            (migration 2 in SQLiteStore.swift), same pragmas
 *            (journal_mode=WAL, synchronous=NORMAL, foreign_keys=ON), same
 *            open flags (FULLMUTEX), a fresh UUID-like id per row, and the
 *            payload bytes of a real event the library just journaled (its
 *            id replaced by the row's id).
 *
 * Rounds alternate which side goes first, so drift (page cache, WAL
 * checkpoints, a noisy neighbour) hits both. Every call is timed with
 * CLOCK_MONOTONIC; events/s is the round's count over the round's wall time.
 *
 * Rounds hold fewer than 10,000 events and both queues are emptied before
 * each round: a live app's queue stays short (the upload thread drains it),
 * and a queue at the flush threshold would wake the upload thread on every
 * call, which is the offline case measured last.
 *
 * Two more sides run in the same rounds, as yardsticks: the raw limit (one
 * writev() of a 16-byte header and the same payload to an O_APPEND file in
 * the same file system, no library), and the control, a pure computation as
 * long as track()'s median call (no memory, no system call), whose p99 is
 * what the machine alone does to an operation of that length.
 *
 * Then: 4 threads tracking into one handle (aggregate events/s) against one
 * thread on the same handle, in rounds of 40,000 events; the control's
 * scaling in the same rounds (the same split of work as pure computation:
 * how much of a second core the machine gives); the bare
 * insert from 4 threads on one connection behind a mutex (the library's own
 * arrangement, before the journal), and track() offline with the default
 * options: 10,000 events queued (the cap: the journal is drained and the
 * oldest dropped once per 100 events past it) and the queue above the flush
 * threshold after a failed upload.
 *
 * No upload succeeds during any of this: the client points at a closed
 * loopback port; the flush threshold is 10,000 events with no retries except
 * in the offline case.
 *
 * env: BENCH_TRACK_EVENTS (100000 per side), BENCH_TRACK_ROUNDS (20),
 *      BENCH_THREADS (4), BENCH_THREADS_EVENTS (40000 per round).
 */
#include "bench.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../Tests/c/journal.h"

/* ---- the bare side --------------------------------------------------------- */

static const char *BARE_SCHEMA =
    "CREATE TABLE IF NOT EXISTS events ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE,"
    " payload BLOB NOT NULL,"
    " bytes INTEGER NOT NULL)";

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *insert;
    unsigned char *row;   /* the payload template, id rewritten per row */
    size_t row_len;
    size_t id_offset;     /* where the 36-character id sits in the payload */
    uint64_t rng;
    pthread_mutex_t lock; /* for the multi-thread run: one connection, as the library */
} bare_db;

static void exec_or_die(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) die("sqlite: %s: %s", sql, msg ? msg : "?");
}

static void bare_open(bare_db *b, const char *path, const unsigned char *payload, size_t len) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    if (sqlite3_open_v2(path, &b->db, flags, NULL) != SQLITE_OK) die("open %s", path);
    sqlite3_busy_timeout(b->db, 5000);
    exec_or_die(b->db, "PRAGMA journal_mode=WAL");
    exec_or_die(b->db, "PRAGMA synchronous=NORMAL");
    exec_or_die(b->db, "PRAGMA foreign_keys=ON");
    exec_or_die(b->db, BARE_SCHEMA);
    if (sqlite3_prepare_v3(b->db, "INSERT INTO events (id, payload, bytes) VALUES (?, ?, ?)", -1,
                           SQLITE_PREPARE_PERSISTENT, &b->insert, NULL) != SQLITE_OK)
        die("prepare: %s", sqlite3_errmsg(b->db));
    b->row = malloc(len);
    memcpy(b->row, payload, len);
    b->row_len = len;
    const char *id = strstr((const char *)payload, "{\"id\":\"");
    if (id != (const char *)payload) die("payload does not start with its id: %.60s", payload);
    b->id_offset = 7;
    b->rng = now_ns() | 1;
    pthread_mutex_init(&b->lock, NULL);
}

/* splitmix64: cheap, good enough for unique ids in a benchmark. */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A UUID-shaped id: 8-4-4-4-12 lowercase hex. */
static void make_id(uint64_t *state, char out[37]) {
    static const char hex[] = "0123456789abcdef";
    uint64_t a = next_random(state), b = next_random(state);
    int k = 0;
    for (int i = 0; i < 32; i++) {
        if (i == 8 || i == 12 || i == 16 || i == 20) out[k++] = '-';
        uint64_t word = i < 16 ? a : b;
        out[k++] = hex[(word >> ((i % 16) * 4)) & 0xF];
    }
    out[36] = 0;
}

/* One bare insert: fresh id, the row bytes with that id, autocommit. */
static void bare_insert(bare_db *b, unsigned char *row, uint64_t *rng) {
    char id[37];
    make_id(rng, id);
    memcpy(row + b->id_offset, id, 36);
    sqlite3_bind_text(b->insert, 1, id, 36, SQLITE_STATIC);
    sqlite3_bind_blob(b->insert, 2, row, (int)b->row_len, SQLITE_STATIC);
    sqlite3_bind_int64(b->insert, 3, (sqlite3_int64)b->row_len);
    if (sqlite3_step(b->insert) != SQLITE_DONE) die("insert: %s", sqlite3_errmsg(b->db));
    sqlite3_reset(b->insert);
}

/* ---- timing loops ------------------------------------------------------------ */

typedef struct {
    double *lat_us;  /* per call */
    size_t n;
    double wall_s;
} run_result;

__attribute__((noinline)) static run_result time_library(appnorth_events *ev, size_t n) {
    run_result r = {malloc(n * sizeof(double)), n, 0};
    appnorth_error err;
    int32_t queued = 0;
    uint64_t start = now_ns();
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        int32_t rc = appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &err);
        uint64_t t1 = now_ns();
        if (rc != 0 || queued != 1) die("track: %s (%s)", appnorth_status_str(rc), err.message);
        r.lat_us[i] = (double)(t1 - t0) / 1000.0;
    }
    r.wall_s = (double)(now_ns() - start) / 1e9;
    return r;
}

__attribute__((noinline)) static run_result time_bare(bare_db *b, size_t n) {
    run_result r = {malloc(n * sizeof(double)), n, 0};
    uint64_t start = now_ns();
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        bare_insert(b, b->row, &b->rng);
        uint64_t t1 = now_ns();
        r.lat_us[i] = (double)(t1 - t0) / 1000.0;
    }
    r.wall_s = (double)(now_ns() - start) / 1e9;
    return r;
}

/* ---- the raw limit ------------------------------------------------------------ */

/* What track() writes, without the library: one writev() of a 16-byte
 * header and the same payload bytes to an O_APPEND file in the same file
 * system, a fresh file per round (the library's journal is purged between
 * rounds too). The floor of any process-durable append; what track() adds
 * above it is building and checking the event. */
typedef struct {
    char path[4200];
    int fd;
    unsigned char header[16];
    const unsigned char *payload;
    size_t len;
} raw_file;

static void raw_reopen(raw_file *f) {
    if (f->fd >= 0) close(f->fd);
    unlink(f->path);
    f->fd = open(f->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    if (f->fd < 0) die("open %s", f->path);
}

__attribute__((noinline)) static run_result time_raw(raw_file *f, size_t n) {
    run_result r = {malloc(n * sizeof(double)), n, 0};
    struct iovec parts[2] = {{f->header, sizeof f->header}, {(void *)f->payload, f->len}};
    uint64_t start = now_ns();
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        ssize_t wrote = writev(f->fd, parts, 2);
        uint64_t t1 = now_ns();
        if (wrote != (ssize_t)(sizeof f->header + f->len)) die("writev: short or failed");
        r.lat_us[i] = (double)(t1 - t0) / 1000.0;
    }
    r.wall_s = (double)(now_ns() - start) / 1e9;
    return r;
}

/* ---- the machine's own limits ------------------------------------------------ */

/* A pure computation: no memory beyond registers, no system call, nothing
 * shared. Timed like track(), it shows what the machine itself does to an
 * operation of that length at that moment (interrupts, a vCPU descheduled
 * by the hypervisor, frequency changes): the floor under track()'s p99.
 * Run by several threads, it shows how much of a second core the machine
 * gives: the ceiling over track()'s scaling. */
static volatile uint64_t spin_sink;

__attribute__((noinline)) static void spin(uint64_t iterations) {
    uint64_t x = iterations | 1;
    for (uint64_t i = 0; i < iterations; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x)); /* one dependent multiply per step, never folded */
    }
    spin_sink = x;
}

/* Spin iterations per microsecond on this machine (median of 7 tries). */
static double spin_per_us(void) {
    double tries[7];
    for (int i = 0; i < 7; i++) {
        uint64_t t0 = now_ns();
        spin(200000);
        tries[i] = 200000.0 / ((double)(now_ns() - t0) / 1000.0);
    }
    return median(tries, 7);
}

__attribute__((noinline)) static run_result time_spin(uint64_t iterations, size_t n) {
    run_result r = {malloc(n * sizeof(double)), n, 0};
    uint64_t start = now_ns();
    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        spin(iterations);
        uint64_t t1 = now_ns();
        r.lat_us[i] = (double)(t1 - t0) / 1000.0;
    }
    r.wall_s = (double)(now_ns() - start) / 1e9;
    return r;
}

/* ---- threads ------------------------------------------------------------------ */

typedef struct {
    appnorth_events *ev;
    bare_db *bare;
    uint64_t spin_iterations; /* the control: neither ev nor bare */
    size_t n;
    pthread_barrier_t *go;
    uint64_t start, end;
    uint64_t cpu_ns; /* the thread's own CPU time over its loop */
} worker;

/* CPU time the calling thread has used: unlike wall time, it does not grow
 * while the thread waits for a core, so CPU per event tells the cost of
 * sharing (locks, bouncing cache lines) apart from a lack of free cores. */
static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *library_worker(void *arg) {
    worker *w = arg;
    appnorth_error err;
    int32_t queued = 0;
    pthread_barrier_wait(w->go);
    uint64_t cpu = thread_cpu_ns();
    w->start = now_ns();
    for (size_t i = 0; i < w->n; i++) {
        int32_t rc = appnorth_events_track(w->ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &err);
        if (rc != 0) die("track (thread): %s (%s)", appnorth_status_str(rc), err.message);
    }
    w->end = now_ns();
    w->cpu_ns = thread_cpu_ns() - cpu;
    return NULL;
}

static void *spin_worker(void *arg) {
    worker *w = arg;
    pthread_barrier_wait(w->go);
    w->start = now_ns();
    for (size_t i = 0; i < w->n; i++) spin(w->spin_iterations);
    w->end = now_ns();
    return NULL;
}

static void *bare_worker(void *arg) {
    worker *w = arg;
    bare_db *b = w->bare;
    unsigned char *row = malloc(b->row_len);
    memcpy(row, b->row, b->row_len);
    uint64_t rng = now_ns() ^ (uint64_t)(uintptr_t)w;
    pthread_barrier_wait(w->go);
    w->start = now_ns();
    for (size_t i = 0; i < w->n; i++) {
        pthread_mutex_lock(&b->lock);
        bare_insert(b, row, &rng);
        pthread_mutex_unlock(&b->lock);
    }
    w->end = now_ns();
    free(row);
    return NULL;
}

/* Aggregate events/s of `threads` workers doing `per_thread` each (track()
 * on `ev`, bare inserts on `bare`, or else `spin_iterations` of the
 * control); with `cpu_us`, the CPU microseconds their calls used per event. */
static double run_threads(int threads, size_t per_thread, appnorth_events *ev, bare_db *bare,
                          uint64_t spin_iterations, double *cpu_us) {
    pthread_t tid[64];
    worker w[64];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){ev, bare, spin_iterations, per_thread, &go, 0, 0, 0};
        pthread_create(&tid[i], NULL, ev ? library_worker : bare ? bare_worker : spin_worker, &w[i]);
    }
    uint64_t first = UINT64_MAX, last = 0, cpu = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        if (w[i].start < first) first = w[i].start;
        if (w[i].end > last) last = w[i].end;
        cpu += w[i].cpu_ns;
    }
    if (cpu_us) *cpu_us = (double)cpu / 1000.0 / ((double)threads * (double)per_thread);
    pthread_barrier_destroy(&go);
    return (double)threads * (double)per_thread / ((double)(last - first) / 1e9);
}

/* ---- beside another process ---------------------------------------------------- */

/* track() on `ev` while a forked process tracks as fast as it can into the
 * same data directory `dir` (its own client and handle, as a second process
 * of an app would have, with the same options): `rounds` rounds of `n`
 * events. Both import into the one table. The child is killed at the end. */
static void time_beside_process(appnorth_events *ev, const char *dir, const char *url, size_t n, int rounds,
                                run_result *out) {
    int ready[2];
    if (pipe(ready) != 0) die("pipe");
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(ready[0]);
        appnorth_client *c = make_client(url, "bench-track");
        appnorth_events *other = make_events(c, dir, 10000, 10000000, 0);
        appnorth_error err;
        int32_t queued = 0;
        for (long i = 0;; i++) {
            appnorth_events_track(other, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &err);
            if (i == 20000 && write(ready[1], "r", 1) != 1) _exit(1);
        }
    }
    close(ready[1]);
    char byte;
    if (read(ready[0], &byte, 1) != 1) die("the tracking process did not start");
    close(ready[0]);
    for (int r = 0; r < rounds; r++) out[r] = time_library(ev, n);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
}

/* ---- output helpers ------------------------------------------------------------ */

static void write_side(jw *w, const char *key, run_result *rounds, int nrounds) {
    double p50[64], p99[64], p999[64], eps[64], mean[64];
    size_t total = 0;
    for (int r = 0; r < nrounds; r++) {
        p50[r] = quantile(rounds[r].lat_us, rounds[r].n, 0.50);
        p99[r] = quantile(rounds[r].lat_us, rounds[r].n, 0.99);
        p999[r] = quantile(rounds[r].lat_us, rounds[r].n, 0.999);
        eps[r] = (double)rounds[r].n / rounds[r].wall_s;
        mean[r] = rounds[r].wall_s * 1e6 / (double)rounds[r].n;
        total += rounds[r].n;
    }
    jw_open(w, key);
    jw_num(w, "p50_us", median(p50, (size_t)nrounds));
    jw_num(w, "p99_us", median(p99, (size_t)nrounds));
    jw_num(w, "p99_9_us", median(p999, (size_t)nrounds));
    jw_num(w, "events_per_s", median(eps, (size_t)nrounds));
    jw_num(w, "mean_us", median(mean, (size_t)nrounds));
    jw_int(w, "events", (long long)total);
    jw_array(w, "round_p50_us", p50, (size_t)nrounds);
    jw_array(w, "round_p99_us", p99, (size_t)nrounds);
    jw_array(w, "round_events_per_s", eps, (size_t)nrounds);
    jw_close(w);
}

typedef struct {
    unsigned char *copy;
    size_t len;
} last_payload;

static void keep_last(const unsigned char *bytes, size_t len, void *ctx) {
    last_payload *last = ctx;
    free(last->copy);
    last->copy = malloc(len + 1);
    memcpy(last->copy, bytes, len);
    last->copy[len] = 0;
    last->len = len;
}

/* A payload the library just journaled in `dir` (track() writes to the
 * journal; the upload thread moves events into SQLite later). */
static unsigned char *library_payload(const char *dir, size_t *len) {
    last_payload last = {NULL, 0};
    if (journal_each(dir, keep_last, &last) == 0 || !last.copy) die("no journaled payload in %s", dir);
    *len = last.len;
    return last.copy;
}

/* Empties both queues between rounds, outside the timed loops, so every
 * round starts from the same state and the library's queue never reaches
 * its flush threshold (which would wake the upload thread on each track).
 * The library's queue is emptied the public way: revoking consent purges it,
 * granting again lets the next events in. */
static void empty_queues(appnorth_events *ev, bare_db *bare) {
    CHECK(appnorth_events_set_consent(ev, 0, &E));
    CHECK(appnorth_events_set_consent(ev, 1, &E));
    if (bare) exec_or_die(bare->db, "DELETE FROM events");
}

/* #40: the features' cost. Each on a handle of its own, emptied like the
 * plain one, timed in the same rounds as the plain handle and the raw
 * append (writev): track() with 5 super properties registered, and with a
 * trivial C before_send hook (it keeps every event). */
#define FEATURE_SUPERS "{\"plan\":\"pro\",\"app_version\":\"4.2.1\",\"platform\":\"linux\",\"locale\":\"en-GB\",\"cohort\":17}"
enum { F_PLAIN, F_SUPERS, F_HOOK, F_RAW, F_COUNT };
static const char *const feature_keys[F_COUNT] = {"plain", "super_properties_5", "before_send_trivial", "raw_append"};

static int32_t keep_event(void *user_data, const char *event_json, appnorth_buffer *replacement) {
    (void)user_data, (void)event_json, (void)replacement;
    return APPNORTH_BEFORE_SEND_KEEP;
}

static void time_features(appnorth_client *client, appnorth_events *plain, raw_file *append, size_t per_round,
                          int rounds, run_result out[F_COUNT][64]) {
    char *dir = scratch_dir("track-supers");
    appnorth_events *supers = make_events(client, dir, 10000, 10000000, 0);
    CHECK(appnorth_events_register(supers, FEATURE_SUPERS, &E));
    char *hook_dir = scratch_dir("track-hook");
    appnorth_events *hooked = NULL;
    {
        appnorth_events_options *o = appnorth_events_options_new();
        CHECK(appnorth_events_options_set_client(o, client, &E));
        CHECK(appnorth_events_options_set_data_dir(o, hook_dir, &E));
        CHECK(appnorth_events_options_set_flush_policy(o, 86400000, 10000, &E));
        CHECK(appnorth_events_options_set_limits(o, 10000000, (int64_t)1 << 30, 65536, &E));
        CHECK(appnorth_events_options_set_retry(o, 1000, 0, 120000, 100, &E));
        CHECK(appnorth_events_options_set_before_send(o, keep_event, NULL, NULL, &E));
        CHECK(appnorth_events_new(o, &hooked, &E));
        appnorth_events_options_free(o);
    }
    run_result warm = time_library(supers, 2000);
    free(warm.lat_us);
    warm = time_library(hooked, 2000);
    free(warm.lat_us);
    for (int r = 0; r < rounds; r++) {
        empty_queues(plain, NULL);
        empty_queues(supers, NULL);
        empty_queues(hooked, NULL);
        raw_reopen(append);
        for (int k = 0; k < F_COUNT; k++) {
            int f = (r % 2 == 0) ? k : F_COUNT - 1 - k;
            out[f][r] = f == F_PLAIN ? time_library(plain, per_round)
                        : f == F_SUPERS ? time_library(supers, per_round)
                        : f == F_HOOK   ? time_library(hooked, per_round)
                                        : time_raw(append, per_round);
        }
        fprintf(stderr, "track features round %2d: plain p50 %.2f us, 5 super properties p50 %.2f us, trivial hook p50 "
                "%.2f us, raw append p50 %.2f us\n", r + 1, quantile(out[F_PLAIN][r].lat_us, per_round, 0.5),
                quantile(out[F_SUPERS][r].lat_us, per_round, 0.5), quantile(out[F_HOOK][r].lat_us, per_round, 0.5),
                quantile(out[F_RAW][r].lat_us, per_round, 0.5));
    }
    appnorth_events_free(supers);
    appnorth_events_free(hooked);
    remove_tree(dir);
    remove_tree(hook_dir);
}

/* `bench_track profile library|bare N`: only that side's loop, N events in
 * rounds of 5,000 on emptied queues, for a profiler (perf, callgrind). */
static int profile_main(const char *side, size_t n) {
    char *url = closed_url();
    appnorth_client *client = make_client(url, "bench-track");
    char *lib_dir = scratch_dir("profile-lib");
    char *bare_dir = scratch_dir("profile-bare");
    appnorth_events *ev = make_events(client, lib_dir, 10000, 10000000, 0);
    run_result warm = time_library(ev, 100);
    free(warm.lat_us);
    size_t payload_len = 0;
    unsigned char *payload = library_payload(lib_dir, &payload_len);
    char bare_path[4200];
    snprintf(bare_path, sizeof bare_path, "%s/bare.sqlite3", bare_dir);
    bare_db bare;
    bare_open(&bare, bare_path, payload, payload_len);
    int library = strcmp(side, "library") == 0;
    double p50[256];
    int rounds = 0;
    for (size_t done = 0; done < n && rounds < 256; rounds++) {
        size_t k = n - done < 5000 ? n - done : 5000;
        empty_queues(ev, &bare);
        run_result r = library ? time_library(ev, k) : time_bare(&bare, k);
        p50[rounds] = quantile(r.lat_us, r.n, 0.5);
        free(r.lat_us);
        done += k;
    }
    fprintf(stderr, "profile %s: %zu events, median round p50 %.2f us\n", side, n, median(p50, (size_t)rounds));
    appnorth_events_free(ev);
    appnorth_client_free(client);
    remove_tree(lib_dir);
    remove_tree(bare_dir);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "profile") == 0) return profile_main(argv[2], (size_t)atol(argv[3]));
    size_t total = (size_t)env_int("BENCH_TRACK_EVENTS", 100000);
    int rounds = env_int("BENCH_TRACK_ROUNDS", 20);
    int threads = env_int("BENCH_THREADS", 4);
    if (rounds < 2 || rounds > 64 || threads < 1 || threads > 64) die("bad rounds/threads");
    size_t per_round = total / (size_t)rounds;
    if (per_round >= 10000) die("BENCH_TRACK_EVENTS / BENCH_TRACK_ROUNDS must stay under 10000");
    size_t warmup = 2000;

    char *url = closed_url();
    appnorth_client *client = make_client(url, "bench-track");
    char *lib_dir = scratch_dir("track-lib");
    char *bare_dir = scratch_dir("track-bare");
    appnorth_events *ev = make_events(client, lib_dir, 10000, 10000000, 0);

    /* Warm both sides up; the bare side copies a real payload. */
    run_result wl = time_library(ev, warmup);
    free(wl.lat_us);
    size_t payload_len = 0;
    unsigned char *payload = library_payload(lib_dir, &payload_len);
    char bare_path[4200];
    snprintf(bare_path, sizeof bare_path, "%s/bare.sqlite3", bare_dir);
    bare_db bare;
    bare_open(&bare, bare_path, payload, payload_len);
    run_result wb = time_bare(&bare, warmup);
    free(wb.lat_us);

    /* The control (see spin()): as long as track()'s median call, measured
     * on the warm handle, and timed the same way in the same rounds. */
    empty_queues(ev, &bare);
    run_result calibrate = time_library(ev, warmup);
    double track_p50_us = quantile(calibrate.lat_us, calibrate.n, 0.5);
    double track_mean_us = calibrate.wall_s * 1e6 / (double)calibrate.n;
    free(calibrate.lat_us);
    double per_us = spin_per_us();
    uint64_t spin_op = (uint64_t)(track_p50_us * per_us + 0.5);
    if (spin_op < 1) spin_op = 1;

    raw_file append = {.fd = -1, .payload = payload, .len = payload_len};
    snprintf(append.path, sizeof append.path, "%s/raw.journal", bare_dir);
    memset(append.header, 0x5A, sizeof append.header);

    run_result lib[64], raw[64], ctl[64], lim[64];
    double ratio[64];
    for (int r = 0; r < rounds; r++) {
        empty_queues(ev, &bare);
        raw_reopen(&append);
        if (r % 2 == 0) {
            lib[r] = time_library(ev, per_round);
            raw[r] = time_bare(&bare, per_round);
            lim[r] = time_raw(&append, per_round);
            ctl[r] = time_spin(spin_op, per_round);
        } else {
            ctl[r] = time_spin(spin_op, per_round);
            lim[r] = time_raw(&append, per_round);
            raw[r] = time_bare(&bare, per_round);
            lib[r] = time_library(ev, per_round);
        }
        ratio[r] = quantile(lib[r].lat_us, lib[r].n, 0.5) / quantile(raw[r].lat_us, raw[r].n, 0.5);
        fprintf(stderr, "track round %2d: library p50 %.2f us p99 %.2f us, bare p50 %.2f us, ratio %.3f; "
                "raw append p50 %.2f us p99 %.2f us; control p50 %.2f us p99 %.2f us\n", r + 1,
                quantile(lib[r].lat_us, lib[r].n, 0.5), quantile(lib[r].lat_us, lib[r].n, 0.99),
                quantile(raw[r].lat_us, raw[r].n, 0.5), ratio[r],
                quantile(lim[r].lat_us, lim[r].n, 0.5), quantile(lim[r].lat_us, lim[r].n, 0.99),
                quantile(ctl[r].lat_us, ctl[r].n, 0.5), quantile(ctl[r].lat_us, ctl[r].n, 0.99));
    }
    static run_result feat[F_COUNT][64];
    time_features(client, ev, &append, per_round, rounds, feat);
    close(append.fd);
    unlink(append.path);
    double lib_eps[64], raw_eps[64], tratio[64];
    for (int r = 0; r < rounds; r++) {
        lib_eps[r] = (double)lib[r].n / lib[r].wall_s;
        raw_eps[r] = (double)raw[r].n / raw[r].wall_s;
        tratio[r] = raw_eps[r] / lib_eps[r];
    }

    /* Threads: one handle, one bare connection behind a mutex, interleaved
     * with the single-thread figure on the same handle at the same moment.
     * BENCH_TRACK_ONLY_SINGLE=1 skips this and the offline case (for quick
     * A/B runs of a library change). */
    int only_single = env_int("BENCH_TRACK_ONLY_SINGLE", 0);
    int mt_rounds = only_single ? 1 : 9;
    /* Rounds of BENCH_THREADS_EVENTS (40,000) events, about 0.1 s: in
     * windows of a few milliseconds, starting the threads and the last
     * thread finishing alone weigh as much as the scaling itself. That is
     * past the flush threshold, so the upload thread must stay asleep as in
     * the rounds above: one failed upload (the port is closed) does that,
     * since track() then leaves the next attempt to the timer (a day
     * away). The bare side keeps rounds of `per_round` rows (it is slow). */
    size_t mt_events = (size_t)env_int("BENCH_THREADS_EVENTS", only_single ? (int)per_round : 40000);
    if (mt_events < (size_t)threads || mt_events > 1000000) die("bad BENCH_THREADS_EVENTS");
    if (!only_single) {
        appnorth_error flush_err;
        if (appnorth_events_flush(ev, 30000, &flush_err) == APPNORTH_OK) die("an upload to a closed port succeeded");
    }
    size_t per_thread = mt_events / (size_t)threads;
    uint64_t spin_event = (uint64_t)(track_mean_us * per_us + 0.5);
    if (spin_event < 1) spin_event = 1;
    double mt_lib[16], mt_raw[16], st_lib[16], mt_cpu[16], st_cpu[16], mt_ctl[16];
    for (int r = 0; r < mt_rounds; r++) {
        empty_queues(ev, &bare);
        mt_lib[r] = run_threads(threads, per_thread, ev, NULL, 0, &mt_cpu[r]);
        empty_queues(ev, &bare);
        uint64_t cpu = thread_cpu_ns();
        run_result one = time_library(ev, per_thread * (size_t)threads);
        st_cpu[r] = (double)(thread_cpu_ns() - cpu) / 1000.0 / (double)one.n;
        st_lib[r] = (double)one.n / one.wall_s;
        free(one.lat_us);
        /* The control: the same split of work as pure computation, each
         * unit as long as one track() call on average. */
        double spin_many = run_threads(threads, per_thread, NULL, NULL, spin_event, NULL);
        uint64_t t0 = now_ns();
        for (size_t i = 0; i < per_thread * (size_t)threads; i++) spin(spin_event);
        double spin_one = (double)(per_thread * (size_t)threads) / ((double)(now_ns() - t0) / 1e9);
        mt_ctl[r] = spin_many / spin_one;
        mt_raw[r] = run_threads(threads, per_round / (size_t)threads, NULL, &bare, 0, NULL);
        fprintf(stderr,
                "track threads round %d: library %d threads %.0f/s (1 thread %.0f/s: %.2fx; CPU per event %.2f us, "
                "1 thread %.2f us), control %.2fx, bare %d threads %.0f/s\n",
                r + 1, threads, mt_lib[r], st_lib[r], mt_lib[r] / st_lib[r], mt_cpu[r], st_cpu[r], mt_ctl[r],
                threads, mt_raw[r]);
    }

    /* Offline with the default options: the client cannot reach its server,
     * 10,000 events are queued (the default cap), each new event drops the
     * oldest, and the queue is above the default flush threshold (20). */
    char *cap_dir = scratch_dir("track-cap");
    appnorth_events *cap = NULL;
    {
        appnorth_events_options *o = appnorth_events_options_new();
        CHECK(appnorth_events_options_set_client(o, client, &E));
        CHECK(appnorth_events_options_set_data_dir(o, cap_dir, &E));
        CHECK(appnorth_events_new(o, &cap, &E));
        appnorth_events_options_free(o);
    }
    run_result fill = time_library(cap, only_single ? 10 : 10000);
    free(fill.lat_us);
    if (!only_single) sleep_ms(8000); /* let the first upload cycle and its 3 retries (1+2+4 s) fail */
    run_result at_cap = time_library(cap, only_single ? 10 : 10000);

    /* Beside another process tracking flat out into the same directory. */
    int beside_rounds = only_single ? 2 : 10;
    run_result beside[64];
    time_beside_process(ev, lib_dir, url, per_round, beside_rounds, beside);

    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "track");
    jw_int(&w, "payload_bytes", (long long)payload_len);
    jw_string(&w, "payload_sample", (const char *)payload);
    jw_string(&w, "properties", BENCH_PROPERTIES);
    jw_int(&w, "rounds", rounds);
    jw_int(&w, "events_per_round", (long long)per_round);
    jw_open(&w, "single");
    write_side(&w, "library", lib, rounds);
    write_side(&w, "bare", raw, rounds);
    jw_num(&w, "ratio_p50", median(ratio, (size_t)rounds));
    jw_array(&w, "round_ratio_p50", ratio, (size_t)rounds);
    jw_num(&w, "ratio_throughput", median(tratio, (size_t)rounds));
    write_side(&w, "raw_append", lim, rounds);
    write_side(&w, "control", ctl, rounds);
    jw_close(&w);
    jw_open(&w, "threads");
    jw_int(&w, "threads", threads);
    jw_int(&w, "events_per_round", (long long)(per_thread * (size_t)threads));
    jw_num(&w, "control_ratio", median(mt_ctl, (size_t)mt_rounds));
    jw_array(&w, "round_control_ratio", mt_ctl, (size_t)mt_rounds);
    jw_num(&w, "library_events_per_s", median(mt_lib, (size_t)mt_rounds));
    jw_num(&w, "library_single_events_per_s", median(st_lib, (size_t)mt_rounds));
    jw_num(&w, "bare_events_per_s", median(mt_raw, (size_t)mt_rounds));
    jw_num(&w, "library_cpu_us_per_event", median(mt_cpu, (size_t)mt_rounds));
    jw_num(&w, "library_single_cpu_us_per_event", median(st_cpu, (size_t)mt_rounds));
    jw_array(&w, "round_library_events_per_s", mt_lib, (size_t)mt_rounds);
    jw_array(&w, "round_library_single_events_per_s", st_lib, (size_t)mt_rounds);
    jw_array(&w, "round_bare_events_per_s", mt_raw, (size_t)mt_rounds);
    jw_close(&w);
    jw_open(&w, "features");
    for (int f = 0; f < F_COUNT; f++) write_side(&w, feature_keys[f], feat[f], rounds);
    jw_close(&w);
    jw_open(&w, "beside_process");
    write_side(&w, "library", beside, beside_rounds);
    jw_close(&w);
    jw_open(&w, "offline_at_cap");
    jw_num(&w, "p50_us", quantile(at_cap.lat_us, at_cap.n, 0.5));
    jw_num(&w, "p99_us", quantile(at_cap.lat_us, at_cap.n, 0.99));
    jw_num(&w, "p99_9_us", quantile(at_cap.lat_us, at_cap.n, 0.999));
    jw_num(&w, "events_per_s", (double)at_cap.n / at_cap.wall_s);
    jw_close(&w);
    jw_end(&w);

    appnorth_events_free(ev);
    appnorth_events_free(cap);
    appnorth_client_free(client);
    sqlite3_finalize(bare.insert);
    sqlite3_close(bare.db);
    remove_tree(lib_dir);
    remove_tree(bare_dir);
    remove_tree(cap_dir);
    return 0;
}
