/* The non-blocking calls (appnorth_*_async, appnorth_op_cancel) through the
 * real libappnorth.so against the dev server: results equal the blocking
 * calls', one operation cancelled among many while the others complete,
 * bad input refused at the start with no callback, freeing a client with
 * operations in flight (each completes with APPNORTH_E_CANCELLED before the
 * free returns), 256 reads in flight on one client with the library's
 * thread count bounded, and the queue, config and events forms. Every wait
 * is on a condition variable, never a sleep for a result. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "check.h"
#include "fixtures.h"
#include "support.h"

#define APP "tasync"
/* A hold: the server keeps the request until admin_release (or its reset). */
#define HOLD_MS 600000

static const char *server;

/* ---- Completions ----------------------------------------------------------- */

#define MAX_OPS 300

/* The completions of a batch of operations, one slot per operation. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int calls[MAX_OPS];
    int32_t status[MAX_OPS];
    uint64_t op[MAX_OPS];
    char *json[MAX_OPS];
    int err_matches[MAX_OPS];
    pthread_t thread[MAX_OPS];
} batch;

typedef struct {
    batch *b;
    int index;
} slot;

static slot slots[MAX_OPS];

static void batch_init(batch *b) {
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    cond_init_mono(&b->cv);
    for (int i = 0; i < MAX_OPS; i++) slots[i] = (slot){b, i};
}

static void batch_free(batch *b) {
    for (int i = 0; i < MAX_OPS; i++) free(b->json[i]);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

static void on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    slot *s = user;
    batch *b = s->b;
    pthread_mutex_lock(&b->mu);
    b->calls[s->index]++;
    b->status[s->index] = status;
    b->op[s->index] = op;
    b->err_matches[s->index] = err != NULL && err->code == status;
    b->json[s->index] = json ? strdup(json) : NULL;
    b->thread[s->index] = pthread_self();
    b->done++;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* Waits until `count` completions arrived (or 15 s pass); returns how many did. */
static int wait_done(batch *b, int count) {
    int64_t deadline = mono_ms() + 15000;
    pthread_mutex_lock(&b->mu);
    while (b->done < count) {
        if (cond_wait_until(&b->cv, &b->mu, deadline) != 0) break;
    }
    int done = b->done;
    pthread_mutex_unlock(&b->mu);
    return done;
}

static int done_count(batch *b) {
    pthread_mutex_lock(&b->mu);
    int done = b->done;
    pthread_mutex_unlock(&b->mu);
    return done;
}

/* ---- Server helpers -------------------------------------------------------- */

static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "Threads:", 8) == 0) n = atoi(line + 8);
    }
    if (f) fclose(f);
    return n;
}

/* ---- Tests ----------------------------------------------------------------- */

