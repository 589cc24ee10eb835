/* The seed's Verify list and the offline write queue: only network
 * failures queue, flush order and stops, poison entries, several queues and
 * processes on one storage, damaged entries, account scope. Fixtures and
 * the story rules: offline_support.h. */
#include "offline_support.h"

/* ---- the seed's Verify list --------------------------------------------- */

/* Verify 1: disable connectivity and submit one queued comment: expect
 * "not submitted" and one pending entry. */
static void test_verify1_offline_comment_is_queued(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    int32_t submitted = -1;

    go_offline();
    clear_request_log();
    CHECK_STATUS(appnorth_queue_submit_comment(q, ada, idea, "Written on the train", "train-1", &submitted, &err),
                 APPNORTH_OK, err);
    CHECK(submitted == 0, "out_submitted is 0 (queued): %d", submitted);
    CHECK(pending(q) == 1, "one pending entry");
    go_online();

    json_t *tries = logged_requests("POST", "/comments");
    CHECK(json_array_size(tries) >= 1 && json_is_null(json_object_get(json_array_get(tries, 0), "status")),
          "the attempt was made and got no answer");
    json_decref(tries);
    CHECK(stored("comments") == 0, "the server stored nothing");

    json_t *entries = queue_entries(q);
    char *scope = scope_of(ada);
    CHECK(json_array_size(entries) == 1 && str_eq(str_at(entries, 0, "scope"), scope) &&
          str_eq(str_at(entries, 0, "kind"), "comment") && str_eq(str_at(entries, 0, "idempotency_key"), "train-1"),
          "the entry records scope, kind and key");
    appnorth_string_free(scope);
    json_decref(entries);

    appnorth_queue_free(q);
    appnorth_client_free(ada);
    free(idea);
}

/* Verify 2: reconnect, flush, and confirm one server comment and zero
 * pending entries. */
static void test_verify2_reconnect_flush_sends_once(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;

    queue_offline_comment(q, ada, idea, "Written on the train", NULL);
    CHECK(pending(q) == 1, "one pending before reconnecting");

    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, ada, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 1, "flush sent 1: %d", sent);
    CHECK(pending(q) == 0, "zero pending after the flush");
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 1, "one server comment: %zu", json_array_size(comments));
    CHECK(str_eq(str_at(comments, 0, "body"), "Written on the train") && str_eq(str_at(comments, 0, "author"), ADA),
          "the comment is ada's");
    json_decref(comments);

    char *text = NULL;
    CHECK_STATUS(appnorth_client_list_comments(ada, idea, &text, &err), APPNORTH_OK, err);
    json_t *reply = take_json(text);
    CHECK(json_array_size(json_object_get(reply, "comments")) == 1, "list_comments shows it");
    json_decref(reply);

    /* Flushing again sends nothing more. */
    CHECK_STATUS(appnorth_queue_flush(q, ada, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0, "second flush sent %d", sent);
    CHECK(stored("comments") == 1, "still one server comment");
    appnorth_queue_free(q);
    appnorth_client_free(ada);
    free(idea);
}

/* Verify 3: switch accounts before flushing and confirm the old entry is
 * not sent as the new user. */
