/* Compressed uploads through the real libappnorth.so against the dev
 * server: event batches arrive gzip-encoded and are stored once, small
 * writes stay identity and large ones are compressed, a server that answers
 * 415 to gzip gets identity from then on, and compression can be turned
 * off. Over HTTPS too when the TLS dev server runs (make test-c). */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <stdlib.h>
#include <time.h>

#include "admin.h"
#include "check.h"
#include "support.h"

#define APP "cgzip"
#define EVENTS_PATH "/v1/apps/" APP "/events"

static const char *server;

static appnorth_client *gzip_client(const char *url, int32_t compression) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, url, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, APP, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 15000, 15000, &err), APPNORTH_OK, err);
    if (getenv("APPNORTH_TEST_TLS_CA"))
        CHECK_STATUS(appnorth_client_options_set_ca_file(o, getenv("APPNORTH_TEST_TLS_CA"), &err), APPNORTH_OK, err);
    if (compression >= 0)
        CHECK_STATUS(appnorth_client_options_set_compression(o, compression, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

/* An events queue on `client` that uploads only when flushed. */
static appnorth_events *open_events(appnorth_client *client, const char *dir) {
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, 3600000, 10000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_retry(o, 10, 3, 120000, 5, &err), APPNORTH_OK, err);
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    CHECK_STATUS(appnorth_events_set_network_type(e, APPNORTH_NETWORK_WIFI, &err), APPNORTH_OK, err);
    return e;
}

/* A client (`compression` as for gzip_client) with its events queue in a
 * fresh data folder. */
typedef struct {
    char *dir;
    appnorth_client *client;
    appnorth_events *events;
} uploader;

static uploader open_uploader(const char *url, int32_t compression) {
    uploader u;
    u.dir = make_temp_dir("cgzip");
    u.client = gzip_client(url, compression);
    u.events = open_events(u.client, u.dir);
    return u;
}

static void close_uploader(uploader *u) {
    appnorth_events_free(u->events);
    appnorth_client_free(u->client);
    remove_tree(u->dir);
}

static void track_and_flush(appnorth_events *e, int first, int count) {
    appnorth_error err;
    for (int i = first; i < first + count; i++) {
        char props[96];
        snprintf(props, sizeof props, "{\"screen\":\"home\",\"i\":%d}", i);
        int32_t queued = 0;
        CHECK_STATUS(appnorth_events_track(e, "screen_view", props, &queued, &err), APPNORTH_OK, err);
    }
    CHECK_STATUS(appnorth_events_flush(e, 15000, &err), APPNORTH_OK, err);
}

/* The logged POSTs to `path` on `base`, oldest first, as "status encoding"
 * words joined by spaces into `out` (e.g. "415 gzip 200 identity"). The
 * server logs each request before answering it. */
static void posts_to(const char *base, const char *path, char *out, size_t size) {
    json_t *reply = NULL;
    admin_request(base, "GET", "/admin/requests", NULL, &reply);
    size_t i, used = 0;
    json_t *entry;
    out[0] = 0;
    json_array_foreach(json_object_get(reply, "requests"), i, entry) {
        const char *m = json_string_value(json_object_get(entry, "method"));
        const char *p = json_string_value(json_object_get(entry, "path"));
        if (!m || !p || strcmp(m, "POST") != 0 || strcmp(p, path) != 0) continue;
        const char *enc = json_string_value(json_object_get(entry, "content_encoding"));
        int n = snprintf(out + used, size - used, "%s%lld %s", used ? " " : "",
                         (long long)json_integer_value(json_object_get(entry, "status")), enc ? enc : "?");
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
    json_decref(reply);
}

/* Sum of wire and decoded sizes of the logged POSTs to the events path. */
static void event_post_sizes(const char *base, long long *wire, long long *plain) {
    json_t *reply = NULL;
    admin_request(base, "GET", "/admin/requests", NULL, &reply);
    size_t i;
    json_t *entry;
    *wire = *plain = 0;
    json_array_foreach(json_object_get(reply, "requests"), i, entry) {
        const char *p = json_string_value(json_object_get(entry, "path"));
        if (!p || strcmp(p, EVENTS_PATH) != 0) continue;
        *wire += json_integer_value(json_object_get(entry, "wire_size"));
        *plain += json_integer_value(json_object_get(entry, "body_size"));
    }
    json_decref(reply);
}

/* Stored events of APP and how many distinct ids they have. */
static size_t stored_events(const char *base, size_t *distinct) {
    json_t *state = NULL;
    admin_request(base, "GET", "/admin/apps/" APP "/state", NULL, &state);
    json_t *events = json_object_get(state, "events");
    json_t *ids = json_object();
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        const char *id = json_string_value(json_object_get(e, "id"));
        if (id) json_object_set_new(ids, id, json_true());
    }
    size_t n = json_array_size(events);
    *distinct = json_object_size(ids);
    json_decref(ids);
    json_decref(state);
    return n;
}

static void reset(const char *base) {
    CHECK(admin_request(base, "POST", "/admin/reset", "{}", NULL) == 200, "reset %s", base);
}

static void test_batches_arrive_gzip_and_are_stored_once(const char *base) {
    reset(base);
    uploader u = open_uploader(base, -1);
    track_and_flush(u.events, 0, 150);
    char log[512];
    posts_to(base, EVENTS_PATH, log, sizeof log);
    CHECK(strcmp(log, "200 gzip 200 gzip") == 0, "%s: event posts: %s", base, log);
    long long wire = 0, plain = 0;
    event_post_sizes(base, &wire, &plain);
    CHECK(wire > 0 && plain > 3 * wire, "%s: %lld bytes on the wire for %lld of JSON", base, wire, plain);
    size_t distinct = 0, n = stored_events(base, &distinct);
    CHECK(n == 150 && distinct == 150, "%s: stored %zu events, %zu distinct", base, n, distinct);
    close_uploader(&u);
}

static void test_small_writes_stay_identity_large_ones_are_compressed(void) {
    reset(server);
    char *board = admin_board(server, APP, "Features");
    admin_idea(server, APP, board, "Dark mode", "open");
    free(board);
    appnorth_client *client = gzip_client(server, -1);
    appnorth_error err;
    char *ideas = NULL;
    CHECK_STATUS(appnorth_client_list_ideas(client, NULL, &ideas, &err), APPNORTH_OK, err);
    json_t *doc = json_loads(ideas ? ideas : "{}", 0, NULL);
    const char *idea = json_string_value(json_object_get(json_array_get(json_object_get(doc, "ideas"), 0), "id"));
    char path[256];
    snprintf(path, sizeof path, "/v1/apps/" APP "/ideas/%s/comments", idea ? idea : "?");
    char big[APPNORTH_GZIP_WRITE_THRESHOLD_BYTES * 2];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK_STATUS(appnorth_client_submit_comment(client, idea, "+1", NULL, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_submit_comment(client, idea, big, NULL, NULL, &err), APPNORTH_OK, err);
    char log[256];
    posts_to(server, path, log, sizeof log);
    CHECK(strcmp(log, "201 identity 201 gzip") == 0, "comment posts: %s", log);
    json_decref(doc);
    appnorth_string_free(ideas);
    appnorth_client_free(client);
}

static void test_415_falls_back_to_identity_and_is_remembered(void) {
    reset(server);
    CHECK(admin_request(server, "POST", "/admin/settings", "{\"accept_gzip\":false}", NULL) == 200, "settings");
    uploader u = open_uploader(server, -1);
    track_and_flush(u.events, 0, 3);
    char log[256];
    posts_to(server, EVENTS_PATH, log, sizeof log);
    CHECK(strcmp(log, "415 gzip 200 identity") == 0, "first flush: %s", log);
    track_and_flush(u.events, 3, 2);
    posts_to(server, EVENTS_PATH, log, sizeof log);
    CHECK(strcmp(log, "415 gzip 200 identity 200 identity") == 0, "remembered: %s", log);
    size_t distinct = 0, n = stored_events(server, &distinct);
    CHECK(n == 5 && distinct == 5, "stored %zu events, %zu distinct", n, distinct);
    close_uploader(&u);
}

static void test_compression_can_be_turned_off(void) {
    reset(server);
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_compression(o, 2, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_compression(o, -1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_compression(NULL, 0, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_compression(o, 0, NULL), APPNORTH_OK, err);
    appnorth_client_options_free(o);

    uploader u = open_uploader(server, 0);
    track_and_flush(u.events, 0, 10);
    char log[256];
    posts_to(server, EVENTS_PATH, log, sizeof log);
    CHECK(strcmp(log, "200 identity") == 0, "compression off: %s", log);
    close_uploader(&u);
}

int main(void) {
    server = test_start("test_gzip", 180);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);
    RUN_WITH(test_batches_arrive_gzip_and_are_stored_once, server);
    RUN(test_small_writes_stay_identity_large_ones_are_compressed);
    RUN(test_415_falls_back_to_identity_and_is_remembered);
    RUN(test_compression_can_be_turned_off);
    const char *tls = getenv("APPNORTH_TEST_TLS_SERVER");
    if (tls) test_batches_arrive_gzip_and_are_stored_once(tls);
    reset(server);
    curl_global_cleanup();
    return check_summary();
}
