/* The non-blocking calls (issue 21 part B):
 *
 *   latency:    one read (list_boards) on one client: the blocking call's
 *               duration against the non-blocking one's, from the start
 *               call to its completion callback (default mode: the callback
 *               runs on the transfer thread; the clock stops inside it).
 *               ROUNDS pairs, interleaved, after a warm-up; medians.
 *   in flight:  256 reads started at once on one client, all awaited; the
 *               reads a second, and the process's threads (/proc/self/status)
 *               before, right after the starts and after. Against 8 host
 *               threads making 32 blocking reads each on one client (256
 *               reads). ROUNDS_256 rounds of each, interleaved; medians.
 *
 * usage: bench_async SERVER_URL
 */
#include "bench.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/resource.h>

enum { ROUNDS = 200, IN_FLIGHT = 256, HOST_THREADS = 8, ROUNDS_256 = 7 };

static appnorth_client *make(const char *url, const char *app) {
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK(appnorth_client_options_set_api_url(o, url, &E));
    CHECK(appnorth_client_options_set_app_id(o, app, &E));
    appnorth_client *c = NULL;
    CHECK(appnorth_client_new(o, &c, &E));
    appnorth_client_options_free(o);
    return c;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int completed, failed;
static uint64_t completed_at;
/* The count the main thread waits for: it is woken once, when it is
 * reached (waking it on each of 256 completions would add 255 wake-ups of
 * the harness's own to the figure, on the cores the server needs). */
static int waiting_for;

static void on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op, (void)err, (void)json, (void)user;
    uint64_t at = now_ns();
    pthread_mutex_lock(&mu);
    completed++;
    if (status != APPNORTH_OK) failed++;
    completed_at = at;
    if (completed >= waiting_for) pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void wait_for(int count) {
    pthread_mutex_lock(&mu);
    waiting_for = count;
    while (completed < count) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

static void reset(void) {
    pthread_mutex_lock(&mu);
    completed = failed = 0;
    pthread_mutex_unlock(&mu);
}

static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    }
    if (f) fclose(f);
    return n;
}

/* CPU seconds (user + system) of the library's transfer thread so far. */
static double transfer_thread_cpu_s(void) {
    DIR *tasks = opendir("/proc/self/task");
    double total = 0;
    struct dirent *e;
    while (tasks && (e = readdir(tasks))) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "", stat[1024];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, "appnorth-xfer") != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        if (fgets(stat, sizeof stat, f)) {
            const char *p = strrchr(stat, ')');
            unsigned long utime = 0, stime = 0;
            /* fields 14 and 15 (utime, stime) after the command's ')' */
            if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2)
                total += (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
        }
        fclose(f);
    }
    if (tasks) closedir(tasks);
    return total;
}

/* CPU seconds (user + system) of the whole process so far: the library's
 * own cost per read, which the server's speed does not set. */
static double process_cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static double blocking_read_ms(appnorth_client *c) {
    char *json = NULL;
    uint64_t t0 = now_ns();
    CHECK(appnorth_client_list_boards(c, &json, &E));
    double ms = (double)(now_ns() - t0) / 1e6;
    appnorth_string_free(json);
    return ms;
}

static double async_read_ms(appnorth_client *c) {
    reset();
    uint64_t t0 = now_ns();
    CHECK(appnorth_client_list_boards_async(c, on_done, NULL, NULL, &E));
    wait_for(1);
    if (failed) die("a non-blocking read failed");
    return (double)(completed_at - t0) / 1e6;
}

typedef struct {
    appnorth_client *client;
    int reads;
} worker;

static void *blocking_worker(void *arg) {
    worker *w = arg;
    for (int i = 0; i < w->reads; i++) {
        char *json = NULL;
        CHECK(appnorth_client_list_boards(w->client, &json, &E));
        appnorth_string_free(json);
    }
    return NULL;
}

/* Reads a second of 256 blocking reads on HOST_THREADS threads. */
static double blocking_threads_rate(appnorth_client *c) {
    pthread_t threads[HOST_THREADS];
    worker w = {c, IN_FLIGHT / HOST_THREADS};
    uint64_t t0 = now_ns();
    for (int i = 0; i < HOST_THREADS; i++) pthread_create(&threads[i], NULL, blocking_worker, &w);
    for (int i = 0; i < HOST_THREADS; i++) pthread_join(threads[i], NULL);
    return IN_FLIGHT / ((double)(now_ns() - t0) / 1e9);
}