static void test_verify3_switched_account_does_not_send_old_entry(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    add_user(BOB, BOB_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    int32_t sent = -1;

    queue_offline_comment(q, ada, idea, "Ada wrote this offline", "ada-offline-1");
    appnorth_client_free(ada); /* ada logs out; bob logs in */

    appnorth_client *bob = make_client(server, APP, BOB, BOB_TOKEN);
    clear_request_log();
    CHECK_STATUS(appnorth_queue_flush(q, bob, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0, "bob's flush sent %d", sent);
    CHECK(pending(q) == 1, "ada's entry is still pending");
    json_t *posts = logged_requests("POST", NULL);
    CHECK(json_array_size(posts) == 0, "bob's flush sent no request: %zu", json_array_size(posts));
    json_decref(posts);
    CHECK(stored("comments") == 0, "no comment on the server, none from bob");

    appnorth_client *anon = make_client(server, APP, NULL, NULL);
    CHECK_STATUS(appnorth_queue_flush(q, anon, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0 && pending(q) == 1, "anonymous flush sent %d", sent);
    appnorth_client *other_app = make_client(server, "otherapp", ADA, ADA_TOKEN);
    CHECK_STATUS(appnorth_queue_flush(q, other_app, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0 && pending(q) == 1, "same email on another app sent %d", sent);

    /* Ada again (email case differs: scopes use the lowercased email). */
    appnorth_client *ada_again = make_client(server, APP, "Ada@Example.COM", ADA_TOKEN);
    CHECK_STATUS(appnorth_queue_flush(q, ada_again, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 1, "ada's flush sent %d", sent);
    CHECK(pending(q) == 0, "nothing pending");
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 1 && str_eq(str_at(comments, 0, "author"), ADA),
          "one comment, authored by ada");
    json_decref(comments);
    json_t *state = server_state();
    size_t i;
    json_t *comment;
    int from_bob = 0;
    json_array_foreach(json_object_get(state, "comments"), i, comment) {
        if (str_eq(json_string_value(json_object_get(comment, "author")), BOB)) from_bob++;
    }
    CHECK(from_bob == 0, "no comment from bob");
    json_decref(state);

    appnorth_client_free(bob);
    appnorth_client_free(anon);
    appnorth_client_free(other_app);
    appnorth_client_free(ada_again);
    appnorth_queue_free(q);
    free(idea);
}

/* Verify 4: cache reads before and after TTL expiry, and logout removes the
 * data the app promises to forget. */
static void test_verify4_cache_ttl_and_logout(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    char *scope = scope_of(ada);
    char *dir = make_temp_dir("offline");
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(WALL_START, &clock, &err), APPNORTH_OK, err);
    appnorth_storage *cache_storage = NULL, *queue_storage = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "cache", &cache_storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &queue_storage, &err), APPNORTH_OK, err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(cache_storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(queue_storage, 0, &q, &err), APPNORTH_OK, err);

    deliveries d = {0};
    CHECK_STATUS(appnorth_read_boards(cache, ada, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK, "empty cache: network only (%d calls)", d.calls);
    deliveries_reset(&d);

    char *text = NULL;
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    json_t *boards = take_json(text);
    CHECK(json_array_size(boards) == 1, "before expiry: the cached boards");
    json_decref(boards);

    CHECK_STATUS(appnorth_clock_advance(clock, 59 * 1000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    CHECK(text != NULL, "59 s later: still fresh");
    appnorth_string_free(text);

    CHECK_STATUS(appnorth_clock_advance(clock, 2 * 1000, &err), APPNORTH_OK, err);
    text = (char *)1;
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    CHECK(text == NULL, "61 s later: expired reads as absent (no stale fallback)");
    CHECK_STATUS(appnorth_read_boards(cache, ada, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK, "expired cache: network only (%d calls)", d.calls);
    deliveries_reset(&d);

    /* Logout: the app promises to forget ada's cached reads and queued
     * writes. Discard the loaded state, erase storage, free the handles. */
    queue_offline_comment(q, ada, idea, "Never sent", NULL);
    CHECK(pending(q) == 1, "one pending before logout");
    int32_t discarded = -1;
    CHECK_STATUS(appnorth_queue_discard(q, scope, &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 1, "discarded %d", discarded);
    CHECK_STATUS(appnorth_cache_clear(cache, scope, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    CHECK(text == NULL, "cleared");
    CHECK_STATUS(appnorth_storage_erase(cache_storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_storage_erase(queue_storage, &err), APPNORTH_OK, err);
    appnorth_queue_free(q);
    appnorth_cache_free(cache);
    appnorth_storage_free(cache_storage);
    appnorth_storage_free(queue_storage);

    /* A new session on the same data directory finds nothing of ada's. */
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "cache", &cache_storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &queue_storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_new(cache_storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(queue_storage, 0, &q, &err), APPNORTH_OK, err);
    CHECK(pending(q) == 0, "no queued write survives logout");
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    CHECK(text == NULL, "no cached read survives logout");
    appnorth_string_free(text);
    CHECK(stored("comments") == 0, "the discarded comment never reached the server");

    appnorth_queue_free(q);
    appnorth_cache_free(cache);
    appnorth_storage_free(cache_storage);
    appnorth_storage_free(queue_storage);
    appnorth_clock_free(clock);
    appnorth_client_free(ada);
    appnorth_string_free(scope);
    remove_tree(dir);
    free(idea);
}

/* ---- the queue ------------------------------------------------------------- */

static void test_only_network_failures_queue(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    int32_t submitted = -1;

    /* HTTP 500: a server answer, returned, not queued. */
    add_fault("{\"status\":500,\"count\":10}");
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "During an outage", NULL, &submitted, &err),
                 APPNORTH_E_SERVER, err);
    CHECK(err.http_status == 500, "HTTP 500: %d", err.http_status);
    go_online();
    CHECK(pending(q) == 0, "a 500 queues nothing");

    /* HTTP 401: a wrong token is returned, not queued. */
    appnorth_client *wrong = make_client(server, APP, ADA, "tok-wrong");
    CHECK_STATUS(appnorth_queue_submit_comment(q, wrong, idea, "With a bad token", NULL, &submitted, &err),
                 APPNORTH_E_AUTHENTICATION, err);
    CHECK(err.http_status == 401, "HTTP 401: %d", err.http_status);
    CHECK(pending(q) == 0, "a 401 queues nothing");

    /* HTTP 409: a reused key with another body is returned, not queued. */
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "First", "k-409", NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "Second", "k-409", &submitted, &err),
                 APPNORTH_E_CONFLICT, err);
    CHECK(pending(q) == 0, "a 409 queues nothing");

    /* Connection refused is a network failure: queued (for that URL). */
    appnorth_client *down = make_client("http://127.0.0.1:9", APP, NULL, NULL);
    CHECK_STATUS(appnorth_queue_submit_comment(q, down, idea, "Nobody listening", NULL, &submitted, &err),
                 APPNORTH_OK, err);
    CHECK(submitted == 0 && pending(q) == 1, "refused connection queued: submitted %d", submitted);

    /* Online, the queue just submits. */
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "Online now", NULL, &submitted, &err), APPNORTH_OK, err);
    CHECK(submitted == 1 && pending(q) == 1, "submitted directly: %d", submitted);
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 2, "server has First and Online now: %zu", json_array_size(comments));
    json_decref(comments);

    appnorth_client_free(down);
    appnorth_client_free(wrong);
    appnorth_client_free(c);
    appnorth_queue_free(q);
    free(idea);
}

static void test_queue_limit(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    appnorth_storage *storage = NULL;
    appnorth_queue *q = (appnorth_queue *)1;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, -1, &q, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(q == NULL, "out_queue NULL on failure");
    CHECK_STATUS(appnorth_queue_new(storage, 10001, &q, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_new(storage, 3, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);

    int32_t submitted = -1;
    go_offline();
    for (int i = 1; i <= 3; i++) {
        char body[32];
        snprintf(body, sizeof body, "offline %d", i);
        CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, body, NULL, &submitted, &err), APPNORTH_OK, err);
    }
    CHECK(pending(q) == 3, "three pending");
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "offline 4", NULL, &submitted, &err),
                 APPNORTH_E_QUEUE_FULL, err);
    CHECK(pending(q) == 3, "still three pending after QUEUE_FULL");
    go_online();

    /* A full queue does not stop writes that go through. */
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "online", NULL, &submitted, &err), APPNORTH_OK, err);
    CHECK(submitted == 1 && pending(q) == 3, "online submit with a full queue: submitted %d", submitted);

    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 3 && pending(q) == 0, "flushed %d", sent);
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 4, "4 comments (not 'offline 4'): %zu", json_array_size(comments));
    json_decref(comments);
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(idea);
}

