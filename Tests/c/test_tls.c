/* HTTPS end to end (HTTP/1.1 and HTTP/2) and the client's trust options,
 * through the real libappnorth.so. scripts/with-devserver.sh with
 * DEVSERVER_TLS=1 provides a throwaway CA, an HTTPS dev server (HTTP/1.1
 * only), an HTTP/2 front for the plain dev server that logs each request's
 * protocol, listeners with bad certificates and a forward proxy that logs
 * what it forwards (see that script). */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "admin.h"
#include "check.h"
#include "fixtures.h"
#include "support.h"

#define APP "ctls"
#define TIMEOUT_MS 15000 /* generous: TLS handshakes on a loaded machine */

static const char *plain, *tls, *h2, *ca, *pin;
static const char *other_pin = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";

/* Options for `url`, the test's App ID and generous timeouts. */
static appnorth_client_options *options_for(const char *url) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, url, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, APP, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, TIMEOUT_MS, TIMEOUT_MS, &err), APPNORTH_OK, err);
    return o;
}

/* A client for `url` with the given trust options (NULL: not set). */
static appnorth_client *client_with(const char *url, const char *ca_file, const char *pins,
                                    const char *proxy, int32_t ignore_env) {
    appnorth_error err;
    appnorth_client_options *o = options_for(url);
    CHECK_STATUS(appnorth_client_options_set_ca_file(o, ca_file, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_pinned_public_keys(o, pins, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_proxy(o, proxy, ignore_env, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static char *read_file(const char *path, size_t *length) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = calloc(1, 1 << 20);
    *length = fread(data, 1, (1 << 20) - 1, f);
    fclose(f);
    return data;
}

/* Counts the server's logged API requests to `path_suffix`, waiting up to
 * `seconds` for at least `want`. */
static int wait_requests(const char *base, const char *path_suffix, int want, double seconds) {
    int64_t deadline = mono_ms() + (int64_t)(seconds * 1000);
    int count = 0;
    for (;;) {
        json_t *reply = NULL;
        admin_request(base, "GET", "/admin/requests", NULL, &reply);
        count = 0;
        size_t i;
        json_t *r;
        json_array_foreach(json_object_get(reply, "requests"), i, r) {
            const char *path = json_string_value(json_object_get(r, "path"));
            size_t n = path ? strlen(path) : 0, m = strlen(path_suffix);
            if (n >= m && strcmp(path + n - m, path_suffix) == 0) count++;
        }
        json_decref(reply);
        if (count >= want || mono_ms() > deadline) return count;
        sleep_ms(20);
    }
}

static int state_count(const char *base, const char *what) {
    json_t *state = NULL;
    admin_request(base, "GET", "/admin/apps/" APP "/state", NULL, &state);
    int n = (int)json_array_size(json_object_get(state, what));
    json_decref(state);
    return n;
}

/* Listener: counts calls and keeps the last "theme" seen. */
typedef struct {
    pthread_mutex_t mu;
    char theme[64];
} seen_theme;

static void on_change(const char *json, const char *keys, int32_t tier, void *user_data) {
    (void)keys; (void)tier;
    seen_theme *s = user_data;
    json_t *doc = json_loads(json, 0, NULL);
    const char *theme = json_string_value(json_object_get(doc, "theme"));
    pthread_mutex_lock(&s->mu);
    snprintf(s->theme, sizeof s->theme, "%s", theme ? theme : "");
    pthread_mutex_unlock(&s->mu);
    json_decref(doc);
}

static int theme_is(seen_theme *s, const char *want, double seconds) {
    int64_t deadline = mono_ms() + (int64_t)(seconds * 1000);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int same = strcmp(s->theme, want) == 0;
        pthread_mutex_unlock(&s->mu);
        if (same || mono_ms() > deadline) return same;
        sleep_ms(10);
    }
}

/* Log sink: counts the DEBUG request traces per protocol. */
typedef struct {
    pthread_mutex_t mu;
    int http1, http2;
} protocol_count;

static void count_protocols(int32_t level, const char *message, void *user_data) {
    (void)level;
    protocol_count *count = user_data;
    pthread_mutex_lock(&count->mu);
    if (strncmp(message, "HTTP ", 5) == 0 && strstr(message, " ms over HTTP/1.1 (")) count->http1++;
    if (strncmp(message, "HTTP ", 5) == 0 && strstr(message, " ms over HTTP/2 (")) count->http2++;
    pthread_mutex_unlock(&count->mu);
}

static void scenario(const char *base, appnorth_client *c);

/* Runs the scenario against `base` with a client made from `o` (freed
 * here), and checks that its DEBUG traces name HTTP/2 (`want_http2`) or
 * HTTP/1.1 only: boards, the flushed idea, the event batch and the config
 * fetch (the stream's trace comes when it ends; closed by the host, it has
 * none). */
static void scenario_over(const char *base, appnorth_client_options *o, int want_http2) {
    appnorth_error err;
    protocol_count seen = {.http1 = 0};
    pthread_mutex_init(&seen.mu, NULL);
    CHECK_STATUS(appnorth_client_options_set_logger(o, count_protocols, APPNORTH_LOG_DEBUG, &seen, &err),
                 APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    scenario(base, c);
    appnorth_client_free(c);
    int wanted = want_http2 ? seen.http2 : seen.http1, other = want_http2 ? seen.http1 : seen.http2;
    CHECK(wanted >= 4 && other == 0, "%s traces %d, other protocol %d", want_http2 ? "HTTP/2" : "HTTP/1.1",
          wanted, other);
    pthread_mutex_destroy(&seen.mu);
}

static void test_https_end_to_end(void) {
    appnorth_error err;
    admin_request(tls, "POST", "/admin/reset", "{}", NULL);

    /* The CA in memory and a matching pin among two. */
    size_t pem_length = 0;
    char *pem = read_file(ca, &pem_length);
    CHECK(pem != NULL, "read %s", ca);
    char pins[256];
    snprintf(pins, sizeof pins, "%s;%s", other_pin, pin);
    appnorth_client_options *o = options_for(tls);
    CHECK_STATUS(appnorth_client_options_set_ca_pem(o, pem, pem_length, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_pinned_public_keys(o, pins, &err), APPNORTH_OK, err);
    free(pem);
    /* The HTTPS dev server speaks HTTP/1.1 only: ALPN falls back to it. */
    scenario_over(tls, o, 0);
}

/* The same scenario through the HTTP/2 front: the client reports HTTP/2 for
 * every request, and the front logged every one as HTTP/2.0. */
static void test_http2_end_to_end(void) {
    appnorth_error err;
    admin_request(plain, "POST", "/admin/reset", "{}", NULL);
    size_t before = 0;
    free(read_file(getenv("APPNORTH_TEST_H2_LOG"), &before));
    appnorth_client_options *o = options_for(h2);
    CHECK_STATUS(appnorth_client_options_set_ca_file(o, ca, &err), APPNORTH_OK, err);
    scenario_over(h2, o, 1);

    size_t length = 0;
    char *log = read_file(getenv("APPNORTH_TEST_H2_LOG"), &length);
    CHECK(log != NULL && length > before, "the front logged requests");
    if (!log || length <= before) { free(log); return; }
    const char *paths[] = {"GET /v1/apps/" APP "/boards ", "POST /v1/apps/" APP "/ideas ",
                           "POST /v1/apps/" APP "/events ", "GET /v1/apps/" APP "/config ",
                           "GET /v1/apps/" APP "/config/stream "};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char want[256];
        snprintf(want, sizeof want, "HTTP/2.0 %s", paths[i]);
        CHECK(strstr(log + before, want) != NULL, "the front saw %s", want);
    }
    /* No API request of this test reached the front over HTTP/1.1. */
    CHECK(strstr(log + before, "HTTP/1.1 ") == NULL, "no HTTP/1.1 at the front:\n%s", log + before);
    free(log);
}

/* Reads, a queued write and its flush, an event batch, a config fetch and
 * the live stream, through `c` against the server at `base`. */
static void scenario(const char *base, appnorth_client *c) {
    appnorth_error err;
    char *board = admin_board(base, APP, "Features");
    CHECK(board != NULL, "board seeded at %s", base);
    if (!board) return;

    /* A read. */
    char *json = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    CHECK(json && strstr(json, "Features"), "boards: %s", json ? json : "(null)");
    appnorth_string_free(json);

    /* A queued write and its flush. */
    appnorth_storage *storage = NULL;
    appnorth_queue *queue = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, 100, &queue, &err), APPNORTH_OK, err);
    admin_request(base, "POST", "/admin/faults", "{\"drop\":true,\"count\":50}", NULL);
    int32_t submitted = -1, sent = -1, pending = -1;
    CHECK_STATUS(appnorth_queue_submit_idea(queue, c, board, "Queued over TLS", NULL, NULL, &submitted, &err),
                 APPNORTH_OK, err);
    CHECK(submitted == 0, "queued during the outage");
    admin_request(base, "DELETE", "/admin/faults", NULL, NULL);
    CHECK_STATUS(appnorth_queue_flush(queue, c, &sent, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_pending_count(queue, &pending, &err), APPNORTH_OK, err);
    CHECK(sent == 1 && pending == 0, "sent %d, pending %d", sent, pending);
    CHECK(state_count(base, "ideas") == 1, "the idea arrived");
    appnorth_queue_free(queue);
    appnorth_storage_free(storage);

    /* An event batch. */
    char *dir = make_temp_dir("tls-events");
    appnorth_events_options *eo = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(eo, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(eo, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_flush_policy(eo, 3600000, 10000, &err), APPNORTH_OK, err);
    appnorth_events *events = NULL;
    CHECK_STATUS(appnorth_events_new(eo, &events, &err), APPNORTH_OK, err);
    appnorth_events_options_free(eo);
    CHECK_STATUS(appnorth_events_track(events, "opened", "{\"screen\":\"home\"}", NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_track(events, "closed", NULL, NULL, &err), APPNORTH_OK, err);
    int64_t events_sent = 0;
    CHECK_STATUS(appnorth_events_flush_sent(events, TIMEOUT_MS, &events_sent, &err), APPNORTH_OK, err);
    CHECK(events_sent == 2, "events sent: %lld", (long long)events_sent);
    CHECK(state_count(base, "events") == 2, "the events arrived");
    appnorth_events_free(events);
    remove_tree(dir);

    /* A config fetch and the live stream. */
    CHECK(admin_request(base, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"theme\":\"dark\"}}", NULL) == 201,
          "publish");
    dir = make_temp_dir("tls-config");
    appnorth_config_options *co = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(co, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(co, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(co, 20, 200, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(co, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(co);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    char *theme = NULL;
    CHECK_STATUS(appnorth_config_get_string(config, "theme", NULL, &theme, &err), APPNORTH_OK, err);
    CHECK(theme && strcmp(theme, "dark") == 0, "theme %s", theme ? theme : "(null)");
    appnorth_string_free(theme);
    seen_theme seen = {.theme = ""};
    pthread_mutex_init(&seen.mu, NULL);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, &seen, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK(wait_requests(base, "/config/stream", 1, 15) >= 1, "the stream connected");
    CHECK(admin_request(base, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"theme\":\"light\"}}", NULL) == 201,
          "publish");
    CHECK(theme_is(&seen, "light", 15), "the stream delivered the update: %s", seen.theme);
    appnorth_config_free(config);
    pthread_mutex_destroy(&seen.mu);
    remove_tree(dir);
    free(board);
}

/* A read fails with APPNORTH_E_NETWORK naming `reason`; a queued write stays. */
static void check_refused(const char *url, const char *ca_file, const char *pins, const char *reason) {
    appnorth_error err;
    appnorth_client *c = client_with(url, ca_file, pins, NULL, 0);
    char *json = (char *)1;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_E_NETWORK, err);
    CHECK(json == NULL, "no output on failure");
    CHECK(strstr(err.message, reason) != NULL, "%s: message %s lacks \"%s\"", url, err.message, reason);

    appnorth_storage *storage = NULL;
    appnorth_queue *queue = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, 100, &queue, &err), APPNORTH_OK, err);
    int32_t submitted = -1, sent = -1, pending = -1;
    CHECK_STATUS(appnorth_queue_submit_idea(queue, c, "b-1", "Never sent", NULL, NULL, &submitted, &err),
                 APPNORTH_OK, err);
    CHECK(submitted == 0, "queued");
    CHECK_STATUS(appnorth_queue_flush(queue, c, &sent, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_pending_count(queue, &pending, &err), APPNORTH_OK, err);
    CHECK(sent == 0 && pending == 1, "%s: sent %d, pending %d", reason, sent, pending);
    appnorth_queue_free(queue);
    appnorth_storage_free(storage);
    appnorth_client_free(c);
}

static void test_bad_certificates_and_pins_are_refused(void) {
    admin_request(tls, "POST", "/admin/reset", "{}", NULL);
    /* Trusting only an unrelated certificate: the server's CA is unknown.
     * (Not the system store, whose presence varies between machines.) */
    char other_ca[1024];
    snprintf(other_ca, sizeof other_ca, "%.*s/selfsigned.pem", (int)(strrchr(ca, '/') - ca), ca);
    check_refused(tls, other_ca, NULL, "unable to get local issuer certificate");
    check_refused(getenv("APPNORTH_TEST_TLS_SELF_SIGNED"), ca, NULL, "self-signed certificate");
    check_refused(getenv("APPNORTH_TEST_TLS_WRONG_HOST"), ca, NULL, "no alternative certificate subject name");
    check_refused(getenv("APPNORTH_TEST_TLS_EXPIRED"), ca, NULL, "certificate has expired");
    check_refused(tls, ca, other_pin, "pinned public key");
    CHECK(wait_requests(tls, "", 0, 0) == 0, "no request reached the HTTPS server");
}

static int proxy_log_has(const char *line) {
    size_t length = 0;
    char *log = read_file(getenv("APPNORTH_TEST_PROXY_LOG"), &length);
    int found = log && strstr(log, line) != NULL;
    free(log);
    return found;
}

static void test_requests_and_stream_go_through_the_proxy(void) {
    appnorth_error err;
    admin_request(plain, "POST", "/admin/reset", "{}", NULL);
    CHECK(admin_request(plain, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"theme\":\"proxied\"}}", NULL) == 201,
          "publish");
    appnorth_client *c = client_with(plain, NULL, NULL, getenv("APPNORTH_TEST_PROXY"), 1);
    char *json = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    appnorth_string_free(json);

    char *dir = make_temp_dir("tls-proxy");
    appnorth_config *config = config_in(c, dir);
    seen_theme seen = {.theme = ""};
    pthread_mutex_init(&seen.mu, NULL);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, &seen, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK(theme_is(&seen, "proxied", 15), "config over the proxied stream: %s", seen.theme);
    appnorth_config_free(config);
    pthread_mutex_destroy(&seen.mu);
    remove_tree(dir);
    appnorth_client_free(c);

    char want[1024];
    snprintf(want, sizeof want, "GET %s/v1/apps/" APP "/boards\n", plain);
    CHECK(proxy_log_has(want), "proxy saw %s", want);
    snprintf(want, sizeof want, "GET %s/v1/apps/" APP "/config/stream\n", plain);
    CHECK(proxy_log_has(want), "proxy saw %s", want);

    /* HTTPS through the proxy: a CONNECT tunnel. */
    c = client_with(tls, ca, NULL, getenv("APPNORTH_TEST_PROXY"), 1);
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    appnorth_string_free(json);
    appnorth_client_free(c);
    snprintf(want, sizeof want, "CONNECT %s\n", tls + strlen("https://"));
    CHECK(proxy_log_has(want), "proxy saw %s", want);
}

static void test_bad_trust_options(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_ca_file(NULL, "x", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_ca_file(o, "", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_ca_file(o, "\xff", &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_client_options_set_ca_file(o, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_ca_pem(o, NULL, 10, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_ca_pem(o, "junk", 4, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_ca_pem(o, "junk", (size_t)-1, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_client_options_set_ca_pem(o, NULL, 0, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_pinned_public_keys(o, "sha1//x", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_pinned_public_keys(o, "sha256//short", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_pinned_public_keys(o, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_proxy(o, "http://a b", 0, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_proxy(o, "http://p:3128", 2, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_proxy(o, NULL, 0, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
}

int main(void) {
    plain = test_start("test_tls", 240);
    if (!plain) return 2;
    tls = getenv("APPNORTH_TEST_TLS_SERVER");
    ca = getenv("APPNORTH_TEST_TLS_CA");
    pin = getenv("APPNORTH_TEST_TLS_PIN");
    h2 = getenv("APPNORTH_TEST_H2_SERVER");
    if (!tls || !ca || !pin || !h2 || !getenv("APPNORTH_TEST_PROXY_LOG") || !getenv("APPNORTH_TEST_H2_LOG")) {
        fprintf(stderr, "test_tls: run through DEVSERVER_TLS=1 scripts/with-devserver.sh (make test-c)\n");
        printf("0 passed, 1 failed\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_bad_trust_options);
    RUN(test_https_end_to_end);
    RUN(test_http2_end_to_end);
    RUN(test_bad_certificates_and_pins_are_refused);
    RUN(test_requests_and_stream_go_through_the_proxy);
    curl_global_cleanup();
    return check_summary();
}
