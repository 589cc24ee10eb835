/* The TTL read cache and cached-then-fresh reads, on a manual clock.
 * Fixtures and the story rules: offline_support.h. */
#include "offline_support.h"

/* ---- the read cache --------------------------------------------------------- */

/* A cache on its own memory storage with a manual clock. */
static appnorth_cache *memory_cache(int32_t ttl, appnorth_clock *clock) {
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, ttl, clock, &cache, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    return cache;
}

static int cached_ideas(appnorth_cache *cache, const char *scope, const char *query) {
    appnorth_error err;
    char *text = (char *)1;
    int32_t rc = appnorth_cache_ideas(cache, scope, query, &text, &err);
    CHECK_STATUS(rc, APPNORTH_OK, err);
    int hit = rc == APPNORTH_OK && text != NULL;
    if (rc == APPNORTH_OK) appnorth_string_free(text);
    return hit;
}

static int cached_boards(appnorth_cache *cache, const char *scope) {
    appnorth_error err;
    char *text = (char *)1;
    int32_t rc = appnorth_cache_boards(cache, scope, &text, &err);
    CHECK_STATUS(rc, APPNORTH_OK, err);
    int hit = rc == APPNORTH_OK && text != NULL;
    if (rc == APPNORTH_OK) appnorth_string_free(text);
    return hit;
}

static void test_cache_stores_and_reads_boards_and_ideas(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    admin_idea(server, APP, board, "Faster search", "planned");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(0, clock);

    char *boards_text = NULL, *ideas_text = NULL, *text = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &boards_text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, NULL, &ideas_text, &err), APPNORTH_OK, err);
    json_t *boards_reply = parse(boards_text), *ideas_reply = parse(ideas_text);

    CHECK(!cached_boards(cache, scope), "empty cache: no boards (NULL, APPNORTH_OK)");
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, boards_text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    json_t *got = take_json(text);
    CHECK(json_is_array(got) && json_equal(got, json_object_get(boards_reply, "boards")),
          "boards read back as the array from the response object");
    json_decref(got);

    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, NULL, ideas_text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_ideas(cache, scope, NULL, &text, &err), APPNORTH_OK, err);
    got = take_json(text);
    CHECK(json_array_size(got) == 2 && json_equal(got, json_object_get(ideas_reply, "ideas")), "ideas read back");
    json_decref(got);
    CHECK(ideas_text && strstr(ideas_text, "next_cursor"), "the response object had a cursor field");

    /* An array is accepted as well as the response object. */
    char *array = json_dumps(json_object_get(ideas_reply, "ideas"), JSON_COMPACT);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"status\":\"planned\"}", "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_ideas(cache, scope, "{\"status\":\"planned\"}", &text, &err), APPNORTH_OK, err);
    CHECK(str_eq(text, "[]"), "empty array cached: %s", text ? text : "(null)");
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"q\":\"a\"}", array, &err), APPNORTH_OK, err);
    CHECK(cached_ideas(cache, scope, "{\"q\":\"a\"}"), "array stored");
    free(array);

    /* Bad input */
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "{\"boards\":", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "{\"ideas\":[]}", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, NULL, "[]", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_store_boards(NULL, scope, "[]", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"colour\":\"red\"}", "[]", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_cache_boards(cache, scope, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_new(NULL, 0, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_storage *s = NULL;
    appnorth_storage_new_memory(&s, &err);
    appnorth_cache *bad = (appnorth_cache *)1;
    CHECK_STATUS(appnorth_cache_new(s, -1, NULL, &bad, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(bad == NULL, "out_cache NULL on failure");
    CHECK_STATUS(appnorth_cache_new(s, 31536001, NULL, &bad, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_storage_free(s);
    CHECK(cached_boards(cache, scope), "earlier entries survive refused stores");

    json_decref(boards_reply);
    json_decref(ideas_reply);
    appnorth_string_free(boards_text);
    appnorth_string_free(ideas_text);
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_cache_keys_include_every_filter(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(0, clock);
    const char *scope = "http://127.0.0.1:1|tapp|ada@example.com";
    const char *query = "{\"board\":\"b_1\",\"q\":\"dark\",\"status\":\"open\"}";
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, query, "[{\"id\":\"i_1\"}]", &err), APPNORTH_OK, err);

    CHECK(cached_ideas(cache, scope, query), "the same query hits");
    CHECK(cached_ideas(cache, scope, "{\"status\":\"open\",\"q\":\"dark\",\"board\":\"b_1\"}"),
          "the same filters in another key order hit");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"q\":\"light\",\"status\":\"open\"}"), "different q misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"status\":\"open\"}"), "no q misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"q\":\"dark\",\"status\":\"planned\"}"), "status misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_2\",\"q\":\"dark\",\"status\":\"open\"}"), "board misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"q\":\"dark\",\"status\":\"open\",\"limit\":5}"),
          "page size misses");
    CHECK(!cached_ideas(cache, scope, NULL), "no filters misses");
    CHECK(!cached_ideas(cache, "http://127.0.0.1:1|tapp|bob@example.com", query), "another account misses");
    CHECK(!cached_ideas(cache, "http://127.0.0.1:1|other|ada@example.com", query), "another app misses");
    CHECK(!cached_ideas(cache, "http://127.0.0.2:1|tapp|ada@example.com", query), "another server misses");
    CHECK(!cached_boards(cache, scope), "ideas are not boards");
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
}