/* Three entries on ideas A, B, A; the server drops B's path only. */
static void test_flush_stops_on_network_failure_keeping_the_rest(void) {
    admin_reset(server);
    char *board = NULL;
    char *a = seed_board_and_idea(&board);
    char *b = seed_idea(board, "Offline sync");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    queue_offline_comment(q, c, a, "A1", "k-a1");
    queue_offline_comment(q, c, b, "B", "k-b");
    queue_offline_comment(q, c, a, "A2", "k-a2");

    char fault[256];
    snprintf(fault, sizeof fault,
             "{\"drop\":true,\"count\":100,\"path_prefix\":\"/v1/apps/" APP "/ideas/%s/comments\"}", b);
    add_fault(fault);
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    go_online();
    CHECK(sent == 1, "sent A1 then stopped at B: %d", sent);
    CHECK(pending(q) == 2, "B and A2 kept: %d", pending(q));
    json_t *on_a = stored_comments(a), *on_b = stored_comments(b);
    CHECK(json_array_size(on_a) == 1 && str_eq(str_at(on_a, 0, "body"), "A1"), "A2 was not sent past B");
    CHECK(json_array_size(on_b) == 0, "B not stored");
    json_decref(on_a);
    json_decref(on_b);
    json_t *entries = queue_entries(q);
    CHECK(str_eq(str_at(entries, 0, "idempotency_key"), "k-b") && str_eq(str_at(entries, 1, "idempotency_key"), "k-a2"),
          "the rest keep their order");
    json_decref(entries);

    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 2 && pending(q) == 0, "the rest sent on reconnect: %d", sent);
    json_t *state = server_state();
    json_t *all = json_object_get(state, "comments");
    CHECK(json_array_size(all) == 3 && str_eq(str_at(all, 0, "body"), "A1") && str_eq(str_at(all, 1, "body"), "B") &&
          str_eq(str_at(all, 2, "body"), "A2"), "server order A1, B, A2");
    json_decref(state);
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(board);
    free(a);
    free(b);
}

