/* The events features of issue 40 through the real .so, observed at the
 * dev server: automatic sessions on a manual clock; super properties
 * across handles and restarts; the before_send hook. */
#include "events_support.h"

#define FAPP "tfeatures"

static char *session_of(appnorth_events *e) {
    appnorth_error err;
    char *id = NULL;
    CHECK_STATUS(appnorth_events_session_id(e, &id, &err), APPNORTH_OK, err);
    CHECK(id && strlen(id) == 32, "a session id of 32 characters: %s", id ? id : "(null)");
    return id;
}

/* The session id each stored event named `name` carries, in order, joined by ','. */
static void sessions_named(json_t *events, const char *name, char *out, size_t size) {
    size_t i, used = 0;
    json_t *e;
    out[0] = '\0';
    json_array_foreach(events, i, e) {
        if (!str_eq(str_of(e, "name"), name)) continue;
        const char *s = str_of(e, "session_id");
        used += (size_t)snprintf(out + used, size - used, "%s%s", used ? "," : "", s ? s : "?");
        if (used >= size) return;
    }
}

static void test_sessions_rotate_after_the_idle_timeout_and_the_max_length(void) {
    admin_reset(server);
    char *dir = make_temp_dir("features");
    appnorth_client *c = make_client_for(FAPP, NULL, NULL);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(1700000000000LL, &clock, &err), APPNORTH_OK, err);
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_session_policy(o, 1000, 5000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_clock(o, clock, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    char *first = session_of(e);
    track_ok(e, "a", NULL);
    CHECK_STATUS(appnorth_clock_advance(clock, 999, &err), APPNORTH_OK, err);
    track_ok(e, "b", NULL);
    CHECK_STATUS(appnorth_clock_advance(clock, 1000, &err), APPNORTH_OK, err);
    track_ok(e, "idle", NULL);
    char *second = session_of(e);
    CHECK(!str_eq(first, second), "1,000 ms without an event: a new session");
    for (int i = 0; i < 6; i++) {
        CHECK_STATUS(appnorth_clock_advance(clock, 900, &err), APPNORTH_OK, err);
        track_ok(e, "busy", NULL);
    }
    char *third = session_of(e);
    CHECK(!str_eq(second, third), "5,000 ms since the session began: a new one, though never idle");
    CHECK_STATUS(flush(e, 10000, &err), APPNORTH_OK, err);

    json_t *events = server_events_of(FAPP);
    char got[1024], want[1024];
    sessions_named(events, "a", got, sizeof got);
    CHECK(str_eq(got, first), "a: %s", got);
    sessions_named(events, "b", got, sizeof got);
    CHECK(str_eq(got, first), "b, 999 ms later: %s", got);
    sessions_named(events, "idle", got, sizeof got);
    CHECK(str_eq(got, second), "idle: %s", got);
    snprintf(want, sizeof want, "%s,%s,%s,%s,%s,%s", second, second, second, second, second, third);
    sessions_named(events, "busy", got, sizeof got);
    CHECK(str_eq(got, want), "busy: %s, want %s", got, want);
    json_decref(events);

    CHECK_STATUS(appnorth_events_start_session(e, &err), APPNORTH_OK, err);
    char *fourth = session_of(e);
    CHECK(!str_eq(third, fourth), "start_session: a new session");
    appnorth_string_free(first), appnorth_string_free(second), appnorth_string_free(third), appnorth_string_free(fourth);
    appnorth_events_free(e);
    appnorth_clock_free(clock);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_session_bad_input(void) {
    appnorth_error err;
    char *out = (char *)1;
    CHECK(appnorth_events_session_id(NULL, &out, &err) == APPNORTH_E_INVALID_ARGUMENT && out == NULL,
          "session_id NULL: %s", err.message);
    CHECK(appnorth_events_options_set_session_policy(NULL, 0, 0, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL options");
    CHECK(appnorth_events_options_set_clock(NULL, NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL options");
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK(appnorth_events_options_set_session_policy(o, -1, 0, &err) == APPNORTH_E_INVALID_ARGUMENT &&
              strstr(err.message, "idle_timeout_ms") != NULL, "negative idle: %s", err.message);
    CHECK(appnorth_events_options_set_session_policy(o, 0, -1, &err) == APPNORTH_E_INVALID_ARGUMENT &&
              strstr(err.message, "max_length_ms") != NULL, "negative max: %s", err.message);
    CHECK_STATUS(appnorth_events_options_set_session_policy(o, 0, 0, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_clock(o, NULL, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);

    char *dir = make_temp_dir("features");
    appnorth_client *c = make_client_for(FAPP, NULL, NULL);
    appnorth_events *e = open_quiet(c, dir);
    CHECK(appnorth_events_session_id(e, NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL out_id: %s", err.message);
    CHECK_STATUS(appnorth_events_close(e, 0, &err), APPNORTH_OK, err);
    out = (char *)1;
    CHECK(appnorth_events_session_id(e, &out, &err) == APPNORTH_E_WRONG_STATE && out == NULL, "closed: %s", err.message);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}


/* The properties text the server stored for the event named `name` (its last). */
static char *stored_properties(const char *name) {
    json_t *events = server_events_of(FAPP);
    size_t i;
    json_t *e;
    char *out = NULL;
    json_array_foreach(events, i, e) {
        if (str_eq(str_of(e, "name"), name)) {
            free(out);
            const char *raw = str_of(e, "properties_raw");
            out = strdup(raw ? raw : "(none)");
        }
    }
    json_decref(events);
    return out ? out : strdup("(missing)");
}

static void expect_properties(const char *name, const char *want) {
    char *got = stored_properties(name);
    CHECK(str_eq(got, want), "%s: properties %s, want %s", name, got, want);
    free(got);
}

static void register_ok(appnorth_events *e, const char *json, int once) {
    appnorth_error err;
    CHECK_STATUS(once ? appnorth_events_register_once(e, json, &err) : appnorth_events_register(e, json, &err),
                 APPNORTH_OK, err);
}

static void test_super_properties_reach_every_handle_and_survive_a_restart(void) {
    admin_reset(server);
    char *dir = make_temp_dir("features");
    appnorth_client *c = make_client_for(FAPP, NULL, NULL);
    appnorth_error err;
    appnorth_events *a = open_quiet(c, dir), *b = open_quiet(c, dir);
    register_ok(a, "{\"plan\":\"pro\", \"build\": 1.50}", 0);
    track_ok(b, "from_b", "{\"screen\":\"home\"}");
    track_ok(a, "override", "{\"plan\":\"free\"}");
    register_ok(b, "{\"plan\":\"team\",\"first_seen\":\"mon\"}", 1);
    track_ok(a, "once", NULL);
    register_ok(a, "{\"first_seen\":\"tue\"}", 1);
    CHECK_STATUS(appnorth_events_unregister(b, "build", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_unregister(b, "never_set", &err), APPNORTH_OK, err);
    track_ok(a, "after_unregister", "{}");
    char *text = NULL;
    CHECK_STATUS(appnorth_events_super_properties(b, &text, &err), APPNORTH_OK, err);
    CHECK(str_eq(text, "{\"plan\":\"pro\",\"first_seen\":\"mon\"}"), "read back: %s", text);
    appnorth_string_free(text);
    CHECK_STATUS(flush(a, 10000, &err), APPNORTH_OK, err);
    CHECK_STATUS(flush(b, 10000, &err), APPNORTH_OK, err);
    appnorth_events_free(a);
    appnorth_events_free(b);

    a = open_quiet(c, dir); /* a restart */
    track_ok(a, "after_restart", "{\"n\":1}");
    CHECK_STATUS(appnorth_events_reset(a, &err), APPNORTH_OK, err);
    track_ok(a, "after_reset", "{\"n\":2}");
    CHECK_STATUS(flush(a, 10000, &err), APPNORTH_OK, err);
    expect_properties("from_b", "{\"plan\":\"pro\",\"build\":1.50,\"screen\":\"home\"}");
    expect_properties("override", "{\"build\":1.50,\"plan\":\"free\"}");
    expect_properties("once", "{\"plan\":\"pro\",\"build\":1.50,\"first_seen\":\"mon\"}");
    expect_properties("after_unregister", "{\"plan\":\"pro\",\"first_seen\":\"mon\"}");
    expect_properties("after_restart", "{\"plan\":\"pro\",\"first_seen\":\"mon\",\"n\":1}");
    expect_properties("after_reset", "{\"n\":2}");
    CHECK(!path_exists(dir, "super_properties.json"), "reset removed the file");
    appnorth_events_free(a);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void expect_register_refused(appnorth_events *e, const char *json, int32_t want, const char *what) {
    appnorth_error err;
    int32_t rc = appnorth_events_register(e, json, &err);
    CHECK(rc == want && strlen(err.message) > 0, "%s: got %d (%s), want %d", what, rc, err.message, want);
}

static void test_super_properties_bad_input_and_the_size_limit(void) {
    admin_reset(server);
    char *dir = make_temp_dir("features");
    appnorth_client *c = make_client_for(FAPP, NULL, NULL);
    appnorth_error err;
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_limits(o, 10000, 5 << 20, 1024, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);
    CHECK(appnorth_events_register(NULL, "{}", &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL events");
    expect_register_refused(e, NULL, APPNORTH_E_INVALID_ARGUMENT, "NULL json");
    CHECK(appnorth_events_unregister(e, NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL key");
    char *out = (char *)1;
    CHECK(appnorth_events_super_properties(e, NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL out");
    expect_register_refused(e, "[1]", APPNORTH_E_INVALID_JSON, "an array");
    expect_register_refused(e, "{\"a\":", APPNORTH_E_INVALID_JSON, "cut JSON");
    expect_register_refused(e, "{\"a\":\"\xff\"}", APPNORTH_E_INVALID_UTF8, "invalid UTF-8");
    expect_register_refused(e, "{\"ok\":1,\"session_id\":\"x\"}", APPNORTH_E_INVALID_ARGUMENT, "a reserved key");
    char big[700];
    snprintf(big, sizeof big, "{\"big\":\"%0*d\"}", 600, 0);
    expect_register_refused(e, big, APPNORTH_E_TOO_LARGE, "over half of max_event_bytes");
    CHECK_STATUS(appnorth_events_super_properties(e, &out, &err), APPNORTH_OK, err);
    CHECK(str_eq(out, "{}"), "nothing was saved: %s", out);
    appnorth_string_free(out);

    /* 400 bytes registered, then an event whose own properties fit alone but not with them. */
    char half[500];
    snprintf(half, sizeof half, "{\"s\":\"%0*d\"}", 400, 0);
    register_ok(e, half, 0);
    char props[700];
    snprintf(props, sizeof props, "{\"p\":\"%0*d\"}", 600, 0);
    int32_t q = -1;
    int32_t rc = appnorth_events_track(e, "too_big_with_supers", props, &q, &err);
    CHECK(rc == APPNORTH_E_TOO_LARGE && q == 0, "the super properties count toward the limit: %d %s", rc, err.message);
    track_ok(e, "fits", "{\"p\":1}");
    CHECK(queued(e) == 1, "one event queued: %ld", queued(e));
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- before_send ------------------------------------------------------------ */

typedef struct {
    int calls;
    int released;
    char first[2048];
} hook_state;

/* Keeps "kept", drops "secret", rewrites "scrub" (its properties become
 * {"scrubbed":true}), fails on "boom" (status 7, with a reason) and gives
 * an invalid replacement for "bad" (the id changed). */
static int32_t hook(void *user_data, const char *event_json, appnorth_buffer *replacement) {
    hook_state *st = user_data;
    if (st->calls++ == 0) snprintf(st->first, sizeof st->first, "%s", event_json);
    json_error_t jerr;
    json_t *event = json_loads(event_json, 0, &jerr);
    const char *name = event ? json_string_value(json_object_get(event, "name")) : NULL;
    int32_t rc = APPNORTH_BEFORE_SEND_KEEP;
    if (str_eq(name, "secret")) rc = APPNORTH_BEFORE_SEND_DROP;
    if (str_eq(name, "boom")) {
        appnorth_buffer_set(replacement, "the filter crashed", 18, NULL);
        rc = 7;
    }
    if (str_eq(name, "scrub") || str_eq(name, "bad")) {
        json_object_set_new(event, "properties", json_pack("{s:b}", "scrubbed", 1));
        if (str_eq(name, "bad")) json_object_set_new(event, "id", json_string("not-the-id"));
        char *text = json_dumps(event, JSON_COMPACT);
        appnorth_buffer_set(replacement, text, strlen(text), NULL);
        free(text);
        rc = APPNORTH_BEFORE_SEND_REPLACE;
    }
    json_decref(event);
    return rc;
}

static void release_hook(void *user_data) { ((hook_state *)user_data)->released++; }

static void test_before_send_keeps_drops_rewrites_and_fails_closed(void) {
    admin_reset(server);
    char *dir = make_temp_dir("features");
    appnorth_client *c = make_client_for(FAPP, NULL, NULL);
    appnorth_error err;
    hook_state st = {0, 0, {0}};
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_before_send(o, hook, &st, release_hook, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);
    register_ok(e, "{\"plan\":\"pro\"}", 0);
    int32_t queued = -1;
    track_ok(e, "kept", "{\"n\": 1.50}");
    CHECK_STATUS(appnorth_events_track(e, "secret", "{}", &queued, &err), APPNORTH_OK, err);
    CHECK(queued == 0, "a dropped event is not queued");
    track_ok(e, "scrub", "{\"email\":\"a@b.c\"}");
    CHECK_STATUS(appnorth_events_track(e, "boom", NULL, &queued, &err), APPNORTH_OK, err);
    CHECK(queued == 0, "a failing hook drops the event");
    CHECK_STATUS(appnorth_events_track(e, "bad", NULL, &queued, &err), APPNORTH_OK, err);
    CHECK(queued == 0, "an invalid replacement drops the event");
    CHECK(st.calls == 5, "the hook saw every event: %d", st.calls);
    json_error_t jerr;
    json_t *first = json_loads(st.first, 0, &jerr);
    CHECK(first && str_eq(str_of(first, "name"), "kept") && str_of(first, "session_id") && str_of(first, "anonymous_id") &&
              json_is_integer(json_object_get(first, "timestamp")) && strstr(st.first, "{\"plan\":\"pro\",\"n\": 1.50}"),
          "the hook saw the assembled event, super properties merged: %s", st.first);
    json_decref(first);
    CHECK(stat_int(e, "dropped", "filtered") == 3, "dropped.filtered: %ld", stat_int(e, "dropped", "filtered"));
    CHECK_STATUS(flush(e, 10000, &err), APPNORTH_OK, err);
    expect_properties("kept", "{\"plan\":\"pro\",\"n\": 1.50}");
    expect_properties("scrub", "{\"scrubbed\":true}");
    json_t *events = server_events_of(FAPP);
    CHECK(json_array_size(events) == 2, "only kept and scrub reached the server: %zu", json_array_size(events));
    json_decref(events);
    CHECK(st.released == 0, "not released while the handle lives");
    appnorth_events_free(e);
    CHECK(st.released == 1, "released once with the handle: %d", st.released);
    CHECK(appnorth_events_options_set_before_send(NULL, hook, NULL, NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL options");
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    if (!events_suite_start("test_events_features")) return 2;
    RUN(test_sessions_rotate_after_the_idle_timeout_and_the_max_length);
    RUN(test_session_bad_input);
    RUN(test_super_properties_reach_every_handle_and_survive_a_restart);
    RUN(test_super_properties_bad_input_and_the_size_limit);
    RUN(test_before_send_keeps_drops_rewrites_and_fails_closed);
    curl_global_cleanup();
    return check_summary();
}