static void test_results_equal_the_blocking_calls(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *board = admin_board(server, APP, "async-board");
    CHECK(board != NULL, "board");
    admin_idea(server, APP, board, "async idea", "open");
    batch b;
    batch_init(&b);
    appnorth_error err;
    uint64_t ops[3] = {0, 0, 0};
    CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &slots[0], &ops[0], &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_list_ideas_async(c, "{\"limit\":5}", on_done, &slots[1], &ops[1], &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_list_chat_messages_async(c, on_done, &slots[2], &ops[2], &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 3) == 3, "three completions");
    CHECK(ops[0] != 0 && ops[1] != 0 && ops[0] != ops[1], "distinct non-zero ids");
    char *boards = NULL, *ideas = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &boards, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"limit\":5}", &ideas, &err), APPNORTH_OK, err);
    for (int i = 0; i < 3; i++) {
        CHECK(b.calls[i] == 1 && b.status[i] == APPNORTH_OK && b.err_matches[i], "op %d: calls %d status %d", i,
              b.calls[i], b.status[i]);
        CHECK(b.op[i] == ops[i], "op %d completes with its id", i);
        CHECK(!pthread_equal(b.thread[i], pthread_self()), "op %d completes on a library thread", i);
    }
    CHECK(b.json[0] && boards && strcmp(b.json[0], boards) == 0, "boards as the blocking call's");
    CHECK(b.json[1] && ideas && strcmp(b.json[1], ideas) == 0, "ideas as the blocking call's");
    CHECK(b.json[2] && strstr(b.json[2], "\"messages\""), "chat messages");
    appnorth_string_free(boards);
    appnorth_string_free(ideas);

    /* Writes: the server's answers; a second vote is a conflict, as blocking. */
    batch w;
    batch_init(&w);
    for (int i = 0; i < 3; i++) w.status[i] = -1;
    CHECK_STATUS(appnorth_client_submit_idea_async(c, board, "async title", "body", NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_OK, err);
    CHECK(wait_done(&w, 1) == 1 && w.status[0] == APPNORTH_OK, "idea submitted: %d", w.status[0]);
    json_t *answer = w.json[0] ? json_loads(w.json[0], 0, NULL) : NULL;
    const char *idea_id = json_string_value(json_object_get(json_object_get(answer, "idea"), "id"));
    CHECK(idea_id != NULL, "answer names the idea: %s", w.json[0] ? w.json[0] : "(null)");
    CHECK_STATUS(appnorth_client_submit_comment_async(c, idea_id, "async comment", NULL, on_done, &slots[1], NULL, &err),
                 APPNORTH_OK, err);
    CHECK(wait_done(&w, 2) == 2 && w.status[1] == APPNORTH_OK, "comment: %d", w.status[1]);
    CHECK_STATUS(appnorth_client_list_comments_async(c, idea_id, on_done, &slots[2], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&w, 3) == 3 && w.json[2] && strstr(w.json[2], "async comment"), "the comment is listed");
    batch v;
    batch_init(&v);
    CHECK_STATUS(appnorth_client_vote_async(c, idea_id, NULL, on_done, &slots[0], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&v, 1) == 1, "vote completes");
    CHECK_STATUS(appnorth_client_vote_async(c, idea_id, NULL, on_done, &slots[1], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&v, 2) == 2 && v.status[1] == APPNORTH_E_CONFLICT && v.json[1] == NULL,
          "second vote: %d (a conflict, no result)", v.status[1]);
    json_decref(answer);
    batch_free(&v);
    batch_free(&w);
    batch_free(&b);
    free(board);
    appnorth_client_free(c);
}

/* One held read among twenty: cancelling it ends it at once with
 * APPNORTH_E_CANCELLED; the other nineteen complete normally. */
