/* appnorth_client_cancel: a request held by the dev server's delay fault
 * returns APPNORTH_E_CANCELLED at once when another thread cancels, a
 * cancelled queue flush loses and duplicates nothing, and calls after a
 * cancel run normally. The server holds requests for 20 s; the bound on
 * the cancelled call is 5 s, far under the delay and generous for a loaded
 * machine (measured: a few milliseconds). */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "support.h"

#define APP "tcancel"
/* A hold: the server keeps the request until admin_release or its stop, so
 * a call that returns did not wait for it. */
#define HOLD_MS 600000

static const char *server;

/* Cancels the client once the server has taken the held request. */
typedef struct {
    appnorth_client *client;
    const char *prefix;
    int64_t cancelled_at;
    int32_t status;
} canceller;

static void *cancel_when_held(void *arg) {
    canceller *c = arg;
    int64_t deadline = mono_ms() + 15000;
    while (admin_fault_pending(server, c->prefix) && mono_ms() < deadline) sleep_ms(20);
    /* The server took the request; give it a moment to start waiting. */
    sleep_ms(100);
    appnorth_error err;
    c->cancelled_at = mono_ms();
    c->status = appnorth_client_cancel(c->client, &err);
    return NULL;
}

static void test_cancel_ends_a_held_request(void) {
    appnorth_client *c = client_with_timeouts(server, APP, 60000, 60000);
    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/boards", APP);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);

    canceller cancel = {c, prefix, 0, -1};
    pthread_t thread;
    pthread_create(&thread, NULL, cancel_when_held, &cancel);
    appnorth_error err;
    char *json = NULL;
    int64_t start = mono_ms();
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_E_CANCELLED, err);
    int64_t returned = mono_ms();
    pthread_join(thread, NULL);
    CHECK(cancel.status == APPNORTH_OK, "cancel returned %d", cancel.status);
    CHECK(json == NULL, "no result from a cancelled call");
    CHECK(strcmp(appnorth_status_str(APPNORTH_E_CANCELLED), "cancelled") == 0, "status name");
    int64_t after_cancel = returned - cancel.cancelled_at;
    printf("held request returned %lld ms after the cancel (%lld ms after it started)\n",
           (long long)after_cancel, (long long)(returned - start));
    CHECK(admin_held(server) == 1, "the cancel ended the call while the server still held its request");
    admin_release(server);

    /* Calls after the cancel run normally. */
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    appnorth_string_free(json);
    /* A cancel with nothing in flight changes nothing. */
    CHECK_STATUS(appnorth_client_cancel(c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    appnorth_string_free(json);
    CHECK(appnorth_client_cancel(NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL client");
    CHECK(appnorth_client_cancel(NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "NULL client, NULL err");
    appnorth_client_free(c);
}

static int32_t pending(appnorth_queue *q) {
    appnorth_error err;
    int32_t count = -1;
    CHECK_STATUS(appnorth_queue_pending_count(q, &count, &err), APPNORTH_OK, err);
    return count;
}

/* How often `title` occurs in the app's ideas on the server. */
static int server_count(appnorth_client *c, const char *title) {
    appnorth_error err;
    char *json = NULL;
    CHECK_STATUS(appnorth_client_list_ideas(c, NULL, &json, &err), APPNORTH_OK, err);
    int n = 0;
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", title);
    for (const char *p = json; p && (p = strstr(p, quoted)) != NULL; p += strlen(quoted)) n++;
    appnorth_string_free(json);
    return n;
}

static void test_cancelled_flush_loses_nothing(void) {
    appnorth_client *c = client_with_timeouts(server, APP, 60000, 60000);
    char *board = admin_board(server, APP, "cancel-board");
    CHECK(board != NULL, "board");
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 10, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);

    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/ideas", APP);
    /* Offline: three ideas are queued. */
    snprintf(spec, sizeof spec, "{\"drop\":true,\"count\":3,\"path_prefix\":\"%s\"}", prefix);
    admin_add_fault(server, spec);
    const char *titles[3] = {"cancel one", "cancel two", "cancel three"};
    for (int i = 0; i < 3; i++) {
        int32_t submitted = -1;
        CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, titles[i], NULL, NULL, &submitted, &err), APPNORTH_OK, err);
        CHECK(submitted == 0, "queued while offline");
    }
    CHECK(pending(q) == 3, "three pending");

    /* The first replay passes at once, the second is held and cancelled. */
    snprintf(spec, sizeof spec, "{\"delay_ms\":0,\"count\":1,\"path_prefix\":\"%s\"}", prefix);
    admin_add_fault(server, spec);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    canceller cancel = {c, prefix, 0, -1};
    pthread_t thread;
    pthread_create(&thread, NULL, cancel_when_held, &cancel);
    int32_t sent = -1;
    char *failed = NULL;
    CHECK_STATUS(appnorth_queue_flush_v2(q, c, &sent, &failed, &err), APPNORTH_E_CANCELLED, err);
    int64_t returned = mono_ms();
    pthread_join(thread, NULL);
    printf("cancelled flush returned %lld ms after the cancel\n", (long long)(returned - cancel.cancelled_at));
    /* Left held (a release would race the replay below with the same key). */
    CHECK(admin_held(server) >= 1, "the cancel ended the flush while the server still held its request");
    CHECK(sent == 1, "one sent before the cancel, got %d", sent);
    CHECK(failed == NULL, "a cancel names no failed entry");
    appnorth_string_free(failed);
    CHECK(pending(q) == 2, "the held entry and the last stay queued, got %d", pending(q));

    /* The next flush sends both; each idea exists once on the server. */
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 2, "two sent, got %d", sent);
    CHECK(pending(q) == 0, "queue empty");
    for (int i = 0; i < 3; i++) {
        int n = server_count(c, titles[i]);
        CHECK(n == 1, "'%s' on the server %d times", titles[i], n);
    }

    /* A cancelled submit is queued like a network failure. */
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    pthread_create(&thread, NULL, cancel_when_held, &cancel);
    int32_t submitted = -1;
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "cancel four", NULL, NULL, &submitted, &err), APPNORTH_OK, err);
    pthread_join(thread, NULL);
    CHECK(submitted == 0, "a cancelled submit is queued");
    CHECK(pending(q) == 1, "one pending after the cancelled submit");
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 1 && pending(q) == 0, "replayed");
    CHECK(server_count(c, "cancel four") == 1, "'cancel four' once on the server");

    appnorth_queue_free(q);
    free(board);
    appnorth_client_free(c);
}

