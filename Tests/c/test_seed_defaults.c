/* The seeds' default numbers through the real libappnorth.so, each observed
 * on objects built with the library's defaults (0 or no setter), against
 * the local API server: config TTL 3600 s and read-cache TTL 300 s on a
 * manual clock, the offline queue's 50 entries, the event queue's flush at
 * 20 events. (The 30 s / 60 s network timeouts are in test_timeouts.c; the
 * event limits, retries and breaker in test_events.c, whose "quiet" options
 * keep those defaults; every default in Swift: SeedDefaultsTests.) */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "support.h"

#define APP "tdefaults"

static const char *server;

/* Logged API requests with this method whose path ends with `suffix`. */
static size_t requests_now(const char *method, const char *suffix) {
    json_t *reply = NULL;
    admin_request(server, "GET", "/admin/requests", NULL, &reply);
    size_t i, n = 0, len = strlen(suffix);
    json_t *entry;
    json_array_foreach(json_object_get(reply, "requests"), i, entry) {
        const char *m = json_string_value(json_object_get(entry, "method"));
        const char *p = json_string_value(json_object_get(entry, "path"));
        if (m && p && strcmp(m, method) == 0 && strlen(p) >= len && strcmp(p + strlen(p) - len, suffix) == 0) n++;
    }
    json_decref(reply);
    return n;
}

/* The same, read again until it settles: the server logs a request just
 * after answering it. */
static size_t requests_to(const char *method, const char *suffix) {
    size_t n = requests_now(method, suffix);
    for (int i = 0; i < 50; i++) {
        sleep_ms(10);
        size_t again = requests_now(method, suffix);
        if (again == n) break;
        n = again;
    }
    return n;
}

/* How many of APP's items of `kind` ("events", "ideas") the server stores. */
static size_t stored(const char *kind) {
    json_t *state = NULL;
    admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &state);
    size_t n = json_array_size(json_object_get(state, kind));
    json_decref(state);
    return n;
}

static int eventually_stored(const char *kind, size_t n) {
    int64_t deadline = mono_ms() + 5000;
    while (stored(kind) != n && mono_ms() < deadline) sleep_ms(20);
    return stored(kind) == n;
}

/* Used only to show that something did *not* happen yet. */
#define SETTLE_MS 300

/* ---- Remote config: TTL 3600 s ------------------------------------------ */

static appnorth_config *default_config(appnorth_client *c, const char *dir, appnorth_clock *clock) {
    appnorth_error err;
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_clock(o, clock, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    return config;
}

static int64_t config_v(appnorth_config *config) {
    int64_t v = -1;
    appnorth_error err;
    CHECK_STATUS(appnorth_config_get_int(config, "v", 0, &v, &err), APPNORTH_OK, err);
    return v;
}

static void test_config_cache_is_fresh_for_3600_seconds(void) {
    admin_reset(server);
    char *dir = make_temp_dir("defaults");
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(1700000000000LL, &clock, &err), APPNORTH_OK, err);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    admin_request(server, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"v\":1}}", NULL);
    appnorth_config *seeded = default_config(c, dir, clock);
    CHECK_STATUS(appnorth_config_refresh(seeded, &err), APPNORTH_OK, err);
    appnorth_config_free(seeded);
    admin_request(server, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"v\":2}}", NULL);

    appnorth_config *config = default_config(c, dir, clock);
    size_t before = requests_to("GET", "/config");
    CHECK_STATUS(appnorth_clock_advance(clock, 3599999, &err), APPNORTH_OK, err);
    CHECK(config_v(config) == 1, "cached value");
    sleep_ms(SETTLE_MS);
    CHECK(requests_to("GET", "/config") == before, "fresh until 3600 s: no fetch");
    CHECK_STATUS(appnorth_clock_advance(clock, 1, &err), APPNORTH_OK, err);
    CHECK(config_v(config) == 1, "stale value served while it revalidates");
    int64_t deadline = mono_ms() + 5000;
    while (config_v(config) != 2 && mono_ms() < deadline) sleep_ms(20);
    CHECK(config_v(config) == 2, "expired at 3600 s: fetched");

    appnorth_config_free(config);
    appnorth_client_free(c);
    appnorth_clock_free(clock);
    remove_tree(dir);
}

/* ---- Read cache: TTL 300 s --------------------------------------------- */

static void test_read_cache_entries_live_300_seconds(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_storage *storage = NULL;
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(1700000000000LL, &clock, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_new(storage, 0, clock, &cache, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, "s", "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);
    char *json = NULL;
    CHECK_STATUS(appnorth_clock_advance(clock, 299999, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_boards(cache, "s", &json, &err), APPNORTH_OK, err);
    CHECK(json && strcmp(json, "[{\"id\":\"b_1\"}]") == 0, "fresh at 299.999 s: %s", json ? json : "(null)");
    appnorth_string_free(json);
    json = NULL;
    CHECK_STATUS(appnorth_clock_advance(clock, 1, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_boards(cache, "s", &json, &err), APPNORTH_OK, err);
    CHECK(json == NULL, "expired at 300 s");
    appnorth_cache_free(cache);
    appnorth_storage_free(storage);
    appnorth_clock_free(clock);
}

/* ---- Offline queue: 50 entries ------------------------------------------- */

static void test_offline_queue_holds_50_writes(void) {
    admin_reset(server);
    char *board = admin_board(server, APP, "defaults");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    appnorth_storage *storage = NULL;
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    long status = admin_request(server, "POST", "/admin/faults", "{\"drop\":true,\"count\":1000}", NULL);
    CHECK(status == 201, "offline: HTTP %ld", status);
    int32_t submitted = -1;
    for (int i = 0; i < 50; i++) {
        char title[32];
        snprintf(title, sizeof title, "idea %d", i);
        CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, title, "", NULL, &submitted, &err), APPNORTH_OK, err);
    }
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "one too many", "", NULL, &submitted, &err),
                 APPNORTH_E_QUEUE_FULL, err);
    admin_request(server, "DELETE", "/admin/faults", NULL, NULL);
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 50 && stored("ideas") == 50, "the 50 arrive: sent %d, stored %zu", sent, stored("ideas"));
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(board);
}

/* ---- Events: a flush at 20 events ---------------------------------------- */

static void test_events_flush_at_20_events(void) {
    admin_reset(server);
    char *dir = make_temp_dir("defaults");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    int32_t queued = -1;
    for (int i = 0; i < 19; i++) CHECK_STATUS(appnorth_events_track(e, "e", NULL, &queued, &err), APPNORTH_OK, err);
    sleep_ms(SETTLE_MS); /* far below the 30 s timer */
    CHECK(requests_to("POST", "/events") == 0, "19 events wait");
    CHECK_STATUS(appnorth_events_track(e, "e", NULL, &queued, &err), APPNORTH_OK, err);
    CHECK(eventually_stored("events", 20), "the 20th starts a flush: %zu stored", stored("events"));
    CHECK(requests_to("POST", "/events") == 1, "one request of 20");
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    server = test_start("test_seed_defaults", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);
    (void)admin_idea; /* admin.h helpers this suite does not need */

    RUN(test_config_cache_is_fresh_for_3600_seconds);
    RUN(test_read_cache_entries_live_300_seconds);
    RUN(test_offline_queue_holds_50_writes);
    RUN(test_events_flush_at_20_events);

    curl_global_cleanup();
    return check_summary();
}