static void test_cancel_one_among_many(void) {
    appnorth_client *c = client_with_timeouts(server, APP, 60000, 60000);
    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/ideas/held/comments", APP);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    batch b;
    batch_init(&b);
    appnorth_error err;
    uint64_t held = 0;
    CHECK_STATUS(appnorth_client_list_comments_async(c, "held", on_done, &slots[0], &held, &err), APPNORTH_OK, err);
    for (int i = 1; i < 20; i++) {
        CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &slots[i], NULL, &err), APPNORTH_OK, err);
    }
    CHECK(wait_done(&b, 19) >= 19, "the nineteen others complete while one is held");
    CHECK(b.calls[0] == 0, "the held one is still in flight");
    admin_wait_fault_taken(server, prefix);
    int64_t cancelled_at = mono_ms();
    CHECK_STATUS(appnorth_op_cancel(held, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 20) == 20, "the held one completes after its cancel");
    int64_t after = mono_ms() - cancelled_at;
    printf("held op completed %lld ms after its cancel\n", (long long)after);
    CHECK(admin_held(server) == 1, "the cancel ended it while the server still held its request");
    admin_release(server);
    CHECK(b.status[0] == APPNORTH_E_CANCELLED && b.json[0] == NULL, "held: cancelled, got %d", b.status[0]);
    for (int i = 1; i < 20; i++) {
        CHECK(b.calls[i] == 1 && b.status[i] == APPNORTH_OK, "op %d: %d calls, status %d", i, b.calls[i], b.status[i]);
    }
    /* Cancelling a finished op, or one never started, is harmless. */
    CHECK_STATUS(appnorth_op_cancel(held, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK(err.http_status == 0, "no HTTP status for an unknown op");
    CHECK_STATUS(appnorth_op_cancel(0, NULL), APPNORTH_E_NOT_FOUND, err);
    CHECK_STATUS(appnorth_op_cancel(UINT64_MAX, &err), APPNORTH_E_NOT_FOUND, err);
    batch_free(&b);
    admin_clear_faults(server);
    appnorth_client_free(c);
}

static int32_t load_empty(void *user_data, appnorth_buffer *out) {
    (void)user_data;
    (void)out;
    return 0;
}

static int32_t save_nothing(void *user_data, const void *bytes, size_t length) {
    (void)user_data;
    (void)bytes;
    (void)length;
    return 0;
}

/* A queue on callback storage refuses the non-blocking calls: its
 * callbacks run only on the host's threads. */
static void test_callback_storage_queue_refuses_async(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    appnorth_storage *s = NULL;
    CHECK_STATUS(appnorth_storage_new_callbacks(load_empty, save_nothing, NULL, NULL, &s, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(s, 0, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(s);
    batch b;
    batch_init(&b);
    CHECK_STATUS(appnorth_queue_flush_async(q, c, on_done, &slots[0], NULL, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_queue_submit_comment_async(q, c, "i", "body", NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_E_WRONG_STATE, err);
    CHECK(done_count(&b) == 0, "nothing started");
    batch_free(&b);
    appnorth_queue_free(q);
    appnorth_client_free(c);
}

static void test_bad_input_starts_nothing(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    batch b;
    batch_init(&b);
    appnorth_error err;
    uint64_t op = 77;
    CHECK_STATUS(appnorth_client_list_boards_async(c, NULL, NULL, &op, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(op == 0, "out_op is 0 on failure");
    CHECK(strstr(err.message, "on_done") != NULL, "message names on_done: %s", err.message);
    op = 77;
    CHECK_STATUS(appnorth_client_list_boards_async(NULL, on_done, &slots[0], &op, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(op == 0, "out_op is 0 for a NULL client");
    CHECK_STATUS(appnorth_client_list_ideas_async(c, "{not json", on_done, &slots[0], &op, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_client_list_ideas_async(c, "{\"limit\":500}", on_done, &slots[0], NULL, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_list_comments_async(c, NULL, on_done, &slots[0], NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_idea_async(c, "b", "   ", NULL, NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_client_submit_comment_async(c, "i", "\xff\xfe", NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_client_vote_async(c, "i", " bad key ", on_done, &slots[0], NULL, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_feedback_async(c, NULL, NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_send_chat_message_async(c, "", NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_queue_flush_async(NULL, c, on_done, &slots[0], NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_refresh_async(NULL, on_done, &slots[0], NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_flush_async(NULL, 10, on_done, &slots[0], NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    /* A good call after them completes; none of the refused ones called back. */
    CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &slots[1], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 1) == 1, "the good call completes");
    CHECK(b.calls[0] == 0 && b.calls[1] == 1, "refused starts never call back (%d)", b.calls[0]);
    batch_free(&b);
    appnorth_client_free(c);
}

/* Freeing a client with held operations: each completes with
 * APPNORTH_E_CANCELLED before the free returns. */
static void test_free_with_operations_in_flight(void) {
    appnorth_client *c = client_with_timeouts(server, APP, 60000, 60000);
    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/ideas/held-free/comments", APP);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":3,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    batch b;
    batch_init(&b);
    appnorth_error err;
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(appnorth_client_list_comments_async(c, "held-free", on_done, &slots[i], NULL, &err), APPNORTH_OK, err);
    }
    admin_wait_fault_taken(server, prefix);
    int64_t start = mono_ms();
    appnorth_client_free(c);
    int64_t took = mono_ms() - start;
    int done = done_count(&b);
    printf("free with 3 held operations returned in %lld ms\n", (long long)took);
    CHECK(done == 3, "all three completed before free returned: %d", done);
    for (int i = 0; i < 3; i++) {
        CHECK(b.calls[i] == 1 && b.status[i] == APPNORTH_E_CANCELLED, "op %d: calls %d, status %d", i, b.calls[i],
              b.status[i]);
    }
    CHECK(admin_held(server) == 3, "free returned while the server still held the 3 requests: %d", admin_held(server));
    admin_release(server);
    batch_free(&b);
    admin_clear_faults(server);
}

/* A completion that frees its own client: the free does not wait (it runs
 * on the thread the others need) and nothing hangs. */
static appnorth_client *freed_in_callback;

static void free_in_completion(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    appnorth_client_free(freed_in_callback);
    on_done(op, status, err, json, user);
}

static void test_free_inside_a_completion(void) {
    batch b;
    batch_init(&b);
    freed_in_callback = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    CHECK_STATUS(appnorth_client_list_boards_async(freed_in_callback, free_in_completion, &slots[0], NULL, &err),
                 APPNORTH_OK, err);
    CHECK(wait_done(&b, 1) == 1, "the completion ran and freed its client");
    /* Another client still works afterwards: the transfer thread is not stuck. */
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &slots[1], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 2) == 2 && b.status[1] == APPNORTH_OK, "later op: %d", b.status[1]);
    appnorth_client_free(c);
    batch_free(&b);
}

/* 256 reads in flight on one client: every one completes, and the library
 * adds at most 3 threads (the transfer thread and 2 workers) for them. */
static void test_many_in_flight(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    static batch b;
    batch_init(&b);
    appnorth_error err;
    int before = thread_count();
    for (int i = 0; i < 256; i++) {
        CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &slots[i], NULL, &err), APPNORTH_OK, err);
    }
    int during = thread_count();
    CHECK(wait_done(&b, 256) == 256, "all 256 complete: %d", done_count(&b));
    int after = thread_count();
    int ok = 0;
    for (int i = 0; i < 256; i++) ok += b.calls[i] == 1 && b.status[i] == APPNORTH_OK;
    printf("256 reads in flight: %d ok; threads %d before, %d while starting, %d after\n", ok, before, during, after);
    CHECK(ok == 256, "%d of 256 ok", ok);
    CHECK(during <= before + 3 && after <= before + 3, "threads %d -> %d/%d", before, during, after);
    batch_free(&b);
    appnorth_client_free(c);
}

/* Starts from 4 host threads at once while curl finishes others (a start
 * to a host that already answered writes its request on the calling
 * thread): every read completes once, all on one library thread (the
 * transfer thread), none on a starter or on the main thread. */
typedef struct {
    appnorth_client *client;
    int first;
    pthread_t self;
    int failed_starts;
} starter;

static void *start_reads(void *arg) {
    starter *s = arg;
    s->self = pthread_self();
    for (int i = s->first; i < s->first + 64; i++) {
        if (appnorth_client_list_boards_async(s->client, on_done, &slots[i], NULL, NULL) != APPNORTH_OK) s->failed_starts++;
    }
    return NULL;
}

static void test_starts_from_several_threads(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    static batch b;
    batch_init(&b);
    appnorth_error err;
    char *json = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    appnorth_string_free(json);
    starter s[4];
    pthread_t threads[4];
    for (int t = 0; t < 4; t++) {
        s[t] = (starter){c, t * 64, 0, 0};
        CHECK(pthread_create(&threads[t], NULL, start_reads, &s[t]) == 0, "starter %d", t);
    }
    for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
    for (int t = 0; t < 4; t++) CHECK(s[t].failed_starts == 0, "starter %d: %d starts refused", t, s[t].failed_starts);
    CHECK(wait_done(&b, 256) == 256, "all 256 complete: %d", done_count(&b));
    int ok = 0, on_a_starter = 0, elsewhere = 0;
    for (int i = 0; i < 256; i++) {
        ok += b.calls[i] == 1 && b.status[i] == APPNORTH_OK;
        for (int t = 0; t < 4; t++) on_a_starter += pthread_equal(b.thread[i], s[t].self) != 0;
        elsewhere += pthread_equal(b.thread[i], pthread_self()) || !pthread_equal(b.thread[i], b.thread[0]);
    }
    CHECK(ok == 256, "%d of 256 ok", ok);
    CHECK(on_a_starter == 0 && elsewhere == 0,
          "completions on one library thread: %d on a starter, %d elsewhere", on_a_starter, elsewhere);
    batch_free(&b);
    appnorth_client_free(c);
}

/* An offline queue on memory storage (10 entries at most). */
static appnorth_queue *memory_queue(void) {
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 10, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    return q;
}

static void test_queue_config_and_events(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *board = admin_board(server, APP, "async-queue");
    appnorth_error err;
    appnorth_queue *q = memory_queue();
    batch b;
    batch_init(&b);

    /* Offline: the submit is queued; then a flush sends it. */
    char spec[256];
    /* Two drops: libcurl retries once on a reused connection that turns out closed. */
    snprintf(spec, sizeof spec, "{\"drop\":true,\"count\":2,\"path_prefix\":\"/v1/apps/%s/ideas\"}", APP);
    admin_add_fault(server, spec);
    CHECK_STATUS(appnorth_queue_submit_idea_async(q, c, board, "queued async", NULL, NULL, on_done, &slots[0], NULL, &err),
                 APPNORTH_OK, err);
    CHECK(wait_done(&b, 1) == 1 && b.status[0] == APPNORTH_OK, "submit: %d", b.status[0]);
    admin_clear_faults(server);
    CHECK(b.json[0] && strcmp(b.json[0], "{\"submitted\":false}") == 0, "queued: %s", b.json[0] ? b.json[0] : "(null)");
    CHECK_STATUS(appnorth_queue_flush_async(q, c, on_done, &slots[1], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 2) == 2 && b.status[1] == APPNORTH_OK, "flush: %d", b.status[1]);
    CHECK(b.json[1] && strstr(b.json[1], "\"sent\":1") && strstr(b.json[1], "\"failed_entry_id\":null"), "flush result %s",
          b.json[1] ? b.json[1] : "(null)");
    CHECK_STATUS(appnorth_queue_submit_comment_async(q, c, "no-such-idea", "c", NULL, on_done, &slots[2], NULL, &err),
                 APPNORTH_OK, err);
    CHECK(wait_done(&b, 3) == 3 && b.status[2] == APPNORTH_E_NOT_FOUND, "comment on a missing idea: %d", b.status[2]);
    CHECK_STATUS(appnorth_queue_submit_idea_async(q, c, board, "", NULL, NULL, on_done, &slots[3], NULL, &err),
                 APPNORTH_E_VALIDATION, err);
    appnorth_queue_free(q);

    /* Config: a published config is fetched and applied. */
    char path[128];
    snprintf(path, sizeof path, "/admin/apps/%s/config", APP);
    CHECK(admin_request(server, "POST", path, "{\"config\":{\"greeting\":\"hi\"}}", NULL) == 201, "publish");
    char *dir = make_temp_dir("async-config");
    appnorth_config *config = config_in(c, dir);
    CHECK_STATUS(appnorth_config_refresh_async(config, on_done, &slots[4], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 4) == 4 && b.status[4] == APPNORTH_OK, "refresh: %d", b.status[4]);
    char *value = NULL;
    CHECK_STATUS(appnorth_config_get_string(config, "greeting", "none", &value, &err), APPNORTH_OK, err);
    CHECK(value && strcmp(value, "hi") == 0, "refreshed value: %s", value ? value : "(null)");
    appnorth_string_free(value);
    appnorth_config_free(config);

    /* Events: a flush reports what went out. */
    appnorth_events *events = events_in(c, dir);
    int32_t queued = 0;
    CHECK_STATUS(appnorth_events_track(events, "async_event", NULL, &queued, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_flush_async(events, -1, on_done, &slots[5], NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_flush_async(events, 10000, on_done, &slots[5], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 5) == 5 && b.status[5] == APPNORTH_OK, "events flush: %d", b.status[5]);
    CHECK(b.json[5] && strcmp(b.json[5], "{\"sent\":1}") == 0, "events result %s", b.json[5] ? b.json[5] : "(null)");
    appnorth_events_free(events);
    remove_tree(dir);
    batch_free(&b);
    free(board);
    admin_clear_faults(server);
    appnorth_client_free(c);
}

/* Events flushes waiting on a held upload hold no worker: three of them
 * wait while a config refresh and a queue flush (which run on the 2
 * workers) complete; then a cancel ends each within a few milliseconds. */
static void test_events_flushes_hold_no_worker(void) {
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    char *dir = make_temp_dir("async-flushes");
    appnorth_events *events = events_in(c, dir);
    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/events", APP);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    CHECK_STATUS(appnorth_events_track(events, "held_event", NULL, NULL, &err), APPNORTH_OK, err);
    static batch b;
    batch_init(&b);
    uint64_t ops[3] = {0};
    for (int i = 0; i < 3; i++) {
        CHECK_STATUS(appnorth_events_flush_async(events, 60000, on_done, &slots[i], &ops[i], &err), APPNORTH_OK, err);
    }
    admin_wait_fault_taken(server, prefix);

    appnorth_config *config = config_in(c, dir);
    appnorth_queue *q = memory_queue();
    CHECK_STATUS(appnorth_config_refresh_async(config, on_done, &slots[3], NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_flush_async(q, c, on_done, &slots[4], NULL, &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 2) == 2, "two operations completed: %d", done_count(&b));
    pthread_mutex_lock(&b.mu);
    CHECK(b.calls[3] == 1 && b.calls[4] == 1 && b.calls[0] + b.calls[1] + b.calls[2] == 0,
          "the refresh and the queue flush completed while the 3 events flushes wait: %d %d / %d %d %d", b.calls[3],
          b.calls[4], b.calls[0], b.calls[1], b.calls[2]);
    pthread_mutex_unlock(&b.mu);
    CHECK(b.status[3] == APPNORTH_OK && b.status[4] == APPNORTH_OK, "refresh %d, queue flush %d", b.status[3], b.status[4]);

    int64_t cancelled_at = mono_ms();
    for (int i = 0; i < 3; i++) CHECK_STATUS(appnorth_op_cancel(ops[i], &err), APPNORTH_OK, err);
    CHECK(wait_done(&b, 5) == 5, "the cancelled flushes completed: %d", done_count(&b));
    int64_t took = mono_ms() - cancelled_at;
    for (int i = 0; i < 3; i++) {
        CHECK(b.calls[i] == 1 && b.status[i] == APPNORTH_E_CANCELLED && b.err_matches[i],
              "flush %d: %d calls, status %d", i, b.calls[i], b.status[i]);
        CHECK(b.json[i] && strncmp(b.json[i], "{\"sent\":", 8) == 0, "flush %d result %s", i, b.json[i] ? b.json[i] : "(null)");
    }
    printf("3 events flushes waiting: refresh and queue flush completed meanwhile; cancels ended them in %lld ms\n",
           (long long)took);
    CHECK(admin_held(server) == 1, "the cancels ended the flushes while the server still held the upload");
    admin_release(server);
    appnorth_queue_free(q);
    appnorth_config_free(config);
    appnorth_events_free(events);
    admin_clear_faults(server);
    remove_tree(dir);
    batch_free(&b);
    appnorth_client_free(c);
}

/* Dispatch mode: a completion runs only inside appnorth_dispatch(), on the
 * thread calling it; the descriptor is readable while one is queued. Freeing
 * the client with operations in flight cancels them and runs their
 * completions on the freeing thread before it returns. */
static appnorth_client *dispatch_client(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, APP, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 60000, 60000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, 1, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static void test_dispatch_mode_completions_run_on_the_dispatching_thread(void) {
    appnorth_client *c = dispatch_client();
    appnorth_error err;
    int32_t fd = -1;
    CHECK_STATUS(appnorth_dispatch_fd(c, &fd, &err), APPNORTH_OK, err);
    batch b;
    batch_init(&b);
    for (int i = 0; i < 8; i++) {
        CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &slots[i], NULL, &err), APPNORTH_OK, err);
    }
    int64_t deadline = mono_ms() + 15000;
    while (done_count(&b) < 8 && mono_ms() < deadline) {
        struct pollfd p = {fd, POLLIN, 0};
        poll(&p, 1, 1000);
        int32_t ran = 0;
        CHECK_STATUS(appnorth_dispatch(c, 0, &ran, &err), APPNORTH_OK, err);
    }
    CHECK(done_count(&b) == 8, "8 completions through dispatch: %d", done_count(&b));
    for (int i = 0; i < 8; i++) {
        CHECK(b.status[i] == APPNORTH_OK && pthread_equal(b.thread[i], pthread_self()),
              "op %d: status %d, on the dispatching thread", i, b.status[i]);
    }
    batch_free(&b);

    /* Held operations at free: their completions run here, cancelled. */
    char prefix[128], spec[256];
    snprintf(prefix, sizeof prefix, "/v1/apps/%s/ideas/held-dispatch/comments", APP);
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":2,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
    batch h;
    batch_init(&h);
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(appnorth_client_list_comments_async(c, "held-dispatch", on_done, &slots[i], NULL, &err),
                     APPNORTH_OK, err);
    }
    admin_wait_fault_taken(server, prefix);
    CHECK(done_count(&h) == 0, "nothing runs outside dispatch");
    appnorth_client_free(c);
    CHECK(done_count(&h) == 2, "free ran both completions: %d", done_count(&h));
    for (int i = 0; i < 2; i++) {
        CHECK(h.status[i] == APPNORTH_E_CANCELLED && pthread_equal(h.thread[i], pthread_self()),
              "held %d: status %d, on the freeing thread", i, h.status[i]);
    }
    batch_free(&h);
    admin_release(server);
    admin_clear_faults(server);
}

int main(void) {
    server = test_start("test_async", 120);
    if (!server) return 2;
    RUN(test_results_equal_the_blocking_calls);
    RUN(test_bad_input_starts_nothing);
    RUN(test_callback_storage_queue_refuses_async);
    RUN(test_cancel_one_among_many);
    RUN(test_free_with_operations_in_flight);
    RUN(test_free_inside_a_completion);
    RUN(test_many_in_flight);
    RUN(test_starts_from_several_threads);
    RUN(test_queue_config_and_events);
    RUN(test_events_flushes_hold_no_worker);
    RUN(test_dispatch_mode_completions_run_on_the_dispatching_thread);
    return check_summary();
}
