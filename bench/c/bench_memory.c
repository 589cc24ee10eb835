/* Memory: RSS growth of a host that queues 10,000 events (they belong on
 * disk, not in RAM).
 *
 * A fresh process (this program re-executed, BENCH_MEMORY_RUNS times, 3 by
 * default) makes a client and an events handle with the default options,
 * offline (its client points at a closed loopback port, so the upload
 * thread's attempts fail and every event stays queued), tracks one event,
 * reads VmRSS from /proc/self/status, tracks 10,000 more (the default cap:
 * 10,000 queued), and reads VmRSS and VmHWM again. Reported: the growth
 * (median over runs), and the process's RSS before and after.
 */
#include "bench.h"

static int child(void) {
    long start_kb = proc_status_kb("VmRSS");
    char *url = closed_url();
    char *dir = scratch_dir("memory");
    appnorth_client *client = make_client(url, "bench-memory");
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events *ev = NULL;
    CHECK(appnorth_events_options_set_client(o, client, &E));
    CHECK(appnorth_events_options_set_data_dir(o, dir, &E));
    CHECK(appnorth_events_new(o, &ev, &E));
    appnorth_events_options_free(o);
    int32_t queued = 0;
    CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
    long before_kb = proc_status_kb("VmRSS");
    for (int i = 0; i < 10000; i++) CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
    long after_kb = proc_status_kb("VmRSS");
    long hwm_kb = proc_status_kb("VmHWM");
    char *stats = NULL;
    CHECK(appnorth_events_stats(ev, &stats, &E));
    double q = json_number(stats, "queued");
    appnorth_string_free(stats);
    printf("{\"start_kb\":%ld,\"before_kb\":%ld,\"after_kb\":%ld,\"hwm_kb\":%ld,\"queued\":%.0f}\n", start_kb, before_kb,
           after_kb, hwm_kb, q);
    fflush(stdout);
    appnorth_events_free(ev);
    appnorth_client_free(client);
    remove_tree(dir);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "child") == 0) return child();
    int runs = env_int("BENCH_MEMORY_RUNS", 3);
    if (runs < 1 || runs > 50) die("bad BENCH_MEMORY_RUNS");
    double growth[50], before[50], after[50], hwm[50], start[50];
    const char *args[] = {"child", NULL};
    for (int i = 0; i < runs; i++) {
        uint64_t t = 0;
        char *out = run_self(args, &t);
        if (json_number(out, "queued") != 10000) die("expected 10000 queued events: %s", out);
        start[i] = json_number(out, "start_kb") / 1024;
        before[i] = json_number(out, "before_kb") / 1024;
        after[i] = json_number(out, "after_kb") / 1024;
        hwm[i] = json_number(out, "hwm_kb") / 1024;
        growth[i] = after[i] - before[i];
        free(out);
        fprintf(stderr, "memory run %d: RSS %.1f MB -> %.1f MB with 10,000 queued (growth %.2f MB)\n", i + 1,
                before[i], after[i], growth[i]);
    }
    size_t n = (size_t)runs;
    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "memory");
    jw_int(&w, "runs", runs);
    jw_num(&w, "growth_mb", median(growth, n));
    jw_num(&w, "rss_at_main_mb", median(start, n));
    jw_num(&w, "rss_before_mb", median(before, n));
    jw_num(&w, "rss_after_mb", median(after, n));
    jw_num(&w, "hwm_mb", median(hwm, n));
    jw_array(&w, "runs_growth_mb", growth, n);
    jw_end(&w);
    return 0;
}