/* Reads a second of 256 non-blocking reads in flight at once. */
static double in_flight_rate(appnorth_client *c, int *threads_during, int *ok) {
    reset();
    uint64_t t0 = now_ns();
    for (int i = 0; i < IN_FLIGHT; i++) CHECK(appnorth_client_list_boards_async(c, on_done, NULL, NULL, &E));
    int during = thread_count();
    if (during > *threads_during) *threads_during = during;
    wait_for(IN_FLIGHT);
    double rate = IN_FLIGHT / ((double)(completed_at - t0) / 1e9);
    *ok += IN_FLIGHT - failed;
    return rate;
}

int main(int argc, char **argv) {
    const char *server = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    if (!server) die("usage: bench_async SERVER_URL");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char app[64];
    snprintf(app, sizeof app, "bench-async-%d", (int)getpid());
    char path[128], *reply = NULL;
    snprintf(path, sizeof path, "/admin/apps/%s/boards", app);
    admin_request_text(server, "POST", path, "{\"name\":\"Features\",\"description\":\"bench\"}", &reply);
    free(reply);

    appnorth_client *c = make(server, app);
    int threads_before = thread_count();
    for (int i = 0; i < 20; i++) {
        blocking_read_ms(c);
        async_read_ms(c);
    }
    static double blocking[ROUNDS], nonblocking[ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        if (i % 2 == 0) {
            blocking[i] = blocking_read_ms(c);
            nonblocking[i] = async_read_ms(c);
        } else {
            nonblocking[i] = async_read_ms(c);
            blocking[i] = blocking_read_ms(c);
        }
    }

    double rate_async[ROUNDS_256], rate_threads[ROUNDS_256];
    int threads_during = 0, ok = 0;
    blocking_threads_rate(c);  /* warm: the 8 threads' connections */
    in_flight_rate(c, &threads_during, &ok);
    ok = 0;
    double busy = 0, wall = 0, cpu_async[ROUNDS_256], cpu_threads[ROUNDS_256];
    for (int r = 0; r < ROUNDS_256; r++) {
        double cpu0 = transfer_thread_cpu_s(), p0 = process_cpu_s();
        uint64_t t0 = now_ns();
        rate_async[r] = in_flight_rate(c, &threads_during, &ok);
        wall += (double)(now_ns() - t0) / 1e9;
        busy += transfer_thread_cpu_s() - cpu0;
        double p1 = process_cpu_s();
        cpu_async[r] = (p1 - p0) * 1e6 / IN_FLIGHT;
        rate_threads[r] = blocking_threads_rate(c);
        cpu_threads[r] = (process_cpu_s() - p1) * 1e6 / IN_FLIGHT;
    }
    int threads_after = thread_count();
    appnorth_client_free(c);

    double b50 = median(blocking, ROUNDS), a50 = median(nonblocking, ROUNDS);
    double ra = median(rate_async, ROUNDS_256), rt = median(rate_threads, ROUNDS_256);
    double ca = median(cpu_async, ROUNDS_256), ct = median(cpu_threads, ROUNDS_256);
    fprintf(stderr, "read: blocking p50 %.3f ms, non-blocking p50 %.3f ms (%.2fx); 256 in flight %.0f/s vs "
            "8 threads %.0f/s (transfer thread busy %.0f%% of the time); client CPU per read %.0f vs %.0f us; threads %d -> %d -> %d\n",
            b50, a50, a50 / b50, ra, rt, wall > 0 ? 100 * busy / wall : 0, ca, ct, threads_before, threads_during, threads_after);
    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "async");
    jw_num(&w, "blocking_p50_ms", b50);
    jw_num(&w, "async_p50_ms", a50);
    jw_num(&w, "async_p99_ms", quantile(nonblocking, ROUNDS, 0.99));
    jw_num(&w, "ratio_p50", a50 / b50);
    jw_int(&w, "rounds", ROUNDS);
    jw_int(&w, "in_flight", IN_FLIGHT);
    jw_int(&w, "in_flight_ok", ok);
    jw_int(&w, "in_flight_expected", IN_FLIGHT * ROUNDS_256);
    jw_num(&w, "in_flight_per_s", ra);
    jw_num(&w, "threads8_per_s", rt);
    jw_num(&w, "in_flight_cpu_us_per_read", ca);
    jw_num(&w, "threads8_cpu_us_per_read", ct);
    jw_num(&w, "transfer_thread_busy", wall > 0 ? busy / wall : 0);
    jw_int(&w, "threads_before", threads_before);
    jw_int(&w, "threads_during", threads_during);
    jw_int(&w, "threads_after", threads_after);
    jw_end(&w);
    return 0;
}
