/* One client's server that never answers does not stall another client's
 * non-blocking calls (the "held workers" row of issue #31), through the
 * real libappnorth.so against the dev server. Client A's config server
 * holds two refreshes for HOLD_MS (the dev server's delay fault); then, on
 * other clients:
 *  - a config refresh completes (it does not wait for A's workers);
 *  - of three held refreshes (two running, the third waiting for its
 *    client's share of the workers), appnorth_op_cancel ends the waiting
 *    one and a running one with APPNORTH_E_CANCELLED;
 *  - with a 1.5 s API timeout, a queue flush waiting for its client's
 *    held workers ends with APPNORTH_E_TIMEOUT, and with a 1.5 s config
 *    timeout a held refresh ends with its request's timeout;
 *  - an operation's timeout counts from its start: a queue submit that
 *    waited for a worker gets what is left of it, not a fresh one;
 *  - appnorth_config_free with a running and a waiting refresh returns,
 *    every completion delivered (APPNORTH_E_CANCELLED).
 * The held requests never answer (the dev server's delay holds them, 590 s, until
 * the reset that ends each test). Every check is causal: each completion
 * came while the requests it must not wait for were still held, never
 * "within N ms"; the times are printed (measured: a few ms, and 1.5 s for
 * the timeouts). Every wait is on a condition variable. */
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
#include "check.h"
#include "fixtures.h"
#include "support.h"

#define HOLD_MS 590000
#define OPS 8

static const char *server;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int calls[OPS];
    int32_t status[OPS];
    int64_t at[OPS];
    int rank[OPS]; /* 1 for the first completion of the batch, 2 for the next... */
} batch;

typedef struct {
    batch *b;
    int index;
} slot;

static void batch_init(batch *b, slot *slots) {
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
    cond_init_mono(&b->cv);
    for (int i = 0; i < OPS; i++) slots[i] = (slot){b, i};
}

static void on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op, (void)err, (void)json;
    slot *s = user;
    pthread_mutex_lock(&s->b->mu);
    s->b->calls[s->index]++;
    s->b->status[s->index] = status;
    s->b->at[s->index] = mono_ms();
    s->b->done++;
    s->b->rank[s->index] = s->b->done;
    pthread_cond_broadcast(&s->b->cv);
    pthread_mutex_unlock(&s->b->mu);
}

/* Waits until slot `index` completed (or 30 s pass); returns its call count. */
static int wait_slot(batch *b, int index) {
    int64_t deadline = mono_ms() + 30000;
    pthread_mutex_lock(&b->mu);
    while (b->calls[index] == 0) {
        if (cond_wait_until(&b->cv, &b->mu, deadline) != 0) break;
    }
    int calls = b->calls[index];
    pthread_mutex_unlock(&b->mu);
    return calls;
}

static int calls_of(batch *b, int index) {
    pthread_mutex_lock(&b->mu);
    int calls = b->calls[index];
    pthread_mutex_unlock(&b->mu);
    return calls;
}

/* Holds the next `count` config fetches of `app` for HOLD_MS. */
static void hold_config(const char *app, int count, char *prefix, size_t size) {
    snprintf(prefix, size, "/v1/apps/%s/config", app);
    char spec[256];
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":%d,\"path_prefix\":\"%s\"}", HOLD_MS, count, prefix);
    admin_add_fault(server, spec);
}

/* A config handle of a client of `app` whose resource timeout is `timeout_ms`. */
typedef struct {
    appnorth_client *client;
    appnorth_config *config;
    char *dir;
} config_handle;

static config_handle open_config_api(const char *app, int32_t api_ms, int32_t timeout_ms) {
    config_handle h;
    h.client = client_with_timeouts(server, app, api_ms, timeout_ms);
    h.dir = make_temp_dir(app);
    h.config = config_in(h.client, h.dir);
    return h;
}

static config_handle open_config(const char *app, int32_t timeout_ms) {
    return open_config_api(app, 60000, timeout_ms);
}

