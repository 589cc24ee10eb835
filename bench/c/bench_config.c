/* Remote config: the typed getter from C, and propagation of a published
 * version to a C listener over the live stream (SSE on loopback). Also the
 * helpers bench_coldstart uses to open a cached config.
 *
 *   read:        appnorth_config_get_int() on a fetched config, timed in
 *                batches of 1,000 calls (the median batch gives the per-call
 *                median without the clock's own cost) and one call at a time
 *                (p99, clock cost included).
 *   propagation: the config is live (appnorth_config_start_live); the clock
 *                starts before POST /admin/apps/{app}/config and stops in the
 *                listener callback, which runs on the config's thread. 20
 *                publishes, 50 ms apart.
 *
 * Written against the remote-config API of the config branch; everything
 * that names an appnorth_config_* function is in this file.
 *
 * usage: bench_config SERVER_URL   (built with -DBENCH_CONFIG_MAIN)
 */
#include "bench.h"
#include "bench_config.h"

#include <pthread.h>

static appnorth_config *open_config(appnorth_client *client, const char *data_dir) {
    appnorth_config_options *o = appnorth_config_options_new();
    appnorth_config *config = NULL;
    CHECK(appnorth_config_options_set_client(o, client, &E));
    CHECK(appnorth_config_options_set_data_dir(o, data_dir, &E));
    CHECK(appnorth_config_new(o, &config, &E));
    appnorth_config_options_free(o);
    return config;
}

static void publish(const char *server, const char *app, const char *config_json) {
    char path[256], *body = malloc(strlen(config_json) + 32), *reply = NULL;
    snprintf(path, sizeof path, "/admin/apps/%s/config", app);
    sprintf(body, "{\"config\":%s}", config_json);
    long status = admin_request_text(server, "POST", path, body, &reply);
    if (status != 201) die("publishing config: HTTP %ld %s", status, reply ? reply : "");
    free(reply);
    free(body);
}

void bench_config_prepare_cache(const char *server, const char *app, const char *data_dir,
                                const char *config_json) {
    publish(server, app, config_json);
    appnorth_client *client = make_client(server, app);
    appnorth_config *config = open_config(client, data_dir);
    CHECK(appnorth_config_refresh(config, &E));
    appnorth_config_free(config);
    appnorth_client_free(client);
}

void *bench_config_open_cached(appnorth_client *client, const char *data_dir, const char *int_key) {
    appnorth_config *config = open_config(client, data_dir);
    int64_t value = 0;
    CHECK(appnorth_config_get_int(config, int_key, -1, &value, &E));
    if (value < 0) die("the cached config has no %s", int_key);
    return config;
}

void bench_config_close(void *config) { appnorth_config_free(config); }

#ifdef BENCH_CONFIG_MAIN

/* ---- propagation: the listener side ---------------------------------------- */

static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t seen_cond = PTHREAD_COND_INITIALIZER;
static int64_t seen_value = -1;
static uint64_t seen_at = 0;

static void on_change(const char *config_json, const char *changed_keys_json, int32_t tier, void *user_data) {
    uint64_t t = now_ns();
    (void)changed_keys_json; (void)tier; (void)user_data;
    const char *p = strstr(config_json, "\"rollout\"");
    if (!p) return;
    p = strchr(p, ':');
    int64_t v = p ? strtoll(p + 1, NULL, 10) : -1;
    pthread_mutex_lock(&seen_lock);
    seen_value = v;
    seen_at = t;
    pthread_cond_broadcast(&seen_cond);
    pthread_mutex_unlock(&seen_lock);
}

/* Waits until the listener saw `value`; returns when, or 0 on timeout. */
static uint64_t wait_seen(int64_t value, int timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec++; deadline.tv_nsec -= 1000000000L; }
    uint64_t at = 0;
    pthread_mutex_lock(&seen_lock);
    while (seen_value != value)
        if (pthread_cond_timedwait(&seen_cond, &seen_lock, &deadline) != 0) break;
    if (seen_value == value) at = seen_at;
    pthread_mutex_unlock(&seen_lock);
    return at;
}