static void test_cache_clear_scope(void) {
    appnorth_error err;
    appnorth_cache *cache = memory_cache(0, NULL);
    const char *ada = "http://127.0.0.1:1|tapp|ada@example.com", *bob = "http://127.0.0.1:1|tapp|bob@example.com";
    CHECK_STATUS(appnorth_cache_store_boards(cache, ada, "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, ada, "{\"q\":\"x\"}", "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, bob, "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, bob, NULL, "[]", &err), APPNORTH_OK, err);

    CHECK_STATUS(appnorth_cache_clear(cache, ada, &err), APPNORTH_OK, err);
    CHECK(!cached_boards(cache, ada) && !cached_ideas(cache, ada, "{\"q\":\"x\"}"), "ada's boards and ideas removed");
    CHECK(cached_boards(cache, bob) && cached_ideas(cache, bob, NULL), "bob's kept");
    CHECK_STATUS(appnorth_cache_clear(cache, "unknown", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_clear(cache, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_cache_free(cache);
}

static void test_cache_refuses_cursor_queries(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    admin_idea(server, APP, board, "Second", "open");
    admin_idea(server, APP, board, "Third", "open");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_cache *cache = memory_cache(0, NULL);

    char *page1 = NULL;
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"limit\":2}", &page1, &err), APPNORTH_OK, err);
    json_t *reply = parse(page1);
    const char *cursor = json_string_value(json_object_get(reply, "next_cursor"));
    CHECK(cursor != NULL, "a second page exists");
    char cursor_query[512];
    snprintf(cursor_query, sizeof cursor_query, "{\"limit\":2,\"cursor\":\"%s\"}", cursor ? cursor : "x");

    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, cursor_query, page1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(!cached_ideas(cache, scope, "{\"limit\":2}"), "nothing stored for a cursor query");

    /* Only first pages are cached: a cursor query never reads page 1 back. */
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"limit\":2}", page1, &err), APPNORTH_OK, err);
    char *text = NULL;
    int32_t rc = appnorth_cache_ideas(cache, scope, cursor_query, &text, &err);
    CHECK((rc == APPNORTH_OK && text == NULL) || rc == APPNORTH_E_INVALID_ARGUMENT,
          "a cursor query must not return the cached first page: rc %d, got %s", rc, text ? text : "(null)");
    appnorth_string_free(text);

    deliveries d = {0};
    clear_request_log();
    CHECK_STATUS(appnorth_read_ideas(cache, c, cursor_query, on_read, &d, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(d.calls == 0, "no delivery for a cursor query");
    json_t *sent = logged_requests(NULL, NULL);
    CHECK(json_array_size(sent) == 0, "refused before any request");
    json_decref(sent);
    deliveries_reset(&d);

    json_decref(reply);
    appnorth_string_free(page1);
    appnorth_cache_free(cache);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_cache_expiry_with_a_manual_clock(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(WALL_START, &clock, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_clock_advance(clock, -1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_clock_advance(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    const char *scope = "http://127.0.0.1:1|tapp|anonymous";

    appnorth_cache *short_ttl = memory_cache(10, clock);
    CHECK_STATUS(appnorth_cache_store_boards(short_ttl, scope, "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_ideas(short_ttl, scope, NULL, "[]", &err), APPNORTH_OK, err);
    appnorth_clock_advance(clock, 9000, &err);
    CHECK(cached_boards(short_ttl, scope) && cached_ideas(short_ttl, scope, NULL), "9 s of 10: fresh");
    appnorth_clock_advance(clock, 2000, &err);
    CHECK(!cached_boards(short_ttl, scope) && !cached_ideas(short_ttl, scope, NULL), "11 s of 10: expired");
    /* Storing again makes it fresh again. */
    CHECK_STATUS(appnorth_cache_store_boards(short_ttl, scope, "[]", &err), APPNORTH_OK, err);
    CHECK(cached_boards(short_ttl, scope), "restored: fresh");
    appnorth_cache_free(short_ttl);

    appnorth_cache *default_ttl = memory_cache(0, clock);
    CHECK_STATUS(appnorth_cache_store_boards(default_ttl, scope, "[]", &err), APPNORTH_OK, err);
    appnorth_clock_advance(clock, (APPNORTH_CACHE_DEFAULT_TTL_SECONDS - 1) * 1000LL, &err);
    CHECK(cached_boards(default_ttl, scope), "299 s of the default 300: fresh");
    appnorth_clock_advance(clock, 2000, &err);
    CHECK(!cached_boards(default_ttl, scope), "301 s: expired");
    appnorth_cache_free(default_ttl);
    appnorth_clock_free(clock);
}

static void test_wall_clock_changes_do_not_change_freshness(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(WALL_START, &clock, &err), APPNORTH_OK, err);
    appnorth_storage *storage = NULL;
    appnorth_storage_new_memory(&storage, &err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    const char *scope = "http://127.0.0.1:1|tapp|anonymous";
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);

    /* Within this process age is monotonic: wall jumps change nothing. */
    CHECK_STATUS(appnorth_clock_set_wall(clock, WALL_START + 10LL * 365 * 24 * 3600 * 1000, &err), APPNORTH_OK, err);
    CHECK(cached_boards(cache, scope), "wall clock ten years ahead: still fresh");
    CHECK_STATUS(appnorth_clock_set_wall(clock, 0, &err), APPNORTH_OK, err);
    CHECK(cached_boards(cache, scope), "wall clock back to 1970: still fresh");
    CHECK_STATUS(appnorth_clock_set_wall(clock, WALL_START, &err), APPNORTH_OK, err);
    appnorth_clock_advance(clock, 61 * 1000, &err);
    CHECK(!cached_boards(cache, scope), "61 s of monotonic time: expired");

    /* Across a restart (a new cache on the same storage) age is wall time,
     * and an entry stored "in the future" counts as expired. */
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);
    long long stored_at = WALL_START + 61 * 1000;
    appnorth_cache_free(cache);
    appnorth_clock_set_wall(clock, stored_at + 5000, &err);
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK(cached_boards(cache, scope), "restart 5 s later: fresh");
    appnorth_cache_free(cache);
    appnorth_clock_set_wall(clock, stored_at - 3600 * 1000, &err);
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK(!cached_boards(cache, scope), "restart with the wall clock an hour before the entry: expired");
    appnorth_cache_free(cache);
    appnorth_clock_set_wall(clock, stored_at + 61 * 1000, &err);
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK(!cached_boards(cache, scope), "restart 61 s later: expired");
    appnorth_cache_free(cache);
    appnorth_storage_free(storage);
    appnorth_clock_free(clock);
}

static void test_read_boards_cached_then_fresh(void) {
    admin_reset(server);
    char *board = admin_board(server, APP, "Features");
    free(admin_board(server, APP, "Bugs"));
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(60, clock);
    deliveries d = {0};

    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK && count_of(d.values[0]) == 2,
          "cold: one network delivery of 2 boards (%d calls)", d.calls);
    deliveries_reset(&d);
    CHECK(cached_boards(cache, scope), "the network result is now cached");

    /* The server changes; the cache shows the old list first, then the new. */
    free(admin_board(server, APP, "Questions"));
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 2 && d.sources[0] == APPNORTH_SOURCE_CACHE && d.sources[1] == APPNORTH_SOURCE_NETWORK,
          "warm: cache then network (%d calls)", d.calls);
    CHECK(count_of(d.values[0]) == 2 && count_of(d.values[1]) == 3, "cached 2, fresh 3");
    deliveries_reset(&d);

    /* Server unreachable, fresh cache: the cached data, then the error. */
    go_offline();
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_E_NETWORK, err);
    go_online();
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_CACHE && count_of(d.values[0]) == 3,
          "offline: the cached 3 boards delivered (%d calls)", d.calls);
    deliveries_reset(&d);

    /* Server unreachable, expired cache: nothing delivered. */
    appnorth_clock_advance(clock, 61 * 1000, &err);
    go_offline();
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_E_NETWORK, err);
    go_online();
    CHECK(d.calls == 0, "offline and expired: no stale delivery (%d calls)", d.calls);
    deliveries_reset(&d);

    /* An HTTP error is returned the same way, after the cached data. */
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_OK, err);
    deliveries_reset(&d);
    add_fault("{\"status\":503,\"count\":1}");
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_E_SERVER, err);
    go_online();
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_CACHE, "503: cached data delivered");
    deliveries_reset(&d);

    CHECK_STATUS(appnorth_read_boards(cache, c, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_read_boards(NULL, c, on_read, &d, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
}

static void test_read_ideas_cached_then_fresh(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    admin_idea(server, APP, board, "Dark icons", "open");
    admin_idea(server, APP, board, "Offline sync", "planned");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(0, clock);
    deliveries d = {0};
    const char *dark = "{\"q\":\"dark\"}";

    CHECK_STATUS(appnorth_read_ideas(cache, c, dark, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK && count_of(d.values[0]) == 2,
          "cold: network only, 2 dark ideas");
    deliveries_reset(&d);
    CHECK(cached_ideas(cache, scope, dark), "stored under the query");
    CHECK(!cached_ideas(cache, scope, NULL), "not under another query");

    admin_idea(server, APP, board, "Dark splash", "open");
    CHECK_STATUS(appnorth_read_ideas(cache, c, dark, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 2 && d.sources[0] == APPNORTH_SOURCE_CACHE && d.sources[1] == APPNORTH_SOURCE_NETWORK &&
          count_of(d.values[0]) == 2 && count_of(d.values[1]) == 3, "warm: cached 2, then fresh 3");
    deliveries_reset(&d);

    /* Another query has no cache entry: network only. */
    CHECK_STATUS(appnorth_read_ideas(cache, c, "{\"status\":\"planned\"}", on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK && count_of(d.values[0]) == 1, "planned: network only");
    deliveries_reset(&d);

    go_offline();
    CHECK_STATUS(appnorth_read_ideas(cache, c, dark, on_read, &d, &err), APPNORTH_E_NETWORK, err);
    go_online();
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_CACHE && count_of(d.values[0]) == 3,
          "offline: cached ideas delivered, then the network error");
    deliveries_reset(&d);

    CHECK_STATUS(appnorth_read_ideas(cache, c, "{\"colour\":1}", on_read, &d, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(d.calls == 0, "bad query: no delivery");
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

int main(void) {
    server = test_start("test_cache", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);

    RUN(test_cache_stores_and_reads_boards_and_ideas);
    RUN(test_cache_keys_include_every_filter);
    RUN(test_cache_clear_scope);
    RUN(test_cache_refuses_cursor_queries);
    RUN(test_cache_expiry_with_a_manual_clock);
    RUN(test_wall_clock_changes_do_not_change_freshness);
    RUN(test_read_boards_cached_then_fresh);
    RUN(test_read_ideas_cached_then_fresh);

    curl_global_cleanup();
    return check_summary();
}