static void close_config(config_handle *h) {
    if (h->config) appnorth_config_free(h->config);
    appnorth_client_free(h->client);
    remove_tree(h->dir);
}

static uint64_t refresh(config_handle *h, slot *s) {
    appnorth_error err;
    uint64_t op = 0;
    CHECK_STATUS(appnorth_config_refresh_async(h->config, on_done, s, &op, &err), APPNORTH_OK, err);
    return op;
}

/* Client A: two refreshes held at its server, on two workers. */
static config_handle hold_two_workers(batch *b, slot *slots) {
    char prefix[128];
    hold_config("tstall-a", 2, prefix, sizeof prefix);
    config_handle a = open_config("tstall-a", HOLD_MS + 10000);
    refresh(&a, &slots[0]);
    refresh(&a, &slots[1]);
    admin_wait_fault_taken(server, prefix);
    CHECK(!admin_fault_pending(server, prefix), "client A's two refreshes are held at its server");
    (void)b;
    return a;
}

static void test_another_clients_refresh_runs(void) {
    static batch b;
    static slot slots[OPS];
    batch_init(&b, slots);
    config_handle a = hold_two_workers(&b, slots);
    CHECK(admin_request(server, "POST", "/admin/apps/tstall-b/config", "{\"config\":{\"k\":\"v\"}}", NULL) == 201,
          "publish");
    config_handle other = open_config("tstall-b", 60000);
    int64_t start = mono_ms();
    refresh(&other, &slots[2]);
    CHECK(wait_slot(&b, 2) == 1 && b.status[2] == APPNORTH_OK, "another client's refresh: %d", b.status[2]);
    int64_t took = b.at[2] - start;
    printf("another client's refresh completed in %lld ms while A holds two workers\n", (long long)took);
    CHECK(calls_of(&b, 0) == 0 && calls_of(&b, 1) == 0, "it did not wait for A's workers: A's refreshes are still held");
    close_config(&other);
    close_config(&a);
    CHECK(calls_of(&b, 0) == 1 && calls_of(&b, 1) == 1, "A's free delivered both completions");
    CHECK(b.status[0] == APPNORTH_E_CANCELLED && b.status[1] == APPNORTH_E_CANCELLED, "A's: %d %d", b.status[0],
          b.status[1]);
    admin_reset(server);
}

static void test_cancel_ends_a_waiting_and_a_running_refresh(void) {
    static batch b;
    static slot slots[OPS];
    batch_init(&b, slots);
    config_handle a = hold_two_workers(&b, slots);
    char prefix[128];
    hold_config("tstall-c", 2, prefix, sizeof prefix);
    config_handle c = open_config("tstall-c", 60000);
    uint64_t running = refresh(&c, &slots[2]);
    refresh(&c, &slots[3]);
    admin_wait_fault_taken(server, prefix);
    /* Its client's two workers are held: this one waits for one. */
    uint64_t waiting = refresh(&c, &slots[4]);
    appnorth_error err;
    int64_t cancelled_at = mono_ms();
    CHECK_STATUS(appnorth_op_cancel(waiting, &err), APPNORTH_OK, err);
    CHECK(wait_slot(&b, 4) == 1 && b.status[4] == APPNORTH_E_CANCELLED, "the waiting refresh: %d", b.status[4]);
    int64_t waiting_took = b.at[4] - cancelled_at;
    cancelled_at = mono_ms();
    CHECK_STATUS(appnorth_op_cancel(running, &err), APPNORTH_OK, err);
    CHECK(wait_slot(&b, 2) == 1 && b.status[2] == APPNORTH_E_CANCELLED, "the running refresh: %d", b.status[2]);
    int64_t running_took = b.at[2] - cancelled_at;
    printf("cancel with held workers: the waiting refresh completed %lld ms after it, the running one %lld ms\n",
           (long long)waiting_took, (long long)running_took);
    CHECK(calls_of(&b, 3) == 0 && calls_of(&b, 0) == 0 && calls_of(&b, 1) == 0,
          "both cancels ended their refresh while the other held refreshes go on");
    int64_t freed_at = mono_ms();
    close_config(&c);
    printf("config free with a held refresh took %lld ms\n", (long long)(mono_ms() - freed_at));
    CHECK(calls_of(&b, 3) == 1 && b.status[3] == APPNORTH_E_CANCELLED, "freed: %d", b.status[3]);
    close_config(&a);
    admin_reset(server);
}