static const char *CONFIG_FMT =
    "{\"rollout\":%d,\"theme\":\"dark\",\"price\":9.99,\"max_items\":25,\"welcome\":\"Hello\"}";

int main(int argc, char **argv) {
    const char *server = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    if (!server) die("usage: bench_config SERVER_URL");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char app[64], doc[256];
    snprintf(app, sizeof app, "bench-config-%d", (int)getpid());
    snprintf(doc, sizeof doc, CONFIG_FMT, 1);
    publish(server, app, doc);

    appnorth_client *client = make_client(server, app);
    char *dir = scratch_dir("config");
    appnorth_config *config = open_config(client, dir);
    CHECK(appnorth_config_refresh(config, &E));

    /* read */
    enum { BATCH = 1000, BATCHES = 300, SINGLES = 100000 };
    double batch_ns[BATCHES];
    int64_t v = 0;
    appnorth_error err;
    for (int i = 0; i < 10000; i++) appnorth_config_get_int(config, "max_items", 0, &v, &err);
    for (int b = 0; b < BATCHES; b++) {
        uint64_t t0 = now_ns();
        for (int i = 0; i < BATCH; i++) appnorth_config_get_int(config, "max_items", 0, &v, &err);
        batch_ns[b] = (double)(now_ns() - t0) / BATCH;
    }
    if (v != 25) die("get_int read %lld, expected 25", (long long)v);
    double *single_ns = malloc(SINGLES * sizeof(double));
    for (int i = 0; i < SINGLES; i++) {
        uint64_t t0 = now_ns();
        appnorth_config_get_int(config, "max_items", 0, &v, &err);
        single_ns[i] = (double)(now_ns() - t0);
    }
    uint64_t c0 = now_ns();
    for (int i = 0; i < 1000; i++) (void)now_ns();
    double clock_ns = (double)(now_ns() - c0) / 1000;

    /* propagation */
    int64_t token = 0;
    CHECK(appnorth_config_add_listener(config, on_change, NULL, &token, &E));
    CHECK(appnorth_config_start_live(config, &E));
    for (int i = 0; i < 200; i++) { /* wait for the stream to be connected */
        char *health = NULL;
        admin_request_text(server, "GET", "/admin/health", NULL, &health);
        int connected = health && !strstr(health, "\"sse_streams\": 0") && !strstr(health, "\"sse_streams\":0");
        free(health);
        if (connected) break;
        sleep_ms(25);
    }
    sleep_ms(200);
    enum { PUBLISHES = 20 };
    double prop_ms[PUBLISHES];
    int missed = 0;
    for (int i = 0; i < PUBLISHES; i++) {
        int value = 100 + i;
        snprintf(doc, sizeof doc, CONFIG_FMT, value);
        uint64_t t0 = now_ns();
        publish(server, app, doc);
        uint64_t at = wait_seen(value, 5000);
        if (!at) { missed++; prop_ms[i] = 5000; }
        else prop_ms[i] = (double)(at - t0) / 1e6;
        sleep_ms(50);
    }
    fprintf(stderr, "config: get_int %.1f ns/call (batched), propagation p50 %.2f ms, %d missed\n",
            median(batch_ns, BATCHES), median(prop_ms, PUBLISHES), missed);

    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "config");
    jw_num(&w, "read_p50_ns", median(batch_ns, BATCHES));
    jw_num(&w, "read_single_p50_ns", quantile(single_ns, SINGLES, 0.5));
    jw_num(&w, "read_single_p99_ns", quantile(single_ns, SINGLES, 0.99));
    jw_num(&w, "clock_cost_ns", clock_ns);
    jw_num(&w, "propagation_p50_ms", median(prop_ms, PUBLISHES));
    jw_num(&w, "propagation_p99_ms", quantile(prop_ms, PUBLISHES, 0.99));
    jw_int(&w, "propagation_missed", missed);
    jw_array(&w, "propagation_ms", prop_ms, PUBLISHES);
    jw_end(&w);

    appnorth_config_remove_listener(config, token, &E);
    appnorth_config_free(config);
    appnorth_client_free(client);
    remove_tree(dir);
    curl_global_cleanup();
    return 0;
}

#endif /* BENCH_CONFIG_MAIN */