/* An events flush waiting on a held upload returns CANCELLED; the event
 * stays queued and the next flush delivers it. */
static void test_cancelled_events_flush_keeps_the_events(void) {
    appnorth_client *c = client_with_timeouts(server, APP, 60000, 60000);
    char *dir = make_temp_dir("cancel-events");
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    /* The cancelled upload is retried after 2 s: long enough that the
     * cancel, not a quick retry, ends the first flush. */
    CHECK_STATUS(appnorth_events_options_set_retry(o, 2000, 3, 120000, 5, &err), APPNORTH_OK, err);
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    int32_t queued = 0;
    CHECK_STATUS(appnorth_events_track(e, "cancelled_flush", NULL, &queued, &err), APPNORTH_OK, err);

    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/events", APP);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    canceller cancel = {c, prefix, 0, -1};
    pthread_t thread;
    pthread_create(&thread, NULL, cancel_when_held, &cancel);
    CHECK_STATUS(appnorth_events_flush(e, 60000, &err), APPNORTH_E_CANCELLED, err);
    int64_t returned = mono_ms();
    pthread_join(thread, NULL);
    printf("cancelled events flush returned %lld ms after the cancel\n", (long long)(returned - cancel.cancelled_at));
    CHECK(admin_held(server) >= 1, "the cancel ended the flush while the server still held the upload");
    int64_t sent = -1;
    CHECK_STATUS(appnorth_events_flush_sent(e, 30000, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 1, "the kept event is delivered by the next flush, sent %lld", (long long)sent);
    appnorth_events_free(e);
    remove_tree(dir);
    appnorth_client_free(c);
}

int main(void) {
    server = test_start("test_cancel", 120);
    if (!server) return 2;
    RUN(test_cancel_ends_a_held_request);
    RUN(test_cancelled_flush_loses_nothing);
    RUN(test_cancelled_events_flush_keeps_the_events);
    return check_summary();
}
