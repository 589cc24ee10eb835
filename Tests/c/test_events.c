/* The seed's Event Queue rules (persistence, flush triggers, adaptive batch
 * size, storage limits) and bad input at track(). Fixtures and the story
 * rules: events_support.h. */
#include "events_support.h"

/* ---- Bad input ---------------------------------------------------------------- */

static void expect_refused(int32_t rc, int32_t want, const appnorth_error *err, const char *what) {
    CHECK(rc == want, "%s: got %d (%s), want %d (%s): %s", what, rc, appnorth_status_str(rc), want,
          appnorth_status_str(want), err->message);
    CHECK(err->code == rc && err->http_status == 0 && strlen(err->message) > 0, "%s: err filled: %d '%s'", what,
          err->code, err->message);
}

static void test_bad_input_is_refused_and_nothing_is_stored(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_error err;
    int32_t q = -1;
    char *out = (char *)1;

    /* NULL handles. */
    appnorth_events_free(NULL);
    appnorth_events_options_free(NULL);
    expect_refused(appnorth_events_track(NULL, "x", NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "track NULL");
    CHECK(q == 0, "out_queued 0 on failure: %d", q);
    CHECK(strstr(err.message, "events") != NULL, "message names the handle: %s", err.message);
    expect_refused(appnorth_events_flush(NULL, 10, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "flush NULL");
    expect_refused(appnorth_events_close(NULL, 0, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "close NULL");
    expect_refused(appnorth_events_set_network_type(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "network NULL");
    expect_refused(appnorth_events_start_session(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "session NULL");
    expect_refused(appnorth_events_foreground(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "foreground NULL");
    expect_refused(appnorth_events_set_consent(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "consent NULL");
    int32_t state = 7;
    expect_refused(appnorth_events_consent(NULL, &state, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "get consent NULL");
    expect_refused(appnorth_events_identify(NULL, "u", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify NULL");
    expect_refused(appnorth_events_reset(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "reset NULL");
    expect_refused(appnorth_events_set_push_token(NULL, "t", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "push NULL");
    expect_refused(appnorth_events_anonymous_id(NULL, &out, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "anon NULL");
    CHECK(out == NULL, "out_id NULL on failure");
    out = (char *)1;
    expect_refused(appnorth_events_stats(NULL, &out, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "stats NULL");
    CHECK(out == NULL, "out_json NULL on failure");
    CHECK(appnorth_events_track(NULL, "x", NULL, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "NULL err accepted");

    /* Options. */
    appnorth_events *e = (appnorth_events *)1;
    expect_refused(appnorth_events_new(NULL, &e, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "new NULL options");
    CHECK(e == NULL, "out_events NULL on failure");
    expect_refused(appnorth_events_options_set_client(NULL, c, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "set_client NULL options");
    expect_refused(appnorth_events_options_set_data_dir(NULL, dir, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "set_data_dir NULL options");
    appnorth_events_options *o = appnorth_events_options_new();
    expect_refused(appnorth_events_options_set_client(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL client");
    expect_refused(appnorth_events_options_set_data_dir(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL dir");
    expect_refused(appnorth_events_options_set_data_dir(o, "", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "empty dir");
    expect_refused(appnorth_events_options_set_flush_policy(o, 0, 20, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "interval 0");
    expect_refused(appnorth_events_options_set_flush_policy(o, 30000, 0, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "threshold 0");
    expect_refused(appnorth_events_options_set_flush_policy(o, 30000, 10001, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "threshold 10001");
    expect_refused(appnorth_events_options_set_limits(o, 0, 5242880, 65536, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "max_events 0");
    expect_refused(appnorth_events_options_set_retry(o, 0, 3, 120000, 5, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "base 0");
    expect_refused(appnorth_events_options_set_retry(o, 1000, 3, 120000, 0, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "breaker 0");
    expect_refused(appnorth_events_options_set_secure_store(o, NULL, secrets_set, NULL, NULL, &err),
                   APPNORTH_E_INVALID_ARGUMENT, &err, "secure store without get");
    expect_refused(appnorth_events_options_set_secure_store(o, secrets_get, NULL, NULL, NULL, &err),
                   APPNORTH_E_INVALID_ARGUMENT, &err, "secure store without set");
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    e = (appnorth_events *)1;
    expect_refused(appnorth_events_new(o, &e, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "no client");
    CHECK(strstr(err.message, "client") != NULL, "message names the client: %s", err.message);
    CHECK(e == NULL, "no handle");
    appnorth_events_options_free(o);
    o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, c, &err), APPNORTH_OK, err);
    expect_refused(appnorth_events_new(o, &e, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "no data dir");
    CHECK(strstr(err.message, "dir") != NULL, "message names the data directory: %s", err.message);
    expect_refused(appnorth_events_new(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL out_events");
    appnorth_events_options_free(o);
    CHECK(!path_exists(dir, "appnorth.sqlite3"), "no database made by refused opens");

    /* Calls on a good handle. */
    e = open_quiet(c, dir);
    char name[600];
    memset(name, 'n', 257);
    name[257] = 0;
    q = -1;
    expect_refused(appnorth_events_track(e, NULL, NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL name");
    CHECK(q == 0, "out_queued 0");
    expect_refused(appnorth_events_track(e, "", NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "empty name");
    expect_refused(appnorth_events_track(e, name, NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "257 chars");
    expect_refused(appnorth_events_track(e, "bad\xff", NULL, &q, &err), APPNORTH_E_INVALID_UTF8, &err, "bad UTF-8 name");
    const char *bad_json[] = {"[1]", "{\"a\":", "\"text\"", "null", "42", "", "{} {}", "{\"a\":1,}",
                              /* as jansson judges them: a lone surrogate, a double overflow,
                               * \u0000 in a key, a leading zero */
                              "{\"a\":\"\\uD800\"}", "{\"n\":1e400}", "{\"a\\u0000\":1}", "{\"n\":01}"};
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "properties '%s'", bad_json[i]);
        q = -1;
        expect_refused(appnorth_events_track(e, "x", bad_json[i], &q, &err), APPNORTH_E_INVALID_JSON, &err, what);
        CHECK(q == 0, "%s: out_queued 0", what);
    }
    expect_refused(appnorth_events_track(e, "x", "{\"a\":1,}", &q, &err), APPNORTH_E_INVALID_JSON, &err, "trailing comma");
    CHECK(strstr(err.message, "string or '}' expected") && strstr(err.message, "byte 7"),
          "the message says what and where: %s", err.message);
    expect_refused(appnorth_events_track(e, "x", "{\"a\":\"\xff\xfe\"}", &q, &err), APPNORTH_E_INVALID_UTF8, &err,
                   "properties bad UTF-8");
    expect_refused(appnorth_events_set_network_type(e, 9, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "network 9");
    expect_refused(appnorth_events_set_network_type(e, -1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "network -1");
    expect_refused(appnorth_events_identify(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify NULL");
    expect_refused(appnorth_events_identify(e, "", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify empty");
    expect_refused(appnorth_events_identify(e, name, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify 257 bytes");
    expect_refused(appnorth_events_flush(e, -1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "flush -1");
    expect_refused(appnorth_events_consent(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "consent NULL out");
    expect_refused(appnorth_events_anonymous_id(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "anon NULL out");
    expect_refused(appnorth_events_stats(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "stats NULL out");
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "nothing stored by refused calls: %d", disk_rows(dir));

    /* The edges that are fine: 256 characters, counted as characters. */
    name[256] = 0;
    track_ok(e, name, NULL);
    char wide[600];
    for (int i = 0; i < 256; i++) memcpy(wide + 2 * i, "\xc3\xa9", 2); /* é: 256 characters, 512 bytes */
    wide[512] = 0;
    track_ok(e, wide, NULL);
    CHECK(disk_rows(dir) == 2, "2 stored: %d", disk_rows(dir));
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 2 && server_events_named(name) == 1 && server_events_named(wide) == 1,
          "the server accepts 256-character names: %zu", server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Event Queue: persistence -------------------------------------------- */

static void test_track_is_on_disk_before_it_returns(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);

    CHECK(disk_rows(dir) == 0, "empty queue on disk: %d", disk_rows(dir));
    track_ok(e, "opened", NULL);
    /* Read by another connection at once: the insert has committed. */
    CHECK(disk_rows(dir) == 1, "1 row on disk right after track: %d", disk_rows(dir));
    track_ok(e, "second", "{\"k\":1}");
    CHECK(disk_rows(dir) == 2, "2 rows on disk: %d", disk_rows(dir));
    CHECK(queued(e) == 2, "stats queued 2: %ld", queued(e));
    CHECK(server_event_count() == 0, "tracking alone sends nothing");
    CHECK(event_post_count() == 0, "no POST while quiet");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_events_survive_a_restart(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    char *first_anon = anonymous_id(e);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        track_ok(e, name, NULL);
    }
    /* free without close: the upload thread stops, nothing is flushed. */
    appnorth_events_free(e);
    CHECK(disk_rows(dir) == 3, "3 rows after the handle is gone: %d", disk_rows(dir));
    CHECK(server_event_count() == 0, "nothing sent by free");

    /* A quiet queue (1 h timer, threshold 10,000) sends what an earlier
     * run left as soon as it opens: no flush call, no timer. */
    e = open_quiet(c, dir);
    char *anon = anonymous_id(e);
    CHECK(str_eq(anon, first_anon), "anonymous id stable across reopening: %s vs %s", anon, first_anon);
    CHECK(eventually_server_holds(3), "the left-over events arrive soon after open: %zu", server_event_count());
    appnorth_error err;
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    CHECK(json_array_size(events) == 3, "3 events delivered after the restart: %zu", json_array_size(events));
    CHECK(str_eq(str_of(json_array_get(events, 0), "name"), "r0") &&
              str_eq(str_of(json_array_get(events, 2), "name"), "r2"),
          "in tracking order");
    CHECK(str_eq(str_of(json_array_get(events, 0), "anonymous_id"), first_anon), "anonymous id on the events");
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "delivered events leave the disk: %d", disk_rows(dir));
    json_decref(events);
    appnorth_string_free(first_anon);
    appnorth_string_free(anon);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_event_fields_and_verbatim_properties(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    char *anon = anonymous_id(e);
    CHECK(anon && strlen(anon) > 0, "an anonymous id exists from the start");

    CHECK_STATUS(appnorth_events_identify(e, "user-42", &err), APPNORTH_OK, err);
    int64_t before = wall_ms();
    track_ok(e, "purchase", "{\"price\":9.99}");
    /* Spelling, spacing, key order, big numbers and escapes stay as written. */
    const char *odd = "{ \"z\" : 1.50, \"a\":[1e3, -0.0, 1E-7], \"s\":\"\\u00e9\\n\\\"q\\\"\" }";
    track_ok(e, "odd \"name\" \xc3\xa9", odd);
    track_ok(e, "no properties", NULL);
    int64_t after = wall_ms();
    CHECK_STATUS(appnorth_events_start_session(e, &err), APPNORTH_OK, err);
    track_ok(e, "next session", "{}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);

    json_t *events = server_events();
    CHECK(json_array_size(events) == 4, "4 events stored: %zu", json_array_size(events));
    json_t *p = json_array_get(events, 0);
    CHECK(str_eq(str_of(p, "name"), "purchase"), "name: %s", str_of(p, "name"));
    CHECK(str_eq(str_of(p, "properties_raw"), "{\"price\":9.99}"), "properties verbatim: %s", str_of(p, "properties_raw"));
    CHECK(str_eq(str_of(p, "user_id"), "user-42"), "user id: %s", str_of(p, "user_id"));
    CHECK(str_eq(str_of(p, "anonymous_id"), anon), "anonymous id: %s", str_of(p, "anonymous_id"));
    const char *id = str_of(p, "id");
    CHECK(id && strlen(id) == 36 && id[14] == '7' && id[8] == '-' && strchr("89ab", id[19]),
          "UUIDv7 id: %s", id ? id : "(null)");
    json_int_t ts = json_integer_value(json_object_get(p, "timestamp"));
    CHECK(ts >= before - 5 && ts <= after + 5, "timestamp %lld within [%lld, %lld]", (long long)ts,
          (long long)before, (long long)after);
    const char *session = str_of(p, "session_id");
    CHECK(session && *session, "a session id");

    json_t *o = json_array_get(events, 1);
    CHECK(str_eq(str_of(o, "name"), "odd \"name\" \xc3\xa9"), "name escaped and back: %s", str_of(o, "name"));
    CHECK(str_eq(str_of(o, "properties_raw"), odd), "odd properties verbatim: %s", str_of(o, "properties_raw"));
    CHECK(str_eq(str_of(o, "session_id"), session), "same session");

    json_t *n = json_array_get(events, 2);
    const char *raw = str_of(n, "properties_raw");
    CHECK(raw == NULL || strcmp(raw, "{}") == 0, "no properties arrive as absent or {}: %s", raw);
    CHECK(!str_eq(str_of(n, "id"), id), "each event has its own id");

    json_t *s = json_array_get(events, 3);
    CHECK(str_of(s, "session_id") && !str_eq(str_of(s, "session_id"), session),
          "start_session makes a new session id: %s", str_of(s, "session_id"));
    CHECK(queued(e) == 0, "queue empty after delivery");
    json_t *st = stats(e);
    CHECK(json_is_integer(json_object_get(st, "last_flush_ms")), "last_flush_ms set after a delivery");
    CHECK(json_is_null(json_object_get(st, "last_error")), "no last error");
    json_decref(st);

    json_decref(events);
    appnorth_string_free(anon);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* Valid JSON the host may well send: an integer past 64 bits (an order
 * number, an id from another system). The header promises the text is
 * stored and sent exactly as given; only invalid JSON may be refused. */
static void test_properties_with_huge_numbers_are_sent_verbatim(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    const char *props = "{\"order\":12345678901234567890123}";
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "big number", props, &q, &err), APPNORTH_OK, err);
    CHECK(q == 1, "queued: %d", q);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    /* The state holds the parsed properties too, which jansson reads only
     * with integers as reals. */
    json_t *state = lenient_get("/admin/apps/" APP "/state");
    json_t *events = json_object_get(state, "events");
    CHECK(json_array_size(events) == 1 && str_eq(str_of(json_array_get(events, 0), "properties_raw"), props),
          "arrives verbatim (%zu stored)", json_array_size(events));
    json_decref(state);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* \u0000 is valid JSON: accepted and sent as written. Properties over
 * max_event_bytes are refused before they are parsed, whatever their size. */
static void test_nul_escape_accepted_and_oversize_properties_refused_at_the_door(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    const char *props = "{\"s\":\"a\\u0000b\"}";
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "nul", props, &q, &err), APPNORTH_OK, err);
    CHECK(q == 1, "queued: %d", q);

    size_t huge = 50u * 1024 * 1024;
    char *big = malloc(huge + 1);
    memset(big, '[', huge); /* not even JSON: measured before parsing */
    big[huge] = 0;
    CHECK_STATUS(appnorth_events_track(e, "huge", big, &q, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK(q == 0, "not queued: %d", q);
    free(big);

    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *state = lenient_get("/admin/apps/" APP "/state");
    json_t *events = json_object_get(state, "events");
    CHECK(json_array_size(events) == 1 && str_eq(str_of(json_array_get(events, 0), "properties_raw"), props),
          "arrives verbatim (%zu stored)", json_array_size(events));
    json_decref(state);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_defaults_are_the_seeds_numbers(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    json_t *s = stats(e);
    json_t *dropped = json_object_get(s, "dropped");
    json_t *breaker = json_object_get(s, "breaker");
    CHECK(json_integer_value(json_object_get(s, "queued")) == 0, "queued 0");
    CHECK(json_is_integer(json_object_get(s, "queued_bytes")), "queued_bytes");
    CHECK(json_integer_value(json_object_get(s, "batch_size")) == 20, "unknown network: batch 20");
    CHECK(str_eq(str_of(s, "network_type"), "unknown"), "network unknown: %s", str_of(s, "network_type"));
    CHECK(str_eq(str_of(s, "consent"), "unknown"), "consent unknown: %s", str_of(s, "consent"));
    CHECK(json_integer_value(json_object_get(breaker, "threshold")) == 5, "breaker threshold 5");
    CHECK(json_integer_value(json_object_get(breaker, "consecutive_failures")) == 0, "no failures");
    CHECK(json_is_false(json_object_get(breaker, "open")), "breaker closed");
    const char *reasons[] = {"queue_limit", "client_error", "payload_too_large", "consent"};
    for (int i = 0; i < 4; i++)
        CHECK(json_integer_value(json_object_get(dropped, reasons[i])) == 0 &&
                  json_is_integer(json_object_get(dropped, reasons[i])),
              "dropped.%s is 0", reasons[i]);
    CHECK(json_is_null(json_object_get(s, "last_error")), "last_error null");
    CHECK(json_is_null(json_object_get(s, "last_flush_ms")), "last_flush_ms null");
    CHECK(json_is_null(json_object_get(s, "last_attempt_ms")), "last_attempt_ms null");
    json_decref(s);

    /* The default batch threshold is 20: 19 events wait, the 20th sends. */
    for (int i = 0; i < 19; i++) track_ok(e, "d", NULL);
    sleep_ms(300);
    CHECK(event_post_count() == 0, "19 events: nothing sent (%zu POSTs)", event_post_count());
    track_ok(e, "d", NULL);
    CHECK(eventually_server_holds(20), "20 events: flushed at once (%zu stored)", server_event_count());
    CHECK(event_post_count() == 1, "in one batch of 20: %zu POSTs", event_post_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* appnorth_events_flush_sent reports what the server accepted, also when
 * the flush fails, and checks its arguments. */
static void test_flush_sent_counts_delivered_events(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    int64_t sent = -1;
    CHECK_STATUS(appnorth_events_flush_sent(e, 5000, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0, "empty queue: sent %lld", (long long)sent);
    for (int i = 0; i < 4; i++) track_ok(e, "counted", NULL);
    CHECK_STATUS(appnorth_events_flush_sent(e, 5000, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 4 && server_event_count() == 4, "sent %lld, server holds %zu", (long long)sent,
          server_event_count());
    CHECK_STATUS(appnorth_events_flush_sent(e, 5000, NULL, &err), APPNORTH_OK, err);

    add_fault("{\"status\":503,\"count\":100}");
    track_ok(e, "refused", NULL);
    sent = -1;
    CHECK(appnorth_events_flush_sent(e, 5000, &sent, &err) == APPNORTH_E_SERVER && sent == 0,
          "a failed flush reports 0 sent: %d %lld", err.code, (long long)sent);
    clear_faults();

    CHECK(appnorth_events_flush_sent(e, -1, &sent, &err) == APPNORTH_E_INVALID_ARGUMENT, "negative timeout");
    CHECK(appnorth_events_flush_sent(NULL, 10, &sent, &err) == APPNORTH_E_INVALID_ARGUMENT && sent == 0,
          "NULL events");
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Event Queue: flush triggers --------------------------------------------- */

static void test_threshold_flush(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, QUIET_INTERVAL_MS, 5, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    for (int i = 0; i < 4; i++) track_ok(e, "below", NULL);
    sleep_ms(200);
    CHECK(server_event_count() == 0, "below the threshold nothing is sent");
    track_ok(e, "reached", NULL);
    CHECK(eventually_server_holds(5), "the 5th event starts a flush: %zu stored", server_event_count());
    CHECK(event_post_count() == 1, "one POST: %zu", event_post_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_timer_flush(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, 150, QUIET_THRESHOLD, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    track_ok(e, "timer", NULL);
    CHECK(eventually_server_holds(1), "the timer flushed one event: %zu stored", server_event_count());
    track_ok(e, "timer2", NULL);
    CHECK(eventually_server_holds(2), "and again on the next tick: %zu stored", server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Event Queue: adaptive batch size ------------------------------------------ */

static void test_batch_size_follows_the_network_type(void) {
    struct {
        int32_t type; /* -1: leave the default */
        const char *name;
        size_t posts;
        long batch;
    } cases[] = {
        {APPNORTH_NETWORK_WIFI, "wifi", 2, 100},
        {APPNORTH_NETWORK_CELLULAR, "cellular", 3, 50},
        {APPNORTH_NETWORK_EXPENSIVE_CELLULAR, "expensive_cellular", 8, 20},
        {APPNORTH_NETWORK_UNKNOWN, "unknown", 8, 20},
        {-1, "unknown", 8, 20},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        admin_reset(server);
        char *dir = make_temp_dir("events");
        appnorth_client *c = app_client();
        appnorth_events *e = open_quiet(c, dir);
        appnorth_error err;
        if (cases[k].type >= 0)
            CHECK_STATUS(appnorth_events_set_network_type(e, cases[k].type, &err), APPNORTH_OK, err);
        json_t *s = stats(e);
        CHECK(str_eq(str_of(s, "network_type"), cases[k].name), "network_type %s: %s", cases[k].name,
              str_of(s, "network_type"));
        CHECK(json_integer_value(json_object_get(s, "batch_size")) == cases[k].batch, "%s batch_size %ld",
              cases[k].name, cases[k].batch);
        json_decref(s);
        for (int i = 0; i < 150; i++) {
            char name[16];
            snprintf(name, sizeof name, "e%d", i);
            track_ok(e, name, NULL);
        }
        CHECK_STATUS(flush(e, 10000, &err), APPNORTH_OK, err);
        size_t posts = event_post_count();
        CHECK(posts == cases[k].posts, "%s%s: 150 events in %zu POSTs, want %zu", cases[k].name,
              cases[k].type < 0 ? " (default)" : "", posts, cases[k].posts);
        CHECK(server_event_count() == 150, "%s: 150 stored: %zu", cases[k].name, server_event_count());
        CHECK(queued(e) == 0, "%s: queue empty", cases[k].name);
        CHECK_STATUS(appnorth_events_close(e, 0, &err), APPNORTH_OK, err);
        appnorth_events_free(e);
        appnorth_client_free(c);
        remove_tree(dir);
    }
}

/* ---- Event Queue: storage limits ------------------------------------------------ */

static void test_oldest_dropped_past_the_count_limit(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_limits(o, 5, 5242880, 65536, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        track_ok(e, name, NULL);
    }
    CHECK(queued(e) == 5, "queued 5: %ld", queued(e));
    CHECK(disk_rows(dir) == 5, "5 rows on disk: %d", disk_rows(dir));
    CHECK(stat_int(e, "dropped", "queue_limit") == 3, "3 dropped for the limit: %ld",
          stat_int(e, "dropped", "queue_limit"));
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    const char *want[] = {"e3", "e4", "e5", "e6", "e7"};
    int same = json_array_size(events) == 5;
    for (size_t i = 0; same && i < 5; i++) same = str_eq(str_of(json_array_get(events, i), "name"), want[i]);
    CHECK(same, "the newest 5 arrive, oldest first (%zu stored)", json_array_size(events));
    json_decref(events);

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_oldest_dropped_past_the_byte_limit(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_limits(o, 10000, 2048, 65536, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    char *props = padded_props('p', 300);
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        track_ok(e, name, props);
    }
    free(props);
    long bytes = stat_int(e, "queued_bytes", NULL), count = queued(e);
    long dropped = stat_int(e, "dropped", "queue_limit");
    CHECK(bytes > 0 && bytes <= 2048, "queued_bytes within 2048: %ld", bytes);
    CHECK(dropped > 0 && dropped + count == 10, "dropped %ld + queued %ld = 10", dropped, count);
    CHECK(disk_rows(dir) == count, "disk rows %d = queued %ld", disk_rows(dir), count);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == (size_t)count, "server holds the %ld kept: %zu", count, server_event_count());
    CHECK(server_events_named("e9") == 1 && server_events_named("e0") == 0, "newest kept, oldest dropped");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* Rows a trim deletes while an upload attempt holds them are counted as
 * dropped when that attempt ends (docs/events.md, BatchLease): polls for up
 * to 10 s until queued + dropped.queue_limit == total, i.e. until the
 * offline attempt in flight has failed and settled. */
static int settled(appnorth_events *e, long total) {
    int64_t deadline = mono_ms() + 10000;
    while (queued(e) + stat_int(e, "dropped", "queue_limit") != total && mono_ms() < deadline) sleep_ms(20);
    return queued(e) + stat_int(e, "dropped", "queue_limit") == total;
}

static void test_default_limits_are_10000_events_and_5_mb(void) {
    if (skip_slow) {
        printf("skipped test_default_limits_are_10000_events_and_5_mb (APPNORTH_TEST_SKIP_SLOW)\n");
        return;
    }
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    /* 10000 events reach even the quiet threshold: keep them from leaving. */
    go_offline();
    for (int i = 0; i < 10002; i++) {
        int32_t q = 0;
        if (appnorth_events_track(e, "n", NULL, &q, NULL) != APPNORTH_OK || q != 1) {
            CHECK(0, "track %d failed", i);
            break;
        }
    }
    CHECK(settled(e, 10002), "every event queued or dropped once the attempt settled: %ld + %ld", queued(e),
          stat_int(e, "dropped", "queue_limit"));
    CHECK(queued(e) == 10000, "at most 10000 events: %ld", queued(e));
    CHECK(stat_int(e, "dropped", "queue_limit") == 2, "2 dropped: %ld", stat_int(e, "dropped", "queue_limit"));
    appnorth_error err;
    CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_OK, err); /* purge */
    CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);

    /* ~60 KB events: their rows get 5 MiB less a tenth (the rest is the
     * WAL's and a draining journal's: the files hold 5 MB, docs/events.md
     * "Disk usage"), at 61,488 bytes each (their pages): 76 of them. */
    char *props = padded_props('b', 60000);
    for (int i = 0; i < 100; i++) track_ok(e, "big", props);
    free(props);
    CHECK(settled(e, 102), "every big event queued or dropped once the attempt settled: %ld + %ld", queued(e),
          stat_int(e, "dropped", "queue_limit"));
    long bytes = stat_int(e, "queued_bytes", NULL);
    CHECK(bytes <= 4718592 && bytes > 4718592 - 62000, "queued bytes just under 5 MiB less a tenth: %ld", bytes);
    CHECK(stat_int(e, "disk_bytes", NULL) <= 5505024, "the files within 5 MiB and 5 %%: %ld", stat_int(e, "disk_bytes", NULL));
    CHECK(queued(e) >= 70 && queued(e) < 100, "oldest big events dropped: %ld kept", queued(e));
    CHECK(stat_int(e, "dropped", "queue_limit") == 2 + (100 - queued(e)), "drops counted: %ld",
          stat_int(e, "dropped", "queue_limit"));
    CHECK(server_event_count() == 0, "nothing sent");
    clear_faults();

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_oversize_event_is_refused_and_the_queue_still_works(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;

    /* The default max_event_bytes is 65536 (the whole upload JSON). */
    char *huge = padded_props('h', 65536);
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "huge", huge, &q, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK(err.code == APPNORTH_E_TOO_LARGE && strlen(err.message) > 0, "message: %s", err.message);
    CHECK(q == 0, "not queued: %d", q);
    CHECK(disk_rows(dir) == 0 && queued(e) == 0, "nothing stored: %d", disk_rows(dir));
    free(huge);

    char *large = padded_props('l', 60000);
    track_ok(e, "large but fits", large);
    free(large);
    track_ok(e, "fine", NULL);
    CHECK(queued(e) == 2, "an oversize event never blocks the queue: %ld", queued(e));
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 2 && server_events_named("fine") == 1 && server_events_named("huge") == 0,
          "the two accepted events arrive: %zu", server_event_count());

    appnorth_events_free(e);

    /* A smaller configured limit. */
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_limits(o, 10000, 5242880, 512, &err), APPNORTH_OK, err);
    e = open_events(o);
    char *props = padded_props('z', 600);
    CHECK_STATUS(appnorth_events_track(e, "x", props, &q, &err), APPNORTH_E_TOO_LARGE, err);
    free(props);
    track_ok(e, "small", "{\"a\":1}");
    CHECK(queued(e) == 1 && disk_rows(dir) == 1, "only the small one: %ld", queued(e));

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    if (!events_suite_start("test_events")) return 2;

    RUN(test_bad_input_is_refused_and_nothing_is_stored);
    RUN(test_track_is_on_disk_before_it_returns);
    RUN(test_events_survive_a_restart);
    RUN(test_flush_sent_counts_delivered_events);
    RUN(test_event_fields_and_verbatim_properties);
    RUN(test_properties_with_huge_numbers_are_sent_verbatim);
    RUN(test_nul_escape_accepted_and_oversize_properties_refused_at_the_door);
    RUN(test_defaults_are_the_seeds_numbers);
    RUN(test_threshold_flush);
    RUN(test_timer_flush);
    RUN(test_batch_size_follows_the_network_type);
    RUN(test_oldest_dropped_past_the_count_limit);
    RUN(test_oldest_dropped_past_the_byte_limit);
    RUN(test_default_limits_are_10000_events_and_5_mb);
    RUN(test_oversize_event_is_refused_and_the_queue_still_works);

    curl_global_cleanup();
    return check_summary();
}
