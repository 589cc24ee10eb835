/* The events features of issue 40 through the real .so, observed at the
 * dev server: automatic sessions on a manual clock. */
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

int main(void) {
    if (!events_suite_start("test_events_features")) return 2;
    RUN(test_sessions_rotate_after_the_idle_timeout_and_the_max_length);
    RUN(test_session_bad_input);
    curl_global_cleanup();
    return check_summary();
}