static void test_flush_error_is_returned_and_leaves_the_entry_pending(void) {
    admin_reset(server);
    char *board = NULL;
    char *a = seed_board_and_idea(&board);
    char *b = seed_idea(board, "Offline sync");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    queue_offline_comment(q, c, a, "A1", "k-a1");
    queue_offline_comment(q, c, b, "B", "k-b");
    queue_offline_comment(q, c, a, "A2", "k-a2");

    char fault[256];
    snprintf(fault, sizeof fault,
             "{\"status\":500,\"count\":1,\"path_prefix\":\"/v1/apps/" APP "/ideas/%s/comments\"}", b);
    add_fault(fault);
    CHECK_STATUS(appnorth_queue_flush(q, c, NULL, &err), APPNORTH_E_SERVER, err);
    CHECK(err.http_status == 500, "HTTP 500: %d", err.http_status);
    go_online();
    CHECK(pending(q) == 2, "B (failed) and A2 (not tried) pending: %d", pending(q));
    json_t *entries = queue_entries(q);
    CHECK(str_eq(str_at(entries, 0, "idempotency_key"), "k-b"), "the failing entry is first");
    json_decref(entries);
    json_t *on_a = stored_comments(a);
    CHECK(json_array_size(on_a) == 1, "only A1 stored: %zu", json_array_size(on_a));
    json_decref(on_a);

    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 2 && pending(q) == 0, "retry sent %d", sent);
    CHECK(stored("comments") == 3, "three comments");
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(board);
    free(a);
    free(b);
}

/* Issue 10: a comment whose idea was deleted after it was queued fails
 * NOT_FOUND on every flush. flush_v2 names it, the entries list shows its
 * attempts and last error, and discard_entry removes it alone, so the
 * valid comments behind it go out. */
