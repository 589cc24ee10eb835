/* Cold start: a fresh process opens an existing data directory, loads the
 * cached config (when remote config is in this build), and is ready to
 * track.
 *
 * The data directory is prepared once (its database, identity file and 5
 * queued events; with remote config, a config fetched and cached). Then the
 * program re-executes itself BENCH_COLDSTART_RUNS times (20; 2 more first,
 * untimed, warm the page cache). Each child records CLOCK_MONOTONIC (one
 * clock for all processes) at main() and after:
 *   appnorth_client_new + appnorth_events_new (+ appnorth_config_new with
 *   the cached copy and one typed read) -> ready;
 *   the first appnorth_events_track() -> first event stored.
 * The parent records the time just before posix_spawn. Reported:
 *   ready_ms        main() -> ready: what the library does (the target);
 *   spawn_ready_ms  spawn -> ready: also exec, the dynamic loader, and
 *                   loading and initialising libappnorth.so and its
 *                   dependencies;
 *   first_track_ms  the first track() call (its statement is prepared then).
 * The children's client points at a closed loopback port: no network.
 *
 * usage: bench_coldstart SERVER_URL
 */
#include "bench.h"
#ifdef BENCH_HAVE_CONFIG
#include "bench_config.h"
#endif

static const char *APP = "bench-coldstart";

static int child(const char *dir, const char *url) {
    uint64_t t_main = now_ns();
    appnorth_client *client = make_client(url, APP);
    appnorth_events *ev = make_events(client, dir, 10000, 10000, 0);
#ifdef BENCH_HAVE_CONFIG
    void *config = bench_config_open_cached(client, dir, "max_items");
#endif
    uint64_t t_ready = now_ns();
    int32_t queued = 0;
    CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
    uint64_t t_tracked = now_ns();
    printf("{\"t_main\":%llu,\"t_ready\":%llu,\"t_tracked\":%llu}\n", (unsigned long long)t_main,
           (unsigned long long)t_ready, (unsigned long long)t_tracked);
    fflush(stdout);
#ifdef BENCH_HAVE_CONFIG
    bench_config_close(config);
#endif
    appnorth_events_free(ev);
    appnorth_client_free(client);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "child") == 0) return child(argv[2], argv[3]);
    const char *server = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    if (!server) die("usage: bench_coldstart SERVER_URL");
    int runs = env_int("BENCH_COLDSTART_RUNS", 20);
    if (runs < 1 || runs > 1000) die("bad BENCH_COLDSTART_RUNS");
    curl_global_init(CURL_GLOBAL_DEFAULT);

    /* Prepare the data directory: database, identity, 5 queued events. Each
     * child adds one more; the flush threshold (10,000) keeps every child's
     * upload thread asleep. */
    char *dir = scratch_dir("coldstart");
    char *url = closed_url();
    {
        appnorth_client *client = make_client(url, APP);
        appnorth_events *ev = make_events(client, dir, 10000, 10000, 0);
        int32_t queued = 0;
        for (int i = 0; i < 5; i++) CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
        appnorth_events_free(ev);
        appnorth_client_free(client);
    }
#ifdef BENCH_HAVE_CONFIG
    bench_config_prepare_cache(server, APP, dir,
                               "{\"rollout\":1,\"theme\":\"dark\",\"price\":9.99,\"max_items\":25,\"welcome\":\"Hello\"}");
    const int with_config = 1;
#else
    const int with_config = 0;
#endif

    double ready_ms[1000], spawn_ready_ms[1000], spawn_main_ms[1000], track_ms[1000];
    const char *args[] = {"child", dir, url, NULL};
    for (int i = -2; i < runs; i++) {
        uint64_t t_spawn = 0;
        char *out = run_self(args, &t_spawn);
        double t_main = json_number(out, "t_main"), t_ready = json_number(out, "t_ready"),
               t_tracked = json_number(out, "t_tracked");
        free(out);
        if (i < 0) continue;
        ready_ms[i] = (t_ready - t_main) / 1e6;
        spawn_ready_ms[i] = (t_ready - (double)t_spawn) / 1e6;
        spawn_main_ms[i] = (t_main - (double)t_spawn) / 1e6;
        track_ms[i] = (t_tracked - t_ready) / 1e6;
    }
    size_t n = (size_t)runs;
    fprintf(stderr, "cold start: ready %.2f ms after main, %.2f ms after spawn (config: %s)\n", median(ready_ms, n),
            median(spawn_ready_ms, n), with_config ? "cached" : "not in this build");

    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "coldstart");
    jw_int(&w, "runs", runs);
    jw_int(&w, "with_config", with_config);
    jw_num(&w, "ready_ms", median(ready_ms, n));
    jw_num(&w, "ready_p90_ms", quantile(ready_ms, n, 0.9));
    jw_num(&w, "spawn_ready_ms", median(spawn_ready_ms, n));
    jw_num(&w, "spawn_ready_p90_ms", quantile(spawn_ready_ms, n, 0.9));
    jw_num(&w, "spawn_main_ms", median(spawn_main_ms, n));
    jw_num(&w, "first_track_ms", median(track_ms, n));
    jw_array(&w, "runs_ready_ms", ready_ms, n);
    jw_end(&w);
    remove_tree(dir);
    curl_global_cleanup();
    return 0;
}
