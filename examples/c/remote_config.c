/* Remote config over its tiers, as a C host sees it:
 *
 *   1. the server is down: the config comes from the bundled file;
 *   2. the server comes up: it resolves to the remote config, and the
 *      listener fires;
 *   3. a new version is published: the listener fires again, over the live
 *      stream;
 *   4. the process "restarts" offline (a new client on a closed port, the
 *      same data directory): the config comes back from the cache.
 *
 *   remote_config [API_URL [APP_ID]]    API_URL defaults to $APPNORTH_TEST_SERVER
 *
 * Run it against the local dev server: scripts/with-devserver.sh
 * build/examples/remote_config. Publishing a version and taking the server
 * "down" use the dev server's /admin endpoints, which a real API does not
 * have; everything else is the library's public API.
 */
/* POSIX 2008 (sockets, clock_gettime, mkdtemp, nanosleep) under strict -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <appnorth.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the listener: prints each change and counts it ------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int changes;

static const char *tier_name(int32_t tier) {
    switch (tier) {
    case APPNORTH_CONFIG_TIER_REMOTE: return "remote";
    case APPNORTH_CONFIG_TIER_CACHED: return "cached";
    case APPNORTH_CONFIG_TIER_BUNDLED: return "bundled";
    default: return "default";
    }
}

/* Runs on the config's background thread; no library lock is held. */
static void on_config_change(const char *config_json, const char *changed_keys_json, int32_t tier,
                             void *user_data) {
    (void)user_data;
    printf("  listener: tier %s, changed %s\n            config %s\n", tier_name(tier), changed_keys_json,
           config_json);
    fflush(stdout);
    pthread_mutex_lock(&lock);
    changes++;
    pthread_cond_broadcast(&changed);
    pthread_mutex_unlock(&lock);
}

static int wait_for_changes(int count, int timeout_s) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_s;
    pthread_mutex_lock(&lock);
    while (changes < count && pthread_cond_timedwait(&changed, &lock, &deadline) == 0) {}
    int ok = changes >= count;
    pthread_mutex_unlock(&lock);
    return ok;
}

/* ---- dev-server admin calls (not part of the SDK) ----------------------------- */

static int admin(const char *base, const char *method, const char *path, const char *body) {
    char url[1024];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *h = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    FILE *devnull = fopen("/dev/null", "w");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, devnull);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    fclose(devnull);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return status >= 200 && status < 300;
}

/* ---- helpers ---------------------------------------------------------------------- */

static int fail(const char *what, const appnorth_error *err) {
    fprintf(stderr, "%s failed: %s (%s, HTTP %d)\n", what, err->message, appnorth_status_str(err->code),
            err->http_status);
    return 1;
}