static void test_poison_entry_is_named_and_discarded_alone(void) {
    admin_reset(server);
    char *board = NULL;
    char *kept = seed_board_and_idea(&board);
    char *doomed = seed_idea(board, "Soon deleted");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    queue_offline_comment(q, c, doomed, "poison", "k-poison");
    queue_offline_comment(q, c, kept, "valid 1", "k-v1");
    queue_offline_comment(q, c, kept, "valid 2", "k-v2");
    char path[256];
    snprintf(path, sizeof path, "/admin/apps/" APP "/ideas/%s", doomed);
    CHECK(admin_request(server, "DELETE", path, NULL, NULL) == 200, "idea deleted");

    json_t *entries = queue_entries(q);
    char *poison_id = strdup(str_at(entries, 0, "id") ? str_at(entries, 0, "id") : "");
    json_t *first = json_array_get(entries, 0);
    CHECK(json_integer_value(json_object_get(first, "attempts")) == 1, "the try at submit counts");
    CHECK(json_is_string(json_object_get(first, "last_error")), "the network failure is recorded");
    CHECK(json_is_integer(json_object_get(first, "created_ms")), "created_ms");
    json_decref(entries);

    for (int attempt = 2; attempt <= 3; attempt++) {
        int32_t sent = -1;
        char *failed = NULL;
        CHECK_STATUS(appnorth_queue_flush_v2(q, c, &sent, &failed, &err), APPNORTH_E_NOT_FOUND, err);
        CHECK(sent == 0 && str_eq(failed, poison_id), "flush names the poison entry: %s", failed ? failed : "NULL");
        appnorth_string_free(failed);
        entries = queue_entries(q);
        first = json_array_get(entries, 0);
        CHECK(json_array_size(entries) == 3, "everything stays pending: %zu", json_array_size(entries));
        CHECK(json_integer_value(json_object_get(first, "attempts")) == attempt, "attempt %d counted", attempt);
        CHECK(strstr(json_string_value(json_object_get(first, "last_error")) ? json_string_value(json_object_get(first, "last_error")) : "", "not found") != NULL,
              "last_error holds the server's answer");
        CHECK(json_is_null(json_object_get(json_array_get(entries, 1), "last_error")) == 0,
              "the valid entries carry their submit-time failure too");
        json_decref(entries);
    }
    CHECK(stored("comments") == 0, "nothing sent behind the poison entry");

    int32_t discarded = -1;
    CHECK_STATUS(appnorth_queue_discard_entry(q, poison_id, &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 1, "discarded: %d", discarded);
    CHECK_STATUS(appnorth_queue_discard_entry(q, poison_id, &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 0, "a second discard finds nothing: %d", discarded);
    CHECK_STATUS(appnorth_queue_discard_entry(q, NULL, &discarded, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_discard_entry(q, "\xff", NULL, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_queue_discard_entry(NULL, poison_id, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);

    int32_t sent = -1;
    char *failed = (char *)"unset";
    CHECK_STATUS(appnorth_queue_flush_v2(q, c, &sent, &failed, &err), APPNORTH_OK, err);
    CHECK(sent == 2 && failed == NULL, "the valid comments go out: %d", sent);
    json_t *on_kept = stored_comments(kept);
    CHECK(json_array_size(on_kept) == 2, "two comments stored: %zu", json_array_size(on_kept));
    json_decref(on_kept);
    CHECK_STATUS(appnorth_queue_flush_v2(NULL, c, &sent, &failed, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(failed == NULL && sent == 0, "out-parameters cleared on failure");

    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(poison_id);
    free(board);
    free(kept);
    free(doomed);
}

static void test_flush_replays_the_original_idempotency_key(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;

    clear_request_log();
    queue_offline_comment(q, c, idea, "Given key", "my-retry-key");
    queue_offline_comment(q, c, idea, "Generated key", NULL); /* the library makes one */
    json_t *dropped = logged_requests("POST", "/comments");
    CHECK(json_array_size(dropped) >= 2, "two attempts logged");
    const char *given = logged_header(json_array_get(dropped, 0), "Idempotency-Key");
    char *made = NULL;
    for (size_t i = 0; i < json_array_size(dropped); i++) {
        const char *k = logged_header(json_array_get(dropped, i), "Idempotency-Key");
        if (k && strcmp(k, "my-retry-key") != 0) { made = strdup(k); break; }
    }
    CHECK(str_eq(given, "my-retry-key"), "first attempt used the given key: %s", given ? given : "-");
    CHECK(made && *made, "the second attempt had a generated key");
    json_decref(dropped);
    json_t *entries = queue_entries(q);
    CHECK(str_eq(str_at(entries, 1, "idempotency_key"), made), "the entry keeps the generated key");
    json_decref(entries);

    clear_request_log();
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 2, "sent %d", sent);
    json_t *replays = logged_requests("POST", "/comments");
    CHECK(json_array_size(replays) == 2, "two replays: %zu", json_array_size(replays));
    CHECK(str_eq(logged_header(json_array_get(replays, 0), "Idempotency-Key"), "my-retry-key"),
          "replay 1 kept the given key");
    CHECK(str_eq(logged_header(json_array_get(replays, 1), "Idempotency-Key"), made),
          "replay 2 kept the generated key");
    json_decref(replays);
    free(made);
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(idea);
}

/* The first attempt reached the server but its answer was lost: simulated
 * by applying the same key and body directly before the flush. */
static void test_flush_after_the_write_was_applied_makes_no_duplicate(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;

    queue_offline_comment(q, c, idea, "Sent once, answer lost", "lost-answer-1");
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "Sent once, answer lost", "lost-answer-1", NULL, &err),
                 APPNORTH_OK, err);
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 1 && pending(q) == 0, "the replay counts as sent: %d", sent);
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 1, "exactly one server comment: %zu", json_array_size(comments));
    json_decref(comments);
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(idea);
}

static void test_discard_per_scope_and_all(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_client *anon = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    queue_offline_comment(q, ada, idea, "ada 1", NULL);
    queue_offline_comment(q, anon, idea, "anon 1", NULL);
    queue_offline_comment(q, ada, idea, "ada 2", NULL);
    CHECK(pending(q) == 3, "pending counts every scope");

    char *ada_scope = scope_of(ada);
    int32_t discarded = -1;
    CHECK_STATUS(appnorth_queue_discard(q, "http://nowhere|x|nobody", &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 0 && pending(q) == 3, "unknown scope discards nothing");
    CHECK_STATUS(appnorth_queue_discard(q, ada_scope, &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 2 && pending(q) == 1, "ada's 2 discarded: %d", discarded);
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, ada, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0, "nothing of ada's left to send");

    CHECK_STATUS(appnorth_queue_discard(q, NULL, &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 1 && pending(q) == 0, "discard all: %d", discarded);
    CHECK_STATUS(appnorth_queue_flush(q, anon, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0, "nothing left");
    CHECK(stored("comments") == 0, "discarded writes never reach the server");
    CHECK(appnorth_queue_discard(NULL, NULL, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "discard NULL queue");
    appnorth_string_free(ada_scope);
    appnorth_queue_free(q);
    appnorth_client_free(ada);
    appnorth_client_free(anon);
    free(idea);
}

static void test_entries_json(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;

    json_t *entries = queue_entries(q);
    CHECK(json_array_size(entries) == 0, "empty queue: []");
    json_decref(entries);

    appnorth_feedback *fb = appnorth_feedback_new();
    appnorth_feedback_set_text(fb, "Private report text", &err);
    int32_t submitted = -1;
    /* CLOCK_REALTIME, as the library reads it: time() is the kernel's
     * coarse clock, a tick behind it, so at a second's turn its "this
     * second's end" was already past (CI: entries at ...599001 against an
     * upper bound of ...599000). */
    long long before = wall_ms();
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "Idea title", "Private idea body", "k-idea", &submitted, &err),
                 APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "Private comment body", "k-comment", &submitted, &err),
                 APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_feedback(q, c, fb, NULL, &submitted, &err), APPNORTH_OK, err);
    go_online();
    long long after = wall_ms() + 1000;

    char *text = NULL;
    CHECK_STATUS(appnorth_queue_entries(q, &text, &err), APPNORTH_OK, err);
    CHECK(text && !strstr(text, "Private"), "no payloads in the entries JSON: %s", text ? text : "(null)");
    entries = take_json(text);
    char *scope = scope_of(c);
    const char *kinds[3] = {"idea", "comment", "feedback"};
    CHECK(json_array_size(entries) == 3, "three entries");
    long long last = 0;
    for (size_t i = 0; i < 3 && i < json_array_size(entries); i++) {
        json_t *e = json_array_get(entries, i);
        CHECK(str_eq(json_string_value(json_object_get(e, "kind")), kinds[i]), "entry %zu kind %s", i, kinds[i]);
        CHECK(str_eq(json_string_value(json_object_get(e, "scope")), scope), "entry %zu scope", i);
        const char *id = json_string_value(json_object_get(e, "id"));
        CHECK(id && *id, "entry %zu has an id", i);
        const char *key = json_string_value(json_object_get(e, "idempotency_key"));
        CHECK(key && *key, "entry %zu has a key", i);
        json_t *created = json_object_get(e, "created_ms");
        long long ms = (long long)json_integer_value(created);
        CHECK(json_is_integer(created) && ms >= before - 1000 && ms <= after && ms >= last,
              "entry %zu created_ms %lld in order and now-ish", i, ms);
        last = ms;
        json_t *other = json_array_get(entries, (i + 1) % 3);
        CHECK(!str_eq(id, json_string_value(json_object_get(other, "id"))), "ids differ");
    }
    CHECK(str_eq(str_at(entries, 0, "idempotency_key"), "k-idea") && str_eq(str_at(entries, 1, "idempotency_key"), "k-comment"),
          "keys as given");
    json_decref(entries);
    appnorth_string_free(scope);
    CHECK(appnorth_queue_entries(q, NULL, &err) == APPNORTH_E_INVALID_ARGUMENT, "entries NULL out");
    appnorth_feedback_free(fb);
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_queued_idea_and_feedback_replay_intact(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;
    const char *diagnostics = "{\"fps\":59.94,\"scale\":1.0,\"os\":{\"name\":\"linux\"}}";

    appnorth_feedback *fb = appnorth_feedback_new();
    appnorth_feedback_set_text(fb, "Crashed offline", &err);
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, diagnostics, &err), APPNORTH_OK, err);
    unsigned char shot[5000];
    for (size_t i = 0; i < sizeof shot; i++) shot[i] = (unsigned char)(i * 31);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, shot, sizeof shot, "image/png", &err), APPNORTH_OK, err);
    int32_t submitted = -1;
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_feedback(q, ada, fb, "fb-offline", &submitted, &err), APPNORTH_OK, err);
    /* The queue copied the feedback: changing or freeing ours changes nothing. */
    appnorth_feedback_set_text(fb, "Edited after queuing", &err);
    appnorth_feedback_free(fb);
    CHECK_STATUS(appnorth_queue_submit_idea(q, ada, board, "Queued idea", "Its body", "idea-offline", &submitted, &err),
                 APPNORTH_OK, err);
    go_online();
    CHECK(pending(q) == 2, "two pending");

    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, ada, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 2 && pending(q) == 0, "sent %d", sent);
    json_t *state = server_state();
    json_t *stored_fb = json_array_get(json_object_get(state, "feedback"), 0);
    json_t *want = json_loads(diagnostics, 0, NULL);
    CHECK(str_eq(json_string_value(json_object_get(stored_fb, "text")), "Crashed offline"), "feedback text as queued");
    CHECK(want && json_equal(want, json_object_get(stored_fb, "diagnostics")), "diagnostics replayed exactly");
    json_t *shots = json_object_get(stored_fb, "screenshots");
    CHECK(json_array_size(shots) == 1 &&
          json_integer_value(json_object_get(json_array_get(shots, 0), "size")) == (json_int_t)sizeof shot,
          "screenshot replayed with all its bytes");
    CHECK(str_eq(json_string_value(json_object_get(stored_fb, "author")), ADA), "feedback by ada");
    json_t *ideas = json_object_get(state, "ideas");
    CHECK(json_array_size(ideas) == 2 && str_eq(str_at(ideas, 1, "title"), "Queued idea") &&
          str_eq(str_at(ideas, 1, "body"), "Its body") && str_eq(str_at(ideas, 1, "author"), ADA), "idea replayed");
    json_decref(want);
    json_decref(state);
    appnorth_queue_free(q);
    appnorth_client_free(ada);
    free(board);
    free(idea);
}

