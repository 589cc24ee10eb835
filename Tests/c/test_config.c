/* Remote config through the real libappnorth.so, against the local API
 * server ($APPNORTH_TEST_SERVER): tiers, numbers as served, TTL with a manual
 * clock, live updates, listeners and their threading rules, bad input, and
 * the publish-to-callback latency (printed as a median). */
#define _GNU_SOURCE
#include <appnorth.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "check.h"
#include "fixtures.h"
#include "support.h"

static const char *server;
static pthread_t main_thread;
static int app_counter;

/* ---- helpers ------------------------------------------------------------- */

/* A fresh App ID per test, so tests never see each other's config. */
static const char *new_app(char *buf, size_t size) {
    snprintf(buf, size, "ctest-%d-%d", (int)getpid(), ++app_counter);
    return buf;
}

static char *write_file(const char *dir, const char *name, const char *text) {
    char *path = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
    return path;
}

static void publish(const char *app, const char *config_json) { admin_publish_config(server, app, config_json); }

static void publish_raw(const char *app, const char *raw_as_json_string) {
    char path[256], body[512];
    snprintf(path, sizeof path, "/admin/apps/%s/config", app);
    snprintf(body, sizeof body, "{\"raw\":%s}", raw_as_json_string);
    CHECK(admin_request(server, "POST", path, body, NULL) == 201, "raw publish");
}

/* Opens a config; the client handle is released at once (the config keeps
 * a reference). Returns the status; *out is NULL on failure. */
static int32_t open_config(const char *app, const char *data_dir, const char *bundled, int32_t ttl,
                           appnorth_clock *clock, appnorth_config **out, appnorth_error *err) {
    /* Fetches outlast a fetch the server holds until the test releases it. */
    appnorth_client *client = client_with_timeouts(server, app, 3000, 60000);
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, client, err), APPNORTH_OK, *err);
    appnorth_client_free(client);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, data_dir, err), APPNORTH_OK, *err);
    CHECK_STATUS(appnorth_config_options_set_bundled_path(o, bundled, err), APPNORTH_OK, *err);
    CHECK_STATUS(appnorth_config_options_set_ttl_seconds(o, ttl, err), APPNORTH_OK, *err);
    CHECK_STATUS(appnorth_config_options_set_clock(o, clock, err), APPNORTH_OK, *err);
    CHECK_STATUS(appnorth_config_options_set_poll_interval_ms(o, 100, err), APPNORTH_OK, *err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(o, 20, 200, err), APPNORTH_OK, *err);
    int32_t rc = appnorth_config_new(o, out, err);
    appnorth_config_options_free(o);
    return rc;
}

static int32_t tier_of(appnorth_config *config, int64_t *fetched_ms) {
    int32_t tier = -1;
    appnorth_error err;
    CHECK_STATUS(appnorth_config_source(config, &tier, fetched_ms, &err), APPNORTH_OK, err);
    return tier;
}

/* Records listener calls. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    char *json;
    char *keys;
    int32_t tier;
    int on_main;
    double at_ms;
} recorder;

static void recorder_init(recorder *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    cond_init_mono(&r->cv);
}

static void recorder_free(recorder *r) {
    free(r->json);
    free(r->keys);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

static void on_change(const char *json, const char *keys, int32_t tier, void *user_data) {
    recorder *r = user_data;
    double at = mono_ms();
    pthread_mutex_lock(&r->mu);
    free(r->json);
    free(r->keys);
    r->json = strdup(json);
    r->keys = strdup(keys);
    r->tier = tier;
    r->on_main = pthread_equal(pthread_self(), main_thread);
    r->at_ms = at;
    r->calls++;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

/* Starts recording `config`'s changes in `r` (initialized here); returns
 * the listener's removal token. */
static int64_t record_changes(appnorth_config *config, recorder *r) {
    recorder_init(r);
    appnorth_error err;
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, r, &token, &err), APPNORTH_OK, err);
    return token;
}

