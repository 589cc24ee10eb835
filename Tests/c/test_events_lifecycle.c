/* Crashes, close and free, and eight threads tracking while flushes and
 * consent changes run. Fixtures and the story rules: events_support.h. */
#include "events_support.h"

/* ---- Crash, close ------------------------------------------------------------ */

static void test_a_resend_after_a_crash_is_deduplicated(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    for (int i = 0; i < 3; i++) track_ok(e, "once", NULL);
    /* A previous process sent these, got its 2xx, and died before deleting
     * them: post the stored rows ourselves. */
    int rows = 0;
    char *body = disk_payload_batch(dir, &rows);
    CHECK(rows == 3, "3 stored payloads: %d", rows);
    json_t *reply = NULL;
    long status = admin_request(server, "POST", EVENTS_PATH, body, &reply);
    CHECK(status == 200 && json_integer_value(json_object_get(reply, "accepted")) == 3,
          "the stored payloads are valid uploads: HTTP %ld", status);
    json_decref(reply);
    free(body);
    CHECK(server_event_count() == 3, "3 on the server");

    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 3, "still exactly 3 after the resend: %zu", server_event_count());
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "queue empty");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_close_flushes_within_its_bound(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    for (int i = 0; i < 3; i++) track_ok(e, "closing", NULL);
    CHECK_STATUS(appnorth_events_close(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 3, "close flushed: %zu", server_event_count());
    CHECK(disk_rows(dir) == 0, "nothing left on disk");

    /* Later calls: APPNORTH_E_WRONG_STATE. */
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "late", NULL, &q, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(q == 0 && disk_rows(dir) == 0, "nothing stored after close");
    CHECK_STATUS(flush(e, 1000, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_events_identify(e, "late-user", &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_events_start_session(e, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_events_foreground(e, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_events_set_network_type(e, APPNORTH_NETWORK_WIFI, &err), APPNORTH_E_WRONG_STATE, err);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_close_is_bounded_while_the_server_hangs(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = make_client_for(HANG_APP, NULL, NULL);
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    track_ok(e, "hang", NULL);
    add_fault("{\"delay_ms\":600000,\"count\":1,\"path_prefix\":\"/v1/apps/" HANG_APP "/events\"}");
    appnorth_events_close(e, 300, &err);
    /* Returned although the server never answers the upload before the release. */
    CHECK(admin_wait_held(server, 1), "close(300) returned while the server held the upload");
    CHECK(disk_rows(dir) == 1, "the unconfirmed event stays on disk: %d", disk_rows(dir));
    appnorth_events_free(e);
    admin_release(server);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_free_aborts_an_upload_in_progress(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = make_client_for(HANG_APP, NULL, NULL);
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    track_ok(e, "hang", NULL);
    add_fault("{\"delay_ms\":600000,\"count\":1,\"path_prefix\":\"/v1/apps/" HANG_APP "/events\"}");
    CHECK_STATUS(flush(e, 200, &err), APPNORTH_E_TIMEOUT, err);
    CHECK(admin_wait_held(server, 1), "flush(200) gave up while the server held the upload");
    appnorth_events_free(e);
    CHECK(admin_held(server) == 1, "free returned while the server still held the upload");
    CHECK(disk_rows(dir) == 1, "the event stays on disk: %d", disk_rows(dir));
    admin_release(server);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Threads ----------------------------------------------------------------- */

#define TRACKERS 8
#define PER_TRACKER 150

typedef struct {
    appnorth_events *events;
    int index;
    int failures;
} tracker;

static pthread_mutex_t trackers_mu = PTHREAD_MUTEX_INITIALIZER;
static int trackers_done;

static void *track_many(void *arg) {
    tracker *t = arg;
    for (int i = 0; i < PER_TRACKER; i++) {
        char name[32], props[32];
        snprintf(name, sizeof name, "t%d-%d", t->index, i);
        snprintf(props, sizeof props, "{\"i\":%d}", i);
        int32_t q = 0;
        if (appnorth_events_track(t->events, name, props, &q, NULL) != APPNORTH_OK || q != 1) t->failures++;
    }
    pthread_mutex_lock(&trackers_mu);
    trackers_done++;
    pthread_mutex_unlock(&trackers_mu);
    return NULL;
}

static int all_trackers_done(void) {
    pthread_mutex_lock(&trackers_mu);
    int done = trackers_done == TRACKERS;
    pthread_mutex_unlock(&trackers_mu);
    return done;
}

static void test_eight_threads_track_while_flushes_and_consent_changes_run(void) {
    if (skip_slow) {
        printf("skipped test_eight_threads_track_while_flushes_and_consent_changes_run (APPNORTH_TEST_SKIP_SLOW)\n");
        return;
    }
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, QUIET_INTERVAL_MS, 50, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);
    CHECK_STATUS(appnorth_events_set_network_type(e, APPNORTH_NETWORK_WIFI, &err), APPNORTH_OK, err);

    tracker trackers[TRACKERS];
    pthread_t threads[TRACKERS];
    trackers_done = 0;
    for (int t = 0; t < TRACKERS; t++) {
        trackers[t] = (tracker){e, t, 0};
        pthread_create(&threads[t], NULL, track_many, &trackers[t]);
    }
    /* Meanwhile: flushes and consent grants from this thread. */
    int loops = 0;
    while (!all_trackers_done()) {
        (void)appnorth_events_flush(e, 2000, NULL);
        CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);
        loops++;
    }
    for (int t = 0; t < TRACKERS; t++) pthread_join(threads[t], NULL);
    int failures = 0;
    for (int t = 0; t < TRACKERS; t++) failures += trackers[t].failures;
    CHECK(failures == 0, "%d failed tracks", failures);
    CHECK_STATUS(flush(e, 10000, &err), APPNORTH_OK, err);
    CHECK(queued(e) == 0, "queue drained: %ld", queued(e));

    json_t *events = server_events();
    size_t n = json_array_size(events);
    CHECK(n == TRACKERS * PER_TRACKER, "every accepted event arrived: %zu of %d", n, TRACKERS * PER_TRACKER);
    /* Exactly once: distinct names. */
    json_t *names = json_object();
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev) {
        const char *nm = str_of(ev, "name");
        if (nm) json_object_set_new(names, nm, json_true());
    }
    CHECK(json_object_size(names) == TRACKERS * PER_TRACKER, "distinct: %zu (after %d flush loops)",
          json_object_size(names), loops);
    json_decref(names);
    json_decref(events);

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    if (!events_suite_start("test_events_lifecycle")) return 2;

    RUN(test_a_resend_after_a_crash_is_deduplicated);
    RUN(test_close_flushes_within_its_bound);
    RUN(test_close_is_bounded_while_the_server_hangs);
    RUN(test_free_aborts_an_upload_in_progress);
    RUN(test_eight_threads_track_while_flushes_and_consent_changes_run);

    curl_global_cleanup();
    return check_summary();
}