/* Client D (API timeout 1.5 s) holds its two workers with refreshes (the
 * config timeout is long); its queue flush, waiting for one of them, ends
 * with APPNORTH_E_TIMEOUT after its 1.5 s. A held refresh of client F,
 * whose config timeout is 1.5 s, ends with its request's timeout. */
static void test_timeout_ends_waiting_and_running_operations(void) {
    static batch b;
    static slot slots[OPS];
    batch_init(&b, slots);
    config_handle a = hold_two_workers(&b, slots);
    char prefix[128];
    hold_config("tstall-d", 2, prefix, sizeof prefix);
    config_handle d = open_config_api("tstall-d", 1500, 60000);
    refresh(&d, &slots[2]);
    refresh(&d, &slots[3]);
    admin_wait_fault_taken(server, prefix);
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 10, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    int64_t start = mono_ms();
    CHECK_STATUS(appnorth_queue_flush_async(q, d.client, on_done, &slots[4], NULL, &err), APPNORTH_OK, err);
    hold_config("tstall-f", 1, prefix, sizeof prefix);
    config_handle f = open_config("tstall-f", 1500);
    int64_t f_start = mono_ms();
    refresh(&f, &slots[5]);
    CHECK(wait_slot(&b, 4) == 1 && wait_slot(&b, 5) == 1, "both completed");
    int64_t waited = b.at[4] - start, ran = b.at[5] - f_start;
    printf("1.5 s timeouts with held workers: the waiting queue flush ended after %lld ms (status %d), the running "
           "refresh after %lld ms (status %d)\n", (long long)waited, b.status[4], (long long)ran, b.status[5]);
    CHECK(b.status[4] == APPNORTH_E_TIMEOUT, "the waiting flush ends with its timeout: %d", b.status[4]);
    CHECK(b.status[5] != APPNORTH_OK, "the held refresh failed: %d", b.status[5]);
    CHECK(waited >= 1000, "the flush ended after its timeout: %lld ms", (long long)waited);
    CHECK(ran >= 1000, "the refresh ended after its timeout: %lld ms", (long long)ran);
    CHECK(calls_of(&b, 2) == 0 && calls_of(&b, 3) == 0, "D's refreshes are still held");
    appnorth_queue_free(q);
    close_config(&f);
    close_config(&d);
    close_config(&a);
    admin_reset(server);
}

/* Holds the next request of `app` under `path` (after /v1/apps/APP). */
static void hold_path(const char *app, const char *path, char *prefix, size_t size) {
    snprintf(prefix, size, "/v1/apps/%s%s", app, path);
    char spec[256];
    snprintf(spec, sizeof spec, "{\"delay_ms\":%d,\"count\":1,\"path_prefix\":\"%s\"}", HOLD_MS, prefix);
    admin_add_fault(server, spec);
}

static uint64_t read_comments(appnorth_client *c, const char *idea, slot *s) {
    appnorth_error err;
    uint64_t op = 0;
    CHECK_STATUS(appnorth_client_list_comments_async(c, idea, on_done, s, &op, &err), APPNORTH_OK, err);
    return op;
}

/* Client G (API timeout 1.5 s): its two workers are held by refreshes.
 * Its queue submit X waits for one. A read Y of client H (API timeout
 * 1 s), started after X and held at the server, times out; then the held
 * requests are released: G's refreshes end, a worker takes X at least 1 s
 * after X began, and X's request is held too. H's read Z starts once X's
 * request is held. Counted from its start, X's timeout comes at most 0.5 s
 * after the take, before Z's (1 s after it); a fresh 1.5 s from the take
 * ended X after Z. */