/* Waits until the recorder has seen `calls` calls; returns 1 if it did. */
static int recorder_wait(recorder *r, int calls, int timeout_ms) {
    int64_t deadline = mono_ms() + timeout_ms;
    pthread_mutex_lock(&r->mu);
    while (r->calls < calls)
        if (cond_wait_until(&r->cv, &r->mu, deadline) == ETIMEDOUT) break;
    int ok = r->calls >= calls;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static int recorder_calls(recorder *r) {
    pthread_mutex_lock(&r->mu);
    int calls = r->calls;
    pthread_mutex_unlock(&r->mu);
    return calls;
}

/* ---- bad input ------------------------------------------------------------- */

static void quiet_log(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
}

static void test_null_and_bad_arguments(void) {
    appnorth_error err;
    appnorth_config_free(NULL);
    appnorth_config_options_free(NULL);

    appnorth_config_options *o = appnorth_config_options_new();
    CHECK(o != NULL, "options");
    CHECK_STATUS(appnorth_config_options_set_client(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_client(NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_ttl_seconds(o, -1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_ttl_seconds(o, 31536001, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_ttl_seconds(o, 0, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_poll_interval_ms(o, 5, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(o, 100, 50, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(o, 0, 0, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, "", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, "/tmp/\xff\xfe", &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_config_options_set_bundled_path(o, "\xc3", &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_logger(o, quiet_log, 99, NULL, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);

    appnorth_config *config = (appnorth_config *)1;
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(config == NULL, "out_config NULL on failure");
    CHECK(strstr(err.message, "client") != NULL, "names the missing client: %s", err.message);
    CHECK_STATUS(appnorth_config_new(NULL, &config, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_new(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_config_options_free(o);

    /* Calls on a NULL config fail cleanly and still give the default. */
    int64_t i = 0;
    CHECK_STATUS(appnorth_config_get_int(NULL, "k", 42, &i, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(i == 42, "default on failure: %lld", (long long)i);
    char *s = (char *)1;
    CHECK_STATUS(appnorth_config_get_string(NULL, "k", "d", &s, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(s == NULL, "NULL string out on failure");
    CHECK_STATUS(appnorth_config_refresh(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_start_live(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_stop_live(NULL, NULL), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_remove_listener(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_error status;
    CHECK_STATUS(appnorth_config_last_fetch_status(NULL, &status, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);

    /* Arguments of a live config. */
    char app[64], *dir = make_temp_dir("config");
    new_app(app, sizeof app);
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_get_string(config, NULL, "d", &s, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_get_string(config, "\xff\xfe", "d", &s, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK(s == NULL, "no value for a bad key");
    CHECK_STATUS(appnorth_config_get_string(config, "k", "\xe2\x82", &s, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_config_get_int(config, "\xc0\xaf", 7, &i, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK(i == 7, "default on a bad key");
    CHECK_STATUS(appnorth_config_get_json(config, "k", "{bad", &s, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(strstr(err.message, "default_json") != NULL, "names the argument: %s", err.message);
    CHECK_STATUS(appnorth_config_get_json(config, "k", "[1,2]", NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_get_int(config, "k", 0, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_snapshot(config, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    int64_t token = -1;
    CHECK_STATUS(appnorth_config_add_listener(config, NULL, NULL, &token, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(token == 0, "token 0 on failure");
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_remove_listener(config, 12345, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_last_fetch_status(config, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    int64_t at = -1;
    CHECK_STATUS(appnorth_config_last_fetch_status(config, &status, &at, &err), APPNORTH_OK, err);
    CHECK(status.code == 0 && at == 0, "nothing attempted yet: code %d at %lld", status.code, (long long)at);
    appnorth_config_free(config);
    remove_tree(dir);
}

/* Opens with a bundled path that the setter refuses: the setter's status is
 * returned, and the config opens without the file. */
static int32_t open_with_bad_bundle(const char *app, const char *dir, const char *bundled,
                                    appnorth_config **out, appnorth_error *err) {
    appnorth_client *client = make_client(server, app, NULL, NULL);
    appnorth_config_options *o = appnorth_config_options_new();
    appnorth_config_options_set_client(o, client, NULL);
    appnorth_client_free(client);
    appnorth_config_options_set_data_dir(o, dir, NULL);
    int32_t rc = appnorth_config_options_set_bundled_path(o, bundled, err);
    appnorth_error open_err;
    CHECK_STATUS(appnorth_config_new(o, out, &open_err), APPNORTH_OK, open_err);
    appnorth_config_options_free(o);
    return rc;
}

static void test_bundled_file_errors_are_reported_and_fall_back(void) {
    char app[64], *dir = make_temp_dir("config");
    new_app(app, sizeof app);
    appnorth_error err;
    appnorth_config *config = NULL;
    char missing[512];
    snprintf(missing, sizeof missing, "%s/appdna-config.json", dir);
    CHECK_STATUS(open_with_bad_bundle(app, dir, missing, &config, &err), APPNORTH_E_STORAGE, err);
    CHECK(strstr(err.message, missing) != NULL, "message names the file: %s", err.message);
    CHECK(config && tier_of(config, NULL) == APPNORTH_CONFIG_TIER_DEFAULT, "falls back to the defaults");
    char *value = NULL;
    CHECK_STATUS(appnorth_config_get_string(config, "theme", "fallback", &value, &err), APPNORTH_OK, err);
    CHECK(value && strcmp(value, "fallback") == 0, "default value: %s", value ? value : "(null)");
    appnorth_string_free(value);
    appnorth_config_free(config);

    char *bad = write_file(dir, "bad.json", "{\"theme\": ");
    CHECK_STATUS(open_with_bad_bundle(app, dir, bad, &config, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(strstr(err.message, bad) != NULL, "message names the file: %s", err.message);
    appnorth_config_free(config);
    char *array = write_file(dir, "array.json", "[1,2,3]");
    CHECK_STATUS(open_with_bad_bundle(app, dir, array, &config, &err), APPNORTH_E_INVALID_JSON, err);
    appnorth_config_free(config);
    char *latin1 = write_file(dir, "latin1.json", "{\"caf\xe9\":1}");
    CHECK_STATUS(open_with_bad_bundle(app, dir, latin1, &config, &err), APPNORTH_E_INVALID_JSON, err);
    appnorth_config_free(config);
    free(bad);
    free(array);
    free(latin1);
    remove_tree(dir);
}

static void test_one_config_per_data_dir_and_app(void) {
    char app[64], *dir = make_temp_dir("config");
    new_app(app, sizeof app);
    appnorth_error err;
    appnorth_config *first = NULL, *second = (appnorth_config *)1;
    CHECK_STATUS(open_config(app, dir, NULL, 0, NULL, &first, &err), APPNORTH_OK, err);
    CHECK_STATUS(open_config(app, dir, NULL, 0, NULL, &second, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(second == NULL, "no second handle");
    appnorth_config_free(first);
    CHECK_STATUS(open_config(app, dir, NULL, 0, NULL, &second, &err), APPNORTH_OK, err);
    appnorth_config_free(second);
    remove_tree(dir);
}

/* ---- tiers and getters ------------------------------------------------------- */

static void test_tiers_getters_and_exact_numbers(void) {
    char app[64], *dir = make_temp_dir("config");
    new_app(app, sizeof app);
    const char *served = "{\"price\":9.99,\"title\":\"Sale\",\"count\":3,\"on\":true,\"nested\":{\"price\":9.99}}";
    publish(app, served);
    char *bundled = write_file(dir, "appdna-config.json", "{\"price\":1.25,\"title\":\"Bundled\"}");
    appnorth_error err;
    appnorth_config *config = NULL;

    /* Offline first launch: bundled values. */
    admin_request(server, "POST", "/admin/faults", "{\"drop\":true,\"count\":1000}", NULL);
    CHECK_STATUS(open_config(app, dir, bundled, 0, NULL, &config, &err), APPNORTH_OK, err);
    int64_t fetched = -1;
    CHECK(tier_of(config, &fetched) == APPNORTH_CONFIG_TIER_BUNDLED, "bundled tier");
    CHECK(fetched == 0, "bundled has no fetch time");
    double d = 0;
    CHECK_STATUS(appnorth_config_get_double(config, "price", 0, &d, &err), APPNORTH_OK, err);
    CHECK(d == 1.25, "bundled price %g", d);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_NETWORK, err);
    appnorth_error status;
    int64_t at = 0;
    CHECK_STATUS(appnorth_config_last_fetch_status(config, &status, &at, &err), APPNORTH_OK, err);
    CHECK(status.code == APPNORTH_E_NETWORK && at > 0, "last status network: %d", status.code);

    /* The listener goes in while still offline: a background fetch started
     * by the reads above may apply the remote config as soon as the faults
     * are cleared, and a listener added after that would see no change. */
    recorder r;
    int64_t token = record_changes(config, &r);
    CHECK(token > 0, "token %lld", (long long)token);
    admin_request(server, "DELETE", "/admin/faults", NULL, NULL);

    /* Online: remote. (A background fetch started by the offline reads may
     * win the race with this refresh; either way the listener fires once.) */
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    CHECK(tier_of(config, &fetched) == APPNORTH_CONFIG_TIER_REMOTE, "remote tier");
    CHECK(fetched > 1700000000000LL, "fetch time %lld", (long long)fetched);
    CHECK(recorder_wait(&r, 1, 3000), "listener fired");
    CHECK(recorder_calls(&r) == 1, "listener fired once: %d", recorder_calls(&r));
    CHECK(r.tier == APPNORTH_CONFIG_TIER_REMOTE, "tier %d", r.tier);
    CHECK(r.json && strcmp(r.json, served) == 0, "listener JSON as served: %s", r.json);
    CHECK(r.keys && strcmp(r.keys, "[\"price\",\"title\",\"count\",\"on\",\"nested\"]") == 0, "changed keys %s", r.keys);

    char *text = NULL;
    CHECK_STATUS(appnorth_config_snapshot(config, &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, served) == 0, "snapshot keeps 9.99: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_get_json(config, "nested", NULL, &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "{\"price\":9.99}") == 0, "sub-document: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_get_json(config, "missing", NULL, &text, &err), APPNORTH_OK, err);
    CHECK(text == NULL, "missing, no default: NULL");
    CHECK_STATUS(appnorth_config_get_json(config, "missing", "{\"a\":1.50}", &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "{\"a\":1.50}") == 0, "default as given: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_get_string(config, "title", NULL, &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "Sale") == 0, "string %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_get_string(config, "count", "fallback", &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "fallback") == 0, "wrong type gives the default: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_get_string(config, "nope", NULL, &text, &err), APPNORTH_OK, err);
    CHECK(text == NULL, "missing with NULL default");
    int64_t i = 0;
    CHECK_STATUS(appnorth_config_get_int(config, "count", -1, &i, &err), APPNORTH_OK, err);
    CHECK(i == 3, "int %lld", (long long)i);
    CHECK_STATUS(appnorth_config_get_int(config, "price", -1, &i, &err), APPNORTH_OK, err);
    CHECK(i == -1, "a real is not an int");
    CHECK_STATUS(appnorth_config_get_double(config, "price", 0, &d, &err), APPNORTH_OK, err);
    CHECK(d == 9.99, "double %.17g", d);
    CHECK_STATUS(appnorth_config_get_double(config, "count", 0, &d, &err), APPNORTH_OK, err);
    CHECK(d == 3.0, "an int reads as a double");
    int32_t b = -1;
    CHECK_STATUS(appnorth_config_get_bool(config, "on", -1, &b, &err), APPNORTH_OK, err);
    CHECK(b == 1, "bool %d", b);
    CHECK_STATUS(appnorth_config_get_bool(config, "title", -1, &b, &err), APPNORTH_OK, err);
    CHECK(b == -1, "default passed through unchanged: %d", b);

    /* Identical content (a new version, same values): no listener call. */
    publish(app, "{ \"nested\":{\"price\":9.99}, \"on\":true, \"count\":3, \"title\":\"Sale\", \"price\":9.990 }");
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    CHECK(recorder_calls(&r) == 1, "no call for identical content");
    CHECK(tier_of(config, &fetched) == APPNORTH_CONFIG_TIER_REMOTE, "still remote");

    /* An invalid payload keeps the last good config. */
    publish_raw(app, "\"{\\\"price\\\": 1.0,\"");
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_config_last_fetch_status(config, &status, NULL, &err), APPNORTH_OK, err);
    CHECK(status.code == APPNORTH_E_INVALID_JSON, "status %d: %s", status.code, status.message);
    CHECK(strstr(status.message, "config") != NULL, "message: %s", status.message);
    CHECK_STATUS(appnorth_config_get_double(config, "price", 0, &d, &err), APPNORTH_OK, err);
    CHECK(d == 9.99, "still the last good price");
    CHECK_STATUS(appnorth_config_remove_listener(config, token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_remove_listener(config, token, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_config_free(config);

    /* Restart offline (a closed port): the cached copy, numbers intact. */
    appnorth_client *offline = make_client("http://127.0.0.1:9", app, NULL, NULL);
    appnorth_config_options *o = appnorth_config_options_new();
    appnorth_config_options_set_client(o, offline, &err);
    appnorth_config_options_set_data_dir(o, dir, &err);
    appnorth_config_options_set_bundled_path(o, bundled, &err);
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    appnorth_client_free(offline);
    CHECK(tier_of(config, &at) == APPNORTH_CONFIG_TIER_CACHED, "cached tier");
    /* A background fetch still in flight when the refreshes above ran may
     * have confirmed the same content a little later: the stored time is
     * the last successful fetch's, so at least the one read above and not
     * in the future. */
    int64_t now = wall_ms();
    CHECK(at >= fetched && at <= now, "the stored fetch time: %lld, read %lld, now %lld", (long long)at,
          (long long)fetched, (long long)now);
    CHECK_STATUS(appnorth_config_snapshot(config, &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, served) == 0, "cached snapshot keeps 9.99: %s", text);
    appnorth_string_free(text);
    appnorth_config_free(config);

    recorder_free(&r);
    free(bundled);
    remove_tree(dir);
}

static void test_defaults_without_anything(void) {
    char app[64];
    new_app(app, sizeof app);
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    CHECK(tier_of(config, NULL) == APPNORTH_CONFIG_TIER_DEFAULT, "default tier");
    char *text = NULL;
    CHECK_STATUS(appnorth_config_snapshot(config, &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "{}") == 0, "empty snapshot: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_get_string(config, "theme", "system", &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "system") == 0, "default: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK(err.http_status == 404, "http %d", err.http_status);
    appnorth_config_free(config);
}

static void test_refresh_delivers_on_the_calling_thread(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"v\":1}");
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    recorder r;
    record_changes(config, &r);
    /* No read before: no background fetch competes with the refresh. */
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    CHECK(recorder_calls(&r) == 1, "delivered before refresh returned: %d", recorder_calls(&r));
    CHECK(r.on_main, "on the refreshing thread");
    CHECK(r.keys && strcmp(r.keys, "[\"v\"]") == 0, "keys %s", r.keys);
    appnorth_config_free(config);
    recorder_free(&r);
}

/* ---- TTL ----------------------------------------------------------------------- */

static void test_ttl_stale_while_revalidate(void) {
    char app[64], *dir = make_temp_dir("config");
    new_app(app, sizeof app);
    publish(app, "{\"v\":1}");
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(1700000000000LL, &clock, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, dir, NULL, 60, clock, &config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    appnorth_config_free(config);
    publish(app, "{\"v\":2}");

    CHECK_STATUS(open_config(app, dir, NULL, 60, clock, &config, &err), APPNORTH_OK, err);
    recorder r;
    record_changes(config, &r);
    int64_t v = 0;
    appnorth_clock_advance(clock, 59000, &err);
    appnorth_config_get_int(config, "v", 0, &v, &err);
    CHECK(v == 1, "fresh cache served: %lld", (long long)v);
    sleep_ms(50);
    CHECK(tier_of(config, NULL) == APPNORTH_CONFIG_TIER_CACHED, "no fetch while fresh");

    appnorth_clock_advance(clock, 1000, &err); /* TTL reached */
    /* The revalidation is held at the server until released below: the
     * read returns while its fetch is held, so it does not wait for it. */
    char hold[256];
    snprintf(hold, sizeof hold, "{\"delay_ms\":600000,\"method\":\"GET\",\"path_prefix\":\"/v1/apps/%s/config\"}", app);
    admin_add_fault(server, hold);
    appnorth_config_get_int(config, "v", 0, &v, &err);
    CHECK(v == 1, "stale value served while revalidating");
    CHECK(admin_wait_held(server, 1), "the read started a background fetch, held at the server");
    CHECK(recorder_calls(&r) == 0, "nothing delivered while the fetch is held");
    admin_release(server);
    CHECK(recorder_wait(&r, 1, 30000), "background fetch delivered v2");
    CHECK(!r.on_main, "a background fetch's change is delivered on the config's thread");
    appnorth_config_get_int(config, "v", 0, &v, &err);
    CHECK(v == 2, "v2 now: %lld", (long long)v);
    int64_t fetched = 0;
    CHECK(tier_of(config, &fetched) == APPNORTH_CONFIG_TIER_REMOTE, "remote after the fetch");
    CHECK(fetched == 1700000060000LL, "fetch time from the manual clock: %lld", (long long)fetched);

    /* Expired again, nothing new: a 304 only moves the fetch time. */
    appnorth_clock_advance(clock, 61000, &err);
    appnorth_config_get_int(config, "v", 0, &v, &err);
    double deadline = mono_ms() + 3000;
    while (mono_ms() < deadline && (tier_of(config, &fetched), fetched) != 1700000121000LL) sleep_ms(5);
    CHECK(fetched == 1700000121000LL, "304 refreshed the fetch time: %lld", (long long)fetched);
    CHECK(recorder_calls(&r) == 1, "no listener call for a 304");
    appnorth_config_free(config);
    appnorth_clock_free(clock);
    recorder_free(&r);
    remove_tree(dir);
}

/* ---- live updates and listeners --------------------------------------------- */

static void test_live_updates(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"theme\":\"dark\"}");
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    recorder r;
    record_changes(config, &r);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err); /* idempotent */
    CHECK(recorder_wait(&r, 1, 3000), "stream's first event");
    CHECK(!r.on_main, "live updates arrive on the config's thread");
    publish(app, "{\"theme\":\"light\",\"banner\":\"hello\"}");
    CHECK(recorder_wait(&r, 2, 3000), "live update");
    CHECK(r.keys && strcmp(r.keys, "[\"theme\",\"banner\"]") == 0, "changed keys %s", r.keys);
    CHECK_STATUS(appnorth_config_stop_live(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_stop_live(config, &err), APPNORTH_OK, err); /* idempotent */
    publish(app, "{\"theme\":\"blue\"}");
    sleep_ms(150);
    CHECK(recorder_calls(&r) == 2, "nothing after stop_live");
    appnorth_config_free(config);
    recorder_free(&r);
}

typedef struct {
    appnorth_config *config;
    int64_t token;
    atomic_int calls;
    atomic_int rc;
} self_remover;

static void remove_self(const char *json, const char *keys, int32_t tier, void *user_data) {
    (void)json, (void)keys, (void)tier;
    self_remover *s = user_data;
    atomic_fetch_add(&s->calls, 1);
    atomic_store(&s->rc, appnorth_config_remove_listener(s->config, s->token, NULL));
}

static void test_remove_from_inside_the_callback(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"v\":1}");
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    self_remover s = {.config = config};
    atomic_init(&s.calls, 0);
    atomic_init(&s.rc, -1);
    recorder r;
    recorder_init(&r);
    int64_t other = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, remove_self, &s, &s.token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, &r, &other, &err), APPNORTH_OK, err);
    CHECK(other == s.token + 1, "tokens increase");
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK(recorder_wait(&r, 1, 3000), "first event");
    CHECK(atomic_load(&s.rc) == APPNORTH_OK, "remove from inside returned %d", atomic_load(&s.rc));
    publish(app, "{\"v\":2}");
    CHECK(recorder_wait(&r, 2, 3000), "second event");
    CHECK(atomic_load(&s.calls) == 1, "the removed listener was not called again");
    appnorth_config_free(config);
    recorder_free(&r);
}

typedef struct {
    atomic_int entered;
    atomic_int finished;
} slow_listener;

static void slow_callback(const char *json, const char *keys, int32_t tier, void *user_data) {
    (void)json, (void)keys, (void)tier;
    slow_listener *s = user_data;
    atomic_store(&s->entered, 1);
    sleep_ms(200);
    atomic_store(&s->finished, 1);
}

static void test_remove_waits_for_a_callback_in_flight(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"v\":1}");
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    slow_listener s;
    atomic_init(&s.entered, 0);
    atomic_init(&s.finished, 0);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, slow_callback, &s, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    double deadline = mono_ms() + 3000;
    while (!atomic_load(&s.entered) && mono_ms() < deadline) sleep_ms(1);
    CHECK(atomic_load(&s.entered), "the callback started on the config's thread");
    double t0 = mono_ms();
    CHECK_STATUS(appnorth_config_remove_listener(config, token, &err), APPNORTH_OK, err);
    double waited = mono_ms() - t0;
    CHECK(atomic_load(&s.finished) == 1, "remove returned before the callback finished");
    CHECK(waited > 100, "remove waited %.0f ms", waited);
    appnorth_config_free(config);
}

typedef struct {
    appnorth_config *config;
    atomic_int calls;
    atomic_int freed;
    atomic_int read_ok;
} freeing_listener;

static void free_from_callback(const char *json, const char *keys, int32_t tier, void *user_data) {
    (void)json, (void)keys, (void)tier;
    freeing_listener *f = user_data;
    atomic_fetch_add(&f->calls, 1);
    if (atomic_load(&f->freed)) return;
    /* Calling the library from inside a callback does not deadlock. */
    char *text = NULL;
    int ok = appnorth_config_snapshot(f->config, &text, NULL) == APPNORTH_OK && text != NULL;
    appnorth_string_free(text);
    int32_t tier_now = -1;
    ok = ok && appnorth_config_source(f->config, &tier_now, NULL, NULL) == APPNORTH_OK;
    atomic_store(&f->read_ok, ok);
    appnorth_config_free(f->config);
    atomic_store(&f->freed, 1);
}

static void test_free_from_inside_a_callback(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"v\":1}");
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    freeing_listener f = {.config = config};
    atomic_init(&f.calls, 0);
    atomic_init(&f.freed, 0);
    atomic_init(&f.read_ok, 0);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, free_from_callback, &f, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    double deadline = mono_ms() + 3000;
    while (!atomic_load(&f.freed) && mono_ms() < deadline) sleep_ms(2);
    CHECK(atomic_load(&f.freed), "freed from inside the callback");
    CHECK(atomic_load(&f.read_ok), "library calls worked inside the callback");
    publish(app, "{\"v\":2}");
    sleep_ms(150);
    CHECK(atomic_load(&f.calls) == 1, "no callback after free: %d", atomic_load(&f.calls));
}

/* ---- latency: publish -> C callback ------------------------------------------- */

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Live updates are pushed: with the poll interval at 100 ms, every publish
 * reaches the listener down the one stream, and the server logs no config
 * fetch meanwhile. The latency is printed, not asserted (make bench). */
static void test_live_updates_come_down_the_stream(void) {
    enum { N = 20 };
    char app[64], path[128];
    new_app(app, sizeof app);
    snprintf(path, sizeof path, "/v1/apps/%s/config", app);
    publish(app, "{\"n\":0}");
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    recorder r;
    record_changes(config, &r);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK(recorder_wait(&r, 1, 30000), "connected");
    int fetches = admin_logged(server, "GET", path);
    double samples[N];
    int got = 0;
    for (int i = 1; i <= N; i++) {
        char body[64];
        snprintf(body, sizeof body, "{\"n\":%d}", i);
        double t0 = mono_ms();
        publish(app, body);
        if (!recorder_wait(&r, i + 1, 30000)) break;
        pthread_mutex_lock(&r.mu);
        samples[got++] = r.at_ms - t0;
        pthread_mutex_unlock(&r.mu);
    }
    CHECK(got == N, "all %d updates arrived (%d)", N, got);
    CHECK(admin_logged(server, "GET", path) == fetches, "no config fetch while the stream delivered (%d before, %d after)",
          fetches, admin_logged(server, "GET", path));
    if (got > 0) {
        qsort(samples, got, sizeof samples[0], compare_doubles);
        printf("config publish->callback latency: median %.0f ms over %d publishes (min %.0f, max %.0f)\n",
               got % 2 ? samples[got / 2] : (samples[got / 2 - 1] + samples[got / 2]) / 2, got, samples[0],
               samples[got - 1]);
    }
    appnorth_config_free(config);
    recorder_free(&r);
}

/* The child of test_exit_without_free: a live config, a listener, then exit
 * without freeing anything, possibly while an update is being delivered. */
static int exit_with_live_config(void) {
    char app[64];
    snprintf(app, sizeof app, "ctest-exit-%d", (int)getpid());
    publish(app, "{\"v\":1}");
    appnorth_error err;
    appnorth_config *config = NULL;
    if (open_config(app, NULL, NULL, 0, NULL, &config, &err) != APPNORTH_OK) return 3;
    static recorder r;
    recorder_init(&r);
    int64_t token = 0;
    appnorth_config_add_listener(config, on_change, &r, &token, &err);
    appnorth_config_start_live(config, &err);
    if (!recorder_wait(&r, 1, 3000)) return 4;
    publish(app, "{\"v\":2}");
    exit(0);
}

static void test_exit_without_free(const char *self) {
    int crashes = 0, runs = test_count(NULL, 3, 10);
    for (int i = 0; i < runs; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "'%s' --exit-with-live-config", self);
        int status = system(cmd);
        if (status != 0) crashes++;
    }
    CHECK(crashes == 0, "%d of %d exits with a live config failed", crashes, runs);
}

/* The escape \u0000 is valid JSON and accepted; a raw NUL byte never is
 * (jansson alone takes one after a number), from the server or a file. */
static void test_nul_bytes_both_ways(void) {
    char app[64], *dir = make_temp_dir("config-nul");
    new_app(app, sizeof app);
    appnorth_config *config = NULL;
    appnorth_error err;
    char *s = NULL;
    publish(app, "{\"s\":\"a\\u0000b\",\"n\":1}");
    CHECK_STATUS(open_config(app, dir, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_snapshot(config, &s, &err), APPNORTH_OK, err);
    CHECK(s && strcmp(s, "{\"s\":\"a\\u0000b\",\"n\":1}") == 0, "snapshot keeps the escape: %s", s ? s : "(null)");
    appnorth_string_free(s);
    s = NULL;
    CHECK_STATUS(appnorth_config_get_json(config, "s", NULL, &s, &err), APPNORTH_OK, err);
    CHECK(s && strcmp(s, "\"a\\u0000b\"") == 0, "get_json keeps the escape: %s", s ? s : "(null)");
    appnorth_string_free(s);
    s = NULL;
    /* As a C string it would be cut short: refused, not truncated. */
    CHECK_STATUS(appnorth_config_get_string(config, "s", "d", &s, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(s == NULL, "no truncated value");
    CHECK(strstr(err.message, "U+0000") != NULL, "message: %s", err.message);

    /* A raw NUL after a number: refused; the last good config stays. */
    publish_raw(app, "\"{\\\"n\\\": 2\\u0000, \\\"b\\\": \\\"x\\\"}\"");
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(strstr(err.message, "NUL") != NULL, "message: %s", err.message);
    int64_t n = 0;
    CHECK_STATUS(appnorth_config_get_int(config, "n", 0, &n, &err), APPNORTH_OK, err);
    CHECK(n == 1, "n %lld", (long long)n);
    appnorth_config_free(config);

    /* The cached copy survives a reopen whole. */
    config = NULL;
    CHECK_STATUS(open_config(app, dir, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    CHECK(tier_of(config, NULL) == APPNORTH_CONFIG_TIER_CACHED, "cached tier after reopen");
    s = NULL;
    CHECK_STATUS(appnorth_config_snapshot(config, &s, &err), APPNORTH_OK, err);
    CHECK(s && strcmp(s, "{\"s\":\"a\\u0000b\",\"n\":1}") == 0, "cached snapshot: %s", s ? s : "(null)");
    appnorth_string_free(s);
    appnorth_config_free(config);

    /* A bundled file with a raw NUL is refused like invalid JSON. */
    char *path = malloc(strlen(dir) + 16);
    sprintf(path, "%s/nul.json", dir);
    FILE *f = fopen(path, "wb");
    fwrite("{\"a\": 1\0, \"b\": \"x\"}", 1, 19, f);
    fclose(f);
    char other[64];
    new_app(other, sizeof other);
    config = NULL;
    CHECK_STATUS(open_with_bad_bundle(other, NULL, path, &config, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(strstr(err.message, "NUL") != NULL, "message: %s", err.message);
    if (config) {
        CHECK(tier_of(config, NULL) == APPNORTH_CONFIG_TIER_DEFAULT, "the file is not used");
        appnorth_config_free(config);
    }
    free(path);
    remove_tree(dir);
}

/* A live stream that sends one endless line: the status says so once the
 * line passes the limit, instead of OK forever. */
static void test_stream_line_limit_is_reported(void) {
    if (getenv("APPNORTH_TEST_SKIP_SLOW")) {
        printf("skipped test_stream_line_limit_is_reported (APPNORTH_TEST_SKIP_SLOW)\n");
        return;
    }
    char app[64];
    new_app(app, sizeof app);
    appnorth_config *config = NULL;
    appnorth_error err, status;
    publish(app, "{\"v\":1}");
    CHECK_STATUS(open_config(app, NULL, NULL, 0, NULL, &config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    char spec[256];
    snprintf(spec, sizeof spec, "{\"path_prefix\":\"/v1/apps/%s/config/stream\",\"endless_line\":true}", app);
    CHECK(admin_request(server, "POST", "/admin/faults", spec, NULL) == 201, "endless_line fault");
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    double deadline = mono_ms() + 60000;
    status.code = 0;
    while (mono_ms() < deadline) {
        CHECK_STATUS(appnorth_config_last_fetch_status(config, &status, NULL, &err), APPNORTH_OK, err);
        if (status.code != 0) break;
        sleep_ms(20);
    }
    CHECK(status.code == APPNORTH_E_TOO_LARGE, "status %d: %s", status.code, status.message);
    CHECK(strstr(status.message, "stream") != NULL, "message: %s", status.message);
    int64_t v = 0;
    CHECK_STATUS(appnorth_config_get_int(config, "v", 0, &v, &err), APPNORTH_OK, err);
    CHECK(v == 1, "the last good config stays: %lld", (long long)v);
    appnorth_config_free(config);
}

int main(int argc, char **argv) {
    server = test_start("test_config", 120);
    if (!server) return 2;
    main_thread = pthread_self();
    (void)admin_board, (void)admin_idea; /* shared helpers this test does not need */
    curl_global_init(CURL_GLOBAL_ALL);
    if (argc == 2 && strcmp(argv[1], "--exit-with-live-config") == 0) return exit_with_live_config();
    RUN(test_null_and_bad_arguments);
    RUN(test_bundled_file_errors_are_reported_and_fall_back);
    RUN(test_one_config_per_data_dir_and_app);
    RUN(test_tiers_getters_and_exact_numbers);
    RUN(test_defaults_without_anything);
    RUN(test_refresh_delivers_on_the_calling_thread);
    RUN(test_ttl_stale_while_revalidate);
    RUN(test_live_updates);
    RUN(test_nul_bytes_both_ways);
    RUN(test_stream_line_limit_is_reported);
    RUN(test_remove_from_inside_the_callback);
    RUN(test_remove_waits_for_a_callback_in_flight);
    RUN(test_free_from_inside_a_callback);
    RUN(test_live_updates_come_down_the_stream);
    RUN_WITH(test_exit_without_free, argv[0]);
    curl_global_cleanup();
    return check_summary();
}
