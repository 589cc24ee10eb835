/* Dispatch mode and the idle live stream (issue 21):
 *
 *   empty:       appnorth_dispatch() on a dispatch-mode client with nothing
 *                queued (what a game calls every frame), timed in batches of
 *                1,000 calls; the median batch gives the per-call median.
 *   propagation: a live config on a dispatch-mode client; the host waits on
 *                appnorth_dispatch_fd() with poll() and calls dispatch when
 *                it is readable; the clock starts before POST
 *                /admin/apps/{app}/config and stops in the listener, which
 *                runs inside that dispatch on the host's thread. 20 publishes.
 *   idle:        a live config stream left idle with the server's keepalive at
 *                15 s: the voluntary context switches (each is one wakeup)
 *                of the "appnorth-config" thread
 *                (/proc/self/task/<tid>/status) over BENCH_IDLE_SECONDS (30),
 *                from 10.5 s after the stream connected (curl's connect-
 *                timeout timer wakes it once, 10 s after the transfer began,
 *                connected or not), as wakeups a minute.
 *
 * usage: bench_dispatch SERVER_URL
 */
#include "bench.h"

#include <dirent.h>
#include <poll.h>

static appnorth_client *dispatch_client(const char *url, const char *app) {
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK(appnorth_client_options_set_api_url(o, url, &E));
    CHECK(appnorth_client_options_set_app_id(o, app, &E));
    CHECK(appnorth_client_options_set_dispatch_mode(o, 1, &E));
    appnorth_client *c = NULL;
    CHECK(appnorth_client_new(o, &c, &E));
    appnorth_client_options_free(o);
    return c;
}

static appnorth_config *live_config(appnorth_client *client) {
    appnorth_config_options *o = appnorth_config_options_new();
    appnorth_config *config = NULL;
    CHECK(appnorth_config_options_set_client(o, client, &E));
    CHECK(appnorth_config_new(o, &config, &E));
    appnorth_config_options_free(o);
    CHECK(appnorth_config_start_live(config, &E));
    return config;
}

static void publish(const char *server, const char *app, int value) {
    char path[256], body[128], *reply = NULL;
    snprintf(path, sizeof path, "/admin/apps/%s/config", app);
    snprintf(body, sizeof body, "{\"config\":{\"rollout\":%d,\"theme\":\"dark\"}}", value);
    long status = admin_request_text(server, "POST", path, body, &reply);
    if (status != 201) die("publishing config: HTTP %ld %s", status, reply ? reply : "");
    free(reply);
}

static int64_t seen_value = -1;
static uint64_t seen_at;

static void on_change(const char *config_json, const char *keys, int32_t tier, void *user_data) {
    (void)keys, (void)tier, (void)user_data;
    const char *p = strstr(config_json, "\"rollout\":");
    if (!p) return;
    seen_value = strtoll(p + 10, NULL, 10);
    seen_at = now_ns();
}

/* Dispatches whenever the descriptor is readable until `value` was seen. */
static uint64_t dispatch_until(appnorth_client *client, int fd, int64_t value, int timeout_ms) {
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    while (seen_value != value && now_ns() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) == 1) CHECK(appnorth_dispatch(client, 0, NULL, &E));
    }
    return seen_value == value ? seen_at : 0;
}

static int streams(const char *server) {
    char *health = NULL;
    admin_request_text(server, "GET", "/admin/health", NULL, &health);
    const char *p = health ? strstr(health, "\"sse_streams\"") : NULL;
    int n = p ? atoi(strchr(p, ':') + 1) : 0;
    free(health);
    return n;
}

static long config_thread_switches(void) {
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks) return -1;
    long total = -1;
    struct dirent *e;
    while ((e = readdir(tasks))) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "", line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, "appnorth-config") != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if (!(f = fopen(path, "r"))) continue;
        long v, sum = 0;
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1) sum += v;
        }
        fclose(f);
        total = (total < 0 ? 0 : total) + sum;
    }
    closedir(tasks);
    return total;
}

int main(int argc, char **argv) {
    const char *server = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    if (!server) die("usage: bench_dispatch SERVER_URL");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char app[64];
    snprintf(app, sizeof app, "bench-dispatch-%d", (int)getpid());
    publish(server, app, 1);

    /* empty */
    appnorth_client *client = dispatch_client(server, app);
    enum { BATCH = 1000, BATCHES = 300 };
    double batch_ns[BATCHES];
    appnorth_error err;
    int32_t ran = 0;
    for (int i = 0; i < 10000; i++) appnorth_dispatch(client, 0, &ran, &err);
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < BATCH; i++) appnorth_dispatch(client, 0, &ran, &err);
        batch_ns[b] = (double)(now_ns() - t0) / BATCH;
    }

    /* propagation */
    int32_t fd = -1;
    CHECK(appnorth_dispatch_fd(client, &fd, &E));
    appnorth_config *config = live_config(client);
    int64_t token = 0;
    CHECK(appnorth_config_add_listener(config, on_change, NULL, &token, &E));
    if (!dispatch_until(client, fd, 1, 10000)) die("the live config never delivered rollout 1");
    for (int i = 0; i < 200 && streams(server) < 1; i++) sleep_ms(25);
    enum { PUBLISHES = 20 };
    double prop_ms[PUBLISHES];
    int missed = 0;
    for (int i = 0; i < PUBLISHES; i++) {
        uint64_t t0 = now_ns();
        publish(server, app, 100 + i);
        uint64_t at = dispatch_until(client, fd, 100 + i, 5000);
        if (!at) { missed++; prop_ms[i] = 5000; } else prop_ms[i] = (double)(at - t0) / 1e6;
        sleep_ms(50);
    }
    appnorth_config_free(config);
    appnorth_client_free(client);

    /* idle */
    int idle_s = env_int("BENCH_IDLE_SECONDS", 30);
    char *settings = NULL;
    admin_request_text(server, "POST", "/admin/settings", "{\"sse_keepalive\":15}", &settings);
    free(settings);
    appnorth_client *plain = make_client(server, app);
    appnorth_config *idle = live_config(plain);
    for (int i = 0; i < 200 && streams(server) < 1; i++) sleep_ms(25);
    /* Past the transfer's own timers: curl wakes the thread when the connect
     * timeout (10 s by default) comes due, connected or not (strace). */
    sleep_ms(10500);
    long before = config_thread_switches();
    sleep_ms(idle_s * 1000);
    long after = config_thread_switches();
    double per_minute = before < 0 || after < 0 ? -1 : (double)(after - before) * 60.0 / idle_s;
    appnorth_config_free(idle);
    appnorth_client_free(plain);

    fprintf(stderr, "dispatch: empty %.1f ns/call, propagation p50 %.2f ms (%d missed), idle %.1f wakeups/min\n",
            median(batch_ns, BATCHES), median(prop_ms, PUBLISHES), missed, per_minute);
    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "dispatch");
    jw_num(&w, "empty_p50_ns", median(batch_ns, BATCHES));
    jw_num(&w, "propagation_p50_ms", median(prop_ms, PUBLISHES));
    jw_num(&w, "propagation_p99_ms", quantile(prop_ms, PUBLISHES, 0.99));
    jw_int(&w, "propagation_missed", missed);
    jw_array(&w, "propagation_ms", prop_ms, PUBLISHES);
    jw_num(&w, "idle_wakeups_per_minute", per_minute);
    jw_int(&w, "idle_seconds", idle_s);
    jw_int(&w, "keepalive_seconds", 15);
    jw_end(&w);
    curl_global_cleanup();
    return 0;
}