static void test_timeout_counts_from_the_start(void) {
    static batch b;
    static slot slots[OPS];
    batch_init(&b, slots);
    char prefix[128], x_prefix[128];
    hold_config("tstall-g", 2, prefix, sizeof prefix);
    config_handle g = open_config_api("tstall-g", 1500, HOLD_MS + 10000);
    refresh(&g, &slots[0]);
    refresh(&g, &slots[1]);
    admin_wait_fault_taken(server, prefix);
    hold_path("tstall-g", "/ideas/x/comments", x_prefix, sizeof x_prefix);
    hold_path("tstall-h", "/ideas/y/comments", prefix, sizeof prefix);
    hold_path("tstall-h", "/ideas/z/comments", prefix, sizeof prefix);
    appnorth_client *h = client_with_timeouts(server, "tstall-h", 1000, 60000);
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 10, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    int64_t start = mono_ms();
    CHECK_STATUS(appnorth_queue_submit_comment_async(q, g.client, "x", "a comment", NULL, on_done, &slots[2], NULL, &err),
                 APPNORTH_OK, err);
    read_comments(h, "y", &slots[3]);
    CHECK(wait_slot(&b, 3) == 1 && b.status[3] != APPNORTH_OK, "Y timed out: %d", b.status[3]);
    CHECK(calls_of(&b, 2) == 0, "X still waits for a worker after Y's 1 s");
    admin_release(server);
    admin_wait_fault_taken(server, x_prefix);
    int64_t taken = mono_ms();
    read_comments(h, "z", &slots[4]);
    CHECK(wait_slot(&b, 2) == 1 && wait_slot(&b, 4) == 1, "X and Z completed");
    printf("timeout from the start: the submit waited %lld ms for a worker and ended %lld ms after its start "
           "(status %d); Z ended %lld ms after the take\n", (long long)(taken - start), (long long)(b.at[2] - start),
           b.status[2], (long long)(b.at[4] - taken));
    CHECK(b.rank[2] < b.rank[4], "X's timeout counts from its start: it ended before Z (ranks %d, %d)", b.rank[2],
          b.rank[4]);
    appnorth_queue_free(q);
    appnorth_client_free(h);
    close_config(&g);
    admin_reset(server);
}

static void test_free_ends_running_and_waiting_refreshes(void) {
    static batch b;
    static slot slots[OPS];
    batch_init(&b, slots);
    config_handle a = hold_two_workers(&b, slots);
    char prefix[128];
    hold_config("tstall-e", 2, prefix, sizeof prefix);
    config_handle e = open_config("tstall-e", 60000);
    refresh(&e, &slots[2]);
    refresh(&e, &slots[3]);
    admin_wait_fault_taken(server, prefix);
    refresh(&e, &slots[4]);
    refresh(&e, &slots[5]);
    int64_t freed_at = mono_ms();
    appnorth_config_free(e.config);
    e.config = NULL;
    int64_t took = mono_ms() - freed_at;
    printf("config free with 2 running and 2 waiting refreshes (A holding two workers): %lld ms\n", (long long)took);
    for (int i = 2; i <= 5; i++) {
        CHECK(calls_of(&b, i) == 1 && b.status[i] == APPNORTH_E_CANCELLED, "refresh %d: %d calls, status %d", i,
              calls_of(&b, i), b.status[i]);
    }
    CHECK(calls_of(&b, 0) == 0 && calls_of(&b, 1) == 0, "A's refreshes are still held");
    close_config(&e);
    close_config(&a);
    admin_reset(server);
}

int main(void) {
    server = test_start("test_worker_stall", 180);
    if (!server) return 2;
    admin_reset(server);
    RUN(test_another_clients_refresh_runs);
    RUN(test_cancel_ends_a_waiting_and_a_running_refresh);
    RUN(test_timeout_ends_waiting_and_running_operations);
    RUN(test_timeout_counts_from_the_start);
    RUN(test_free_ends_running_and_waiting_refreshes);
    return check_summary();
}