typedef struct {
    appnorth_queue *queue;
    appnorth_client *client;
    const char *idea;
    int index;
    int failures;
    int32_t sent;
} worker;

static void *submit_five(void *arg) {
    worker *w = arg;
    for (int i = 0; i < 5; i++) {
        char body[64];
        snprintf(body, sizeof body, "thread %d message %d", w->index, i);
        int32_t submitted = -1;
        if (appnorth_queue_submit_comment(w->queue, w->client, w->idea, body, NULL, &submitted, NULL) != APPNORTH_OK ||
            submitted != 0)
            w->failures++;
    }
    return NULL;
}

static void *flush_once(void *arg) {
    worker *w = arg;
    if (appnorth_queue_flush(w->queue, w->client, &w->sent, NULL) != APPNORTH_OK) w->failures++;
    return NULL;
}

static void test_concurrent_submits_and_flushes(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    worker w[4];
    pthread_t t[4];

    go_offline();
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){q, c, idea, i, 0, 0};
        pthread_create(&t[i], NULL, submit_five, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    go_online();
    CHECK(w[0].failures + w[1].failures + w[2].failures + w[3].failures == 0, "every concurrent submit queued");
    CHECK(pending(q) == 20, "20 pending: %d", pending(q));

    clear_request_log();
    for (int i = 0; i < 2; i++) {
        w[i] = (worker){q, c, idea, i, 0, 0};
        pthread_create(&t[i], NULL, flush_once, &w[i]);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(w[0].failures + w[1].failures == 0, "both flushes succeeded");
    CHECK(w[0].sent + w[1].sent == 20, "20 sent between two flushes: %d + %d", w[0].sent, w[1].sent);
    CHECK(pending(q) == 0, "none pending");
    json_t *posts = logged_requests("POST", "/comments");
    CHECK(json_array_size(posts) == 20, "no entry sent twice: %zu requests", json_array_size(posts));
    json_decref(posts);
    CHECK(stored("comments") == 20, "20 comments");
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(idea);
}

/* A flush waiting for the network does not block other calls on the queue. */
static void test_flush_waiting_on_the_network_does_not_block_the_queue(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = client_with_timeouts(server, APP, 60000, 60000); /* outlasts the hold */
    appnorth_queue *q = memory_queue(0);
    queue_offline_comment(q, c, idea, "slow", NULL);
    add_fault("{\"delay_ms\":600000,\"count\":1}"); /* held until released */

    worker w = {q, c, idea, 0, 0, 0};
    pthread_t t;
    pthread_create(&t, NULL, flush_once, &w);
    CHECK(admin_wait_held(server, 1), "the flush's request is held at the server");
    int32_t count = pending(q); /* answered while the flush waits for the network */
    CHECK(count == 1, "still pending while in flight: %d", count);
    admin_release(server);
    pthread_join(t, NULL);
    CHECK(w.sent == 1 && pending(q) == 0, "then sent");
    go_online();
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(idea);
}

int main(void) {
    server = test_start("test_offline", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);

    RUN(test_verify1_offline_comment_is_queued);
    RUN(test_verify2_reconnect_flush_sends_once);
    RUN(test_verify3_switched_account_does_not_send_old_entry);
    RUN(test_verify4_cache_ttl_and_logout);
    RUN(test_only_network_failures_queue);
    RUN(test_queue_limit);
    RUN(test_flush_stops_on_network_failure_keeping_the_rest);
    RUN(test_flush_error_is_returned_and_leaves_the_entry_pending);
    RUN(test_poison_entry_is_named_and_discarded_alone);
    RUN(test_flush_replays_the_original_idempotency_key);
    RUN(test_flush_after_the_write_was_applied_makes_no_duplicate);
    RUN(test_discard_per_scope_and_all);
    RUN(test_entries_json);
    RUN(test_queued_idea_and_feedback_replay_intact);
    RUN(test_concurrent_submits_and_flushes);
    RUN(test_flush_waiting_on_the_network_does_not_block_the_queue);

    curl_global_cleanup();
    return check_summary();
}