static appnorth_client *new_client(const char *url, const char *app) {
    appnorth_error err;
    appnorth_client_options *options = appnorth_client_options_new();
    appnorth_client *client = NULL;
    if (appnorth_client_options_set_api_url(options, url, &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(options, app, &err) != APPNORTH_OK ||
        appnorth_client_options_set_timeouts(options, 5000, 5000, &err) != APPNORTH_OK ||
        appnorth_client_new(options, &client, &err) != APPNORTH_OK)
        fail("client", &err);
    appnorth_client_options_free(options);
    return client;
}

/* Opens the config; the config keeps its own reference to the client. */
static appnorth_config *open_config(appnorth_client *client, const char *data_dir, const char *bundled) {
    appnorth_error err;
    appnorth_config_options *options = appnorth_config_options_new();
    appnorth_config *config = NULL;
    if (appnorth_config_options_set_client(options, client, &err) != APPNORTH_OK ||
        appnorth_config_options_set_data_dir(options, data_dir, &err) != APPNORTH_OK ||
        appnorth_config_options_set_bundled_path(options, bundled, &err) != APPNORTH_OK ||
        /* Reconnect quickly for the demo (the default starts at 1 s). */
        appnorth_config_options_set_reconnect_backoff_ms(options, 100, 1000, &err) != APPNORTH_OK ||
        appnorth_config_new(options, &config, &err) != APPNORTH_OK)
        fail("config", &err);
    appnorth_config_options_free(options);
    return config;
}

static void show(appnorth_config *config) {
    appnorth_error err;
    int32_t tier = 0;
    int64_t fetched_ms = 0;
    char *theme = NULL, *snapshot = NULL;
    double price = 0;
    int32_t banner = 0;
    appnorth_config_source(config, &tier, &fetched_ms, &err);
    appnorth_config_get_string(config, "theme", "system", &theme, &err);
    appnorth_config_get_double(config, "price", 0.0, &price, &err);
    appnorth_config_get_bool(config, "show_banner", 0, &banner, &err);
    appnorth_config_snapshot(config, &snapshot, &err);
    printf("  tier %-7s fetched_ms %lld: theme=%s price=%.2f show_banner=%d\n  snapshot %s\n", tier_name(tier),
           (long long)fetched_ms, theme, price, banner, snapshot);
    appnorth_string_free(theme);
    appnorth_string_free(snapshot);
}

/* A loopback URL on which nothing listens: a port the kernel just gave us and
 * that we closed again. */
static void closed_port_url(char *out, size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    bind(fd, (struct sockaddr *)&addr, sizeof addr);
    getsockname(fd, (struct sockaddr *)&addr, &len);
    close(fd);
    snprintf(out, size, "http://127.0.0.1:%d", ntohs(addr.sin_port));
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    const char *app = argc > 2 ? argv[2] : "remote-config-demo";
    if (!url) {
        fprintf(stderr, "usage: %s API_URL [APP_ID]   (or set APPNORTH_TEST_SERVER)\n", argv[0]);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_ALL);

    /* The app's files: a bundled config, as an app would ship it, and a
     * data directory for the cache. */
    char work[] = "/tmp/appnorth-remote-config-XXXXXX";
    if (!mkdtemp(work)) return 1;
    char bundled[256], data_dir[256], apps_path[256];
    snprintf(bundled, sizeof bundled, "%s/appdna-config.json", work);
    snprintf(data_dir, sizeof data_dir, "%s/data", work);
    FILE *f = fopen(bundled, "w");
    fputs("{\"theme\":\"light\",\"price\":4.99,\"show_banner\":false}\n", f);
    fclose(f);
    snprintf(apps_path, sizeof apps_path, "/admin/apps/%s/config", app);
    admin(url, "POST", apps_path, "{\"config\":{\"theme\":\"dark\",\"price\":9.99,\"show_banner\":false}}");

    puts("1. Server down: the bundled config");
    /* DEV SERVER ONLY: make the server drop every API connection, as if it
     * were unreachable. */
    admin(url, "POST", "/admin/faults", "{\"drop\":true,\"count\":100000}");
    appnorth_client *client = new_client(url, app);
    appnorth_config *config = client ? open_config(client, data_dir, bundled) : NULL;
    appnorth_client_free(client); /* the config keeps its own reference */
    if (!config) return 1;
    appnorth_error err;
    int64_t token = 0;
    if (appnorth_config_add_listener(config, on_config_change, NULL, &token, &err) != APPNORTH_OK)
        return fail("add listener", &err);
    show(config);
    if (appnorth_config_start_live(config, &err) != APPNORTH_OK) return fail("start live", &err);
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL); /* a few stream attempts fail and back off */
    appnorth_error status;
    appnorth_config_last_fetch_status(config, &status, NULL, &err);
    printf("  last fetch: %s (%s)\n", appnorth_status_str(status.code), status.message);

    puts("2. Server up: the config resolves to remote");
    admin(url, "DELETE", "/admin/faults", NULL); /* DEV SERVER ONLY: the server is "back" */
    if (!wait_for_changes(1, 10)) return fprintf(stderr, "no remote config arrived\n"), 1;
    show(config);

    puts("3. A new version is published: it arrives over the live stream");
    admin(url, "POST", apps_path, "{\"config\":{\"theme\":\"dark\",\"price\":7.49,\"show_banner\":true}}");
    if (!wait_for_changes(2, 10)) return fprintf(stderr, "no live update arrived\n"), 1;
    show(config);
    appnorth_config_free(config); /* stops the stream and joins its thread */

    puts("4. Restart offline: the cached config");
    char offline_url[64];
    closed_port_url(offline_url, sizeof offline_url);
    client = new_client(offline_url, app);
    config = client ? open_config(client, data_dir, bundled) : NULL;
    appnorth_client_free(client);
    if (!config) return 1;
    show(config);
    appnorth_config_free(config);

    char cleanup[300];
    snprintf(cleanup, sizeof cleanup, "rm -rf '%s'", work);
    if (system(cleanup) != 0) fprintf(stderr, "could not remove %s\n", work);
    curl_global_cleanup();
    return 0;
}
