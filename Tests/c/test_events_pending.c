/* appnorth_events_pending through the real libappnorth.so, against the
 * local server: the queued events after an offline burst, oldest first and
 * byte for byte as a batch body carries them (the server then stores
 * exactly those ids); two handles on one directory; bad arguments. */
#include "events_support.h"

/* The pending events as a parsed JSON array (new ref). */
static json_t *pending(appnorth_events *e, int32_t max) {
    char *text = NULL;
    appnorth_error err;
    CHECK_STATUS(appnorth_events_pending(e, max, &text, &err), APPNORTH_OK, err);
    json_error_t jerr;
    json_t *array = text ? json_loads(text, 0, &jerr) : NULL;
    CHECK(json_is_array(array), "pending is a JSON array: %s", text ? text : "(null)");
    appnorth_string_free(text);
    return array ? array : json_array();
}

static void test_pending_after_an_offline_burst(void) {
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    json_t *none = pending(e, 10);
    CHECK(json_array_size(none) == 0, "nothing queued: []");
    json_decref(none);
    go_offline();
    char props[64];
    for (int i = 0; i < 25; i++) {
        snprintf(props, sizeof props, "{\"i\":%d,\"price\":9.99}", i);
        track_ok(e, "burst", props);
    }
    appnorth_error err;
    CHECK(flush(e, 5000, &err) != APPNORTH_OK, "offline: the flush fails");
    /* The read-back, byte for byte: the host's own number text. */
    char *text = NULL;
    CHECK_STATUS(appnorth_events_pending(e, 1000, &text, &err), APPNORTH_OK, err);
    CHECK(text && strstr(text, "\"price\":9.99") && text[0] == '[', "the host's text: %.80s", text ? text : "");
    appnorth_string_free(text);
    json_t *all = pending(e, 1000);
    CHECK(json_array_size(all) == 25, "25 pending: %zu", json_array_size(all));
    int ordered = 1;
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *event = json_array_get(all, i);
        ordered &= json_integer_value(json_object_get(json_object_get(event, "properties"), "i")) == (json_int_t)i;
        ordered &= str_eq(str_of(event, "name"), "burst") && str_of(event, "id") != NULL;
    }
    CHECK(ordered, "oldest first, names and ids");
    json_t *two = pending(e, 2);
    CHECK(json_array_size(two) == 2 && json_equal(json_array_get(two, 1), json_array_get(all, 1)), "max takes the oldest");
    json_decref(two);

    /* Back online: the server stores exactly the pending ids. */
    clear_faults();
    CHECK_STATUS(flush(e, 10000, &err), APPNORTH_OK, err);
    CHECK(eventually_server_holds(25), "the server holds 25");
    json_t *stored = server_events();
    size_t matched = 0;
    for (size_t i = 0; i < json_array_size(all); i++)
        for (size_t j = 0; j < json_array_size(stored); j++)
            if (str_eq(str_of(json_array_get(all, i), "id"), str_of(json_array_get(stored, j), "id"))) matched++;
    CHECK(matched == 25, "every pending id reached the server once: %zu", matched);
    json_t *after = pending(e, 1000);
    CHECK(json_array_size(after) == 0, "delivered: nothing pending");
    json_decref(after), json_decref(stored), json_decref(all);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_two_handles_and_a_reopen(void) {
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *a = open_quiet(c, dir);
    appnorth_events *b = open_quiet(c, dir);
    track_ok(a, "from_a", NULL);
    track_ok(b, "from_b", NULL);
    /* Each call imports its own handle's journal: b's event is seen by a
     * once b has imported it. */
    json_t *seen_by_b = pending(b, 10);
    json_t *seen_by_a = pending(a, 10);
    CHECK(json_array_size(seen_by_b) >= 1 && json_array_size(seen_by_a) == 2, "a sees both after b's import: %zu, %zu",
          json_array_size(seen_by_b), json_array_size(seen_by_a));
    json_decref(seen_by_b), json_decref(seen_by_a);
    appnorth_events_free(a);
    appnorth_events_free(b);
    appnorth_events *again = open_quiet(c, dir);
    json_t *kept = pending(again, 10);
    CHECK(json_array_size(kept) == 2, "a reopened queue still holds both: %zu", json_array_size(kept));
    json_decref(kept);
    appnorth_events_free(again);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_bad_arguments(void) {
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    char *text = (char *)"untouched";
    CHECK_STATUS(appnorth_events_pending(NULL, 10, &text, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(text == NULL, "NULL on failure");
    CHECK_STATUS(appnorth_events_pending(e, 0, &text, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(strstr(err.message, "max") != NULL, "names max: %s", err.message);
    CHECK_STATUS(appnorth_events_pending(e, -1, &text, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_pending(e, INT32_MIN, &text, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_pending(e, 10, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_pending(e, INT32_MAX, &text, &err), APPNORTH_OK, err);
    CHECK(text && strcmp(text, "[]") == 0, "huge max: all of nothing");
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_events_close(e, 1000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_pending(e, 10, &text, &err), APPNORTH_E_WRONG_STATE, err);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    if (!events_suite_start("test_events_pending")) return 2;
    RUN(test_pending_after_an_offline_burst);
    RUN(test_two_handles_and_a_reopen);
    RUN(test_bad_arguments);
    curl_global_cleanup();
    return check_summary();
}
