/* The seed's Retry Policy and Error Handling, the Circuit Breaker, and one
 * rejected event among good ones. Fixtures and the story rules:
 * events_support.h. */
#include "events_support.h"

/* ---- Retry Policy and Error Handling -------------------------------------------- */

static void test_server_errors_retried_three_times_then_kept(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    /* 100 ms base: retries after 100, 200 and 400 ms (+/- 20 %). */
    CHECK_STATUS(appnorth_events_options_set_retry(o, 100, 3, 120000, 5, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);
    track_ok(e, "e", NULL);
    add_fault("{\"status\":500,\"count\":4,\"path_prefix\":\"" EVENTS_PATH "\"}");

    int64_t start = mono_ms();
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_SERVER, err);
    int64_t elapsed = mono_ms() - start;
    CHECK(err.http_status == 500, "HTTP 500: %d", err.http_status);
    json_t *posts = event_posts();
    CHECK(json_array_size(posts) == 4, "one attempt and three retries: %zu POSTs", json_array_size(posts));
    if (json_array_size(posts) == 4) {
        const int nominal[] = {100, 200, 400};
        for (int i = 0; i < 3; i++) {
            json_int_t a = json_integer_value(json_object_get(json_array_get(posts, (size_t)i), "time_ms"));
            json_int_t b = json_integer_value(json_object_get(json_array_get(posts, (size_t)i + 1), "time_ms"));
            CHECK(b - a >= nominal[i] * 8 / 10 - 2 && b - a <= nominal[i] * 12 / 10 + 1000,
                  "retry %d after %lld ms, nominal %d", i + 1, (long long)(b - a), nominal[i]);
        }
    }
    json_decref(posts);
    CHECK(elapsed >= 560, "flush waited for the backoff: %lld ms", (long long)elapsed);
    CHECK(queued(e) == 1 && disk_rows(dir) == 1, "5xx keeps the event: %ld", queued(e));
    CHECK(server_event_count() == 0, "nothing stored yet");
    json_t *s = stats(e);
    json_t *last = json_object_get(s, "last_error");
    CHECK(json_is_object(last) && json_integer_value(json_object_get(last, "http_status")) == 500,
          "stats last_error has HTTP 500");
    CHECK(json_is_integer(json_object_get(s, "last_attempt_ms")), "last_attempt_ms set");
    json_decref(s);

    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 1, "delivered on the next flush: %zu", server_event_count());
    CHECK(event_post_count() == 5, "5 POSTs in all: %zu", event_post_count());
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "queue empty");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_network_errors_keep_the_events(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    track_ok(e, "offline", NULL);
    go_offline();
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_NETWORK, err);
    CHECK(err.http_status == 0, "no HTTP status: %d", err.http_status);
    CHECK(strlen(err.message) > 0, "a message");
    CHECK(queued(e) == 1 && disk_rows(dir) == 1, "network errors keep the event: %ld", queued(e));
    CHECK(stat_int(e, "dropped", "client_error") == 0, "nothing discarded");
    clear_faults();
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 1, "delivered after reconnecting: %zu", server_event_count());
    CHECK(stat_int(e, "breaker", "consecutive_failures") == 0, "a success resets the failure count: %ld",
          stat_int(e, "breaker", "consecutive_failures"));

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_client_errors_discard_the_batch(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    /* A 400 naming no event: the batch goes in halves, down to single
       events (issue 24); refused all the way down, all 3 are discarded:
       [3], [1], [2], then [1], [1] - 5 POSTs, none retried. */
    for (int i = 0; i < 3; i++) track_ok(e, "bad batch", NULL);
    add_fault("{\"status\":400,\"count\":5,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_VALIDATION, err);
    CHECK(err.http_status == 400, "HTTP 400: %d", err.http_status);
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "4xx discards the batch: %ld queued", queued(e));
    CHECK(event_post_count() == 5, "no retry after a 4xx, only halves: %zu POSTs", event_post_count());
    CHECK(stat_int(e, "dropped", "client_error") == 3, "3 counted as client_error: %ld",
          stat_int(e, "dropped", "client_error"));
    CHECK(stat_int(e, "breaker", "consecutive_failures") == 1, "a 4xx counts as a failure: %ld",
          stat_int(e, "breaker", "consecutive_failures"));

    /* Any other 4xx too (404 here); the queue keeps working afterwards. */
    track_ok(e, "lost", NULL);
    add_fault("{\"status\":404,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK(queued(e) == 0, "404 discards too");
    CHECK(stat_int(e, "dropped", "client_error") == 4, "4 client_error drops");
    track_ok(e, "after", NULL);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 1 && server_events_named("after") == 1, "only 'after' stored: %zu",
          server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_408_and_429_are_kept_and_retried(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    track_ok(e, "e", NULL);
    add_fault("{\"status\":408,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    add_fault("{\"status\":429,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 1, "delivered on the 3rd attempt: %zu", server_event_count());
    json_t *posts = event_posts();
    CHECK(json_array_size(posts) == 3, "3 POSTs: %zu", json_array_size(posts));
    long statuses[3] = {0, 0, 0};
    for (size_t i = 0; i < 3 && i < json_array_size(posts); i++)
        statuses[i] = (long)json_integer_value(json_object_get(json_array_get(posts, i), "status"));
    CHECK(statuses[0] == 408 && statuses[1] == 429 && statuses[2] == 200, "statuses %ld %ld %ld", statuses[0],
          statuses[1], statuses[2]);
    json_decref(posts);
    CHECK(stat_int(e, "dropped", "client_error") == 0, "408/429 are not discarded");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* The gap between the first two logged event POSTs, in ms (-1 if fewer). */
static long first_retry_gap(void) {
    json_t *posts = event_posts();
    long gap = -1;
    if (json_array_size(posts) >= 2)
        gap = (long)(json_integer_value(json_object_get(json_array_get(posts, 1), "time_ms")) -
                     json_integer_value(json_object_get(json_array_get(posts, 0), "time_ms")));
    json_decref(posts);
    return gap;
}

static void test_429_honours_retry_after(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;

    /* Seconds. */
    track_ok(e, "seconds", NULL);
    add_fault("{\"status\":429,\"count\":1,\"retry_after\":\"1\",\"path_prefix\":\"" EVENTS_PATH "\"}");
    int64_t start = mono_ms();
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    int64_t elapsed = mono_ms() - start;
    CHECK(elapsed >= 950, "waited for Retry-After: 1, not the 10 ms base: %lld ms", (long long)elapsed);
    CHECK(first_retry_gap() >= 950, "the retry came %ld ms after the 429", first_retry_gap());
    CHECK(server_event_count() == 1, "delivered: %zu", server_event_count());

    /* An HTTP date, 2 s ahead (whole seconds: the wait is 1-2 s). */
    admin_request(server, "DELETE", "/admin/requests", NULL, NULL);
    track_ok(e, "date", NULL);
    time_t when = (time_t)(wall_ms() / 1000) + 2; /* the clock the library reads */
    struct tm tm;
    gmtime_r(&when, &tm);
    static const char *days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"status\":429,\"count\":1,\"retry_after\":\"%s, %02d %s %04d %02d:%02d:%02d GMT\","
             "\"path_prefix\":\"" EVENTS_PATH "\"}",
             days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    add_fault(spec);
    CHECK_STATUS(flush(e, 30000, &err), APPNORTH_OK, err);
    long gap = first_retry_gap();
    CHECK(gap >= 900, "waited until the HTTP date: %ld ms", gap);
    CHECK(server_event_count() == 2, "delivered: %zu", server_event_count());
    appnorth_events_free(e);

    /* Capped by retry_after_cap_ms (300 ms here instead of 60 s). */
    admin_request(server, "DELETE", "/admin/requests", NULL, NULL);
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_retry(o, 10, 3, 300, 5, &err), APPNORTH_OK, err);
    e = open_events(o);
    track_ok(e, "capped", NULL);
    add_fault("{\"status\":429,\"count\":1,\"retry_after\":\"60\",\"path_prefix\":\"" EVENTS_PATH "\"}");
    /* Retry-After: 60 would outlast the flush's 30 s: only the cap lets it deliver. */
    start = mono_ms();
    CHECK_STATUS(flush(e, 30000, &err), APPNORTH_OK, err);
    elapsed = mono_ms() - start;
    CHECK(elapsed >= 250, "Retry-After capped at 300 ms, not the 10 ms base: %lld ms", (long long)elapsed);
    CHECK(server_event_count() == 3, "delivered: %zu", server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_413_splits_the_batch_and_drops_a_single_oversize_event(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    char *small = padded_props('p', 700), *big = padded_props('h', 3000);
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "small%d", i);
        track_ok(e, name, small);
    }
    track_ok(e, "huge", big);
    free(small);
    free(big);
    long status = admin_request(server, "POST", "/admin/settings", "{\"events_max_body\":2500}", NULL);
    CHECK(status == 200, "settings: HTTP %ld", status);

    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    int all = json_array_size(events) == 4;
    for (int i = 0; i < 4; i++) {
        char name[16];
        snprintf(name, sizeof name, "small%d", i);
        all = all && server_events_named(name) == 1;
    }
    CHECK(all, "the 4 small events arrive once each: %zu stored", json_array_size(events));
    CHECK(server_events_named("huge") == 0, "the huge one is not stored");
    json_decref(events);
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "queue empty: %ld", queued(e));
    CHECK(stat_int(e, "dropped", "payload_too_large") == 1, "payload_too_large 1: %ld",
          stat_int(e, "dropped", "payload_too_large"));
    CHECK(stat_int(e, "dropped", "client_error") == 0, "no client_error drops");
    json_t *posts = event_posts();
    size_t i, refused = 0;
    json_t *p;
    json_array_foreach(posts, i, p) if (json_integer_value(json_object_get(p, "status")) == 413) refused++;
    CHECK(refused >= 2, "the server refused the big batches (%zu 413s of %zu POSTs)", refused, json_array_size(posts));
    json_decref(posts);

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Circuit Breaker ------------------------------------------------------------ */

static void test_circuit_breaker_trips_at_the_5th_failure_until_a_new_session(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    track_ok(e, "e", NULL);
    add_fault("{\"status\":503,\"count\":100,\"path_prefix\":\"" EVENTS_PATH "\"}");

    /* The default 3 retries (10/20/40 ms here): a failed flush is 4 POSTs
     * but one failure, as the seed counts failed flushes. */
    for (int f = 1; f <= 4; f++) {
        CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_SERVER, err);
        CHECK(stat_int(e, "breaker", "consecutive_failures") == f && !breaker_open(e),
              "flush %d: %ld failures, still closed", f, stat_int(e, "breaker", "consecutive_failures"));
    }
    CHECK(event_post_count() == 16, "4 failed flushes of 4 POSTs: %zu", event_post_count());
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_WRONG_STATE, err); /* the 5th failed flush trips it */
    CHECK(strlen(err.message) > 0, "message: %s", err.message);
    CHECK(event_post_count() == 20, "exactly 20 POSTs: %zu", event_post_count());
    CHECK(breaker_open(e), "stats: breaker open");
    CHECK(stat_int(e, "breaker", "consecutive_failures") == 5, "5 failures: %ld",
          stat_int(e, "breaker", "consecutive_failures"));

    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_WRONG_STATE, err);
    track_ok(e, "while paused", NULL); /* tracking still works */
    sleep_ms(100);
    CHECK(event_post_count() == 20, "paused: no more uploads: %zu", event_post_count());
    CHECK(queued(e) == 2, "events kept while paused: %ld", queued(e));

    clear_faults();
    CHECK(event_post_count() == 20, "still paused after the server recovers");
    CHECK_STATUS(appnorth_events_start_session(e, &err), APPNORTH_OK, err);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 2, "a new session resumes uploads: %zu stored", server_event_count());
    CHECK(!breaker_open(e) && stat_int(e, "breaker", "consecutive_failures") == 0, "breaker reset");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_foreground_resumes_uploads(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_retry(o, 10, 0, 120000, 1, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);
    track_ok(e, "e", NULL);
    add_fault("{\"status\":500,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_WRONG_STATE, err); /* threshold 1: tripped */
    CHECK(breaker_open(e), "breaker open");
    CHECK(event_post_count() == 1, "one POST: %zu", event_post_count());

    CHECK_STATUS(appnorth_events_foreground(e, &err), APPNORTH_OK, err);
    /* No flush call: foreground resumes and starts one by itself. */
    CHECK(eventually_server_holds(1), "foreground resumed and flushed: %zu", server_event_count());
    CHECK(!breaker_open(e), "breaker closed");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_one_success_resets_the_failure_count(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir); /* the default 3 retries */
    appnorth_error err;
    for (int round = 0; round < 2; round++) {
        track_ok(e, round ? "second" : "first", NULL);
        add_fault("{\"status\":500,\"count\":16,\"path_prefix\":\"" EVENTS_PATH "\"}");
        for (int i = 0; i < 4; i++) {
            /* A single failure never pauses; neither do four. */
            CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_SERVER, err);
        }
        CHECK(stat_int(e, "breaker", "consecutive_failures") == 4, "round %d: 4 failures", round);
        CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
        CHECK(stat_int(e, "breaker", "consecutive_failures") == 0, "round %d: reset by a success", round);
    }
    CHECK(server_event_count() == 2, "both delivered: %zu", server_event_count());
    CHECK(event_post_count() == 34, "2 x (4 failed flushes of 4 POSTs + 1): %zu", event_post_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_dropped_4xx_batches_count_toward_the_breaker(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir); /* the default 3 retries */
    appnorth_error err;
    /* 400, 500, 400, 500: four failed flushes of both kinds in a row. After
       a 500 the kept event and the new one make a batch of 2, which a 400
       naming no event refuses in 3 POSTs (the batch, then each half). */
    for (int i = 0; i < 4; i++) {
        track_ok(e, "e", NULL);
        add_fault(i % 2 ? "{\"status\":500,\"count\":4,\"path_prefix\":\"" EVENTS_PATH "\"}"
                  : i == 0 ? "{\"status\":400,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}"
                           : "{\"status\":400,\"count\":3,\"path_prefix\":\"" EVENTS_PATH "\"}");
        CHECK_STATUS(flush(e, 5000, &err), i % 2 ? APPNORTH_E_SERVER : APPNORTH_E_VALIDATION, err);
    }
    CHECK(stat_int(e, "breaker", "consecutive_failures") == 4, "4 failures: %ld",
          stat_int(e, "breaker", "consecutive_failures"));
    add_fault("{\"status\":400,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_WRONG_STATE, err); /* the 5th, a 4xx, trips it */
    CHECK(breaker_open(e), "breaker open");
    CHECK(event_post_count() == 13, "1 + 4 + 3 + 4 + 1 POSTs: %zu", event_post_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- One bad event (docs/protocol.md, "Rejected events") ------------------------ */

static void set_rejected_names(const char *json_list) {
    char body[256];
    snprintf(body, sizeof body, "{\"rejected_event_names\":%s}", json_list);
    long status = admin_request(server, "POST", "/admin/settings", body, NULL);
    CHECK(status == 200, "settings: HTTP %ld", status);
}

static void test_one_rejected_event_leaves_its_batch_mates_delivered(void) {
    admin_reset(server);
    set_rejected_names("[\"legacy_tap\"]");
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof name, "good%d", i);
        track_ok(e, i == 7 ? "legacy_tap" : name, NULL);
    }
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 19, "the 19 valid events stored: %zu", server_event_count());
    CHECK(server_events_named("legacy_tap") == 0 && server_events_named("good19") == 1, "only the bad one missing");
    CHECK(event_post_count() == 2, "the 422, then the rest at once: %zu POSTs", event_post_count());
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "nothing left queued: %ld", queued(e));
    CHECK(stat_int(e, "dropped", "client_error") == 1, "1 client_error: %ld", stat_int(e, "dropped", "client_error"));
    CHECK(stat_int(e, "breaker", "consecutive_failures") == 0, "a delivered flush is no failure");

    /* A 400 without a list names no event: the batch goes in halves (issue
       24), and here the halves are accepted: nothing good is lost. */
    for (int i = 0; i < 3; i++) track_ok(e, "unlisted", NULL);
    add_fault("{\"status\":400,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(queued(e) == 0 && server_events_named("unlisted") == 3, "the halves delivered");
    CHECK(stat_int(e, "dropped", "client_error") == 1, "still 1 client_error: %ld", stat_int(e, "dropped", "client_error"));

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    if (!events_suite_start("test_events_retry")) return 2;

    RUN(test_server_errors_retried_three_times_then_kept);
    RUN(test_network_errors_keep_the_events);
    RUN(test_client_errors_discard_the_batch);
    RUN(test_408_and_429_are_kept_and_retried);
    RUN(test_429_honours_retry_after);
    RUN(test_413_splits_the_batch_and_drops_a_single_oversize_event);
    RUN(test_circuit_breaker_trips_at_the_5th_failure_until_a_new_session);
    RUN(test_foreground_resumes_uploads);
    RUN(test_one_success_resets_the_failure_count);
    RUN(test_dropped_4xx_batches_count_toward_the_breaker);
    RUN(test_one_rejected_event_leaves_its_batch_mates_delivered);

    curl_global_cleanup();
    return check_summary();
}
