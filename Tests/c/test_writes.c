/* Community writes (ideas, comments, feedback, votes, chat) sent directly:
 * idempotency keys, bad and oversize input refused before anything is
 * sent. Fixtures and the story rules: offline_support.h. */
#include "offline_support.h"

/* ---- community writes ---------------------------------------------------- */

static void test_client_writes_idea_and_comment_reach_the_server(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    char *text = NULL;

    CHECK_STATUS(appnorth_client_submit_idea(c, board, "Offline sync", "Keep working on the train",
                                             "idea-key-1", &text, &err), APPNORTH_OK, err);
    json_t *reply = take_json(text);
    json_t *new_idea = json_object_get(reply, "idea");
    CHECK(str_eq(json_string_value(json_object_get(new_idea, "title")), "Offline sync"), "idea echoed");
    CHECK(str_eq(json_string_value(json_object_get(new_idea, "status")), "open"), "new idea is open");
    CHECK(str_eq(json_string_value(json_object_get(new_idea, "author")), "anonymous"), "anonymous author");
    json_decref(reply);
    /* body may be NULL, and out_json may be NULL when the answer is not wanted */
    CHECK_STATUS(appnorth_client_submit_idea(c, board, "No body", NULL, NULL, NULL, &err), APPNORTH_OK, err);

    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "Yes please", NULL, &text, &err), APPNORTH_OK, err);
    reply = take_json(text);
    CHECK(str_eq(json_string_value(json_object_get(json_object_get(reply, "comment"), "body")), "Yes please"),
          "comment echoed");
    json_decref(reply);

    CHECK_STATUS(appnorth_client_list_comments(c, idea, &text, &err), APPNORTH_OK, err);
    reply = take_json(text);
    json_t *comments = json_object_get(reply, "comments");
    CHECK(json_array_size(comments) == 1 && str_eq(str_at(comments, 0, "body"), "Yes please"),
          "list_comments shows the comment");
    json_decref(reply);
    CHECK_STATUS(appnorth_client_list_comments(c, "i_999999", &text, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK(text == NULL, "no output on failure");

    json_t *state = server_state();
    json_t *ideas = json_object_get(state, "ideas");
    CHECK(json_array_size(ideas) == 3, "server has 3 ideas: %zu", json_array_size(ideas));
    CHECK(str_eq(str_at(ideas, 1, "body"), "Keep working on the train"), "idea body stored");
    CHECK(str_eq(str_at(ideas, 2, "body"), ""), "NULL body stored as empty");
    CHECK(json_array_size(json_object_get(state, "comments")) == 1, "server has 1 comment");
    json_decref(state);

    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_feedback_keeps_diagnostics_verbatim_and_screenshot_bytes(void) {
    admin_reset(server);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *c = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_error err;
    const char *diagnostics =
        "{\"fps\":59.94,\"scale\":1.0,\"exp\":1e2,\"build\":\"1.50\",\"gpu\":{\"name\":\"Mali\",\"ids\":[1,2,3]},"
        "\"note\":\"caf\\u00e9 \xe2\x9c\x93\"}";

    appnorth_feedback *fb = appnorth_feedback_new();
    CHECK(fb != NULL, "feedback object");
    CHECK_STATUS(appnorth_feedback_set_text(fb, "It crashed on save", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, "{\"fps\":", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, "[1,2]", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, diagnostics, &err), APPNORTH_OK, err);

    /* Screenshots are bytes, not strings: include NULs. */
    static unsigned char png[1000], jpeg[3000];
    const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memcpy(png, sig, sizeof sig);
    for (size_t i = 8; i < sizeof png; i++) png[i] = (unsigned char)(i % 7 == 0 ? 0 : i);
    jpeg[0] = 0xff, jpeg[1] = 0xd8;
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, png, sizeof png, "image/png", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, jpeg, sizeof jpeg, "image/jpeg", &err), APPNORTH_OK, err);

    /* Refused screenshots are not attached. */
    size_t big = (size_t)APPNORTH_MAX_SCREENSHOT_BYTES + 1;
    unsigned char *oversize = calloc(1, big);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, oversize, big, "image/png", &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, png, sizeof png, "image/gif", &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, png, 0, "image/png", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, NULL, 10, "image/png", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, png, sizeof png, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);

    char *text = NULL;
    CHECK_STATUS(appnorth_client_submit_feedback(c, fb, "fb-1", &text, &err), APPNORTH_OK, err);
    json_t *reply = take_json(text);
    CHECK(json_integer_value(json_object_get(json_object_get(reply, "feedback"), "screenshot_count")) == 2,
          "answer counts 2 screenshots");
    json_decref(reply);

    json_t *state = server_state();
    json_t *stored_fb = json_array_get(json_object_get(state, "feedback"), 0);
    json_t *want = json_loads(diagnostics, 0, NULL);
    json_t *got = json_object_get(stored_fb, "diagnostics");
    CHECK(want && json_equal(want, got), "diagnostics stored exactly (number kinds kept: 1.0 and 1e2 stay reals)");
    CHECK(json_is_real(json_object_get(got, "fps")) && json_real_value(json_object_get(got, "fps")) == 59.94,
          "fps 59.94");
    CHECK(json_is_real(json_object_get(got, "scale")), "1.0 was not rewritten as an integer");
    json_decref(want);
    CHECK(str_eq(json_string_value(json_object_get(stored_fb, "text")), "It crashed on save"), "text stored");
    CHECK(str_eq(json_string_value(json_object_get(stored_fb, "author")), ADA), "author is the identity");
    json_t *shots = json_object_get(stored_fb, "screenshots");
    CHECK(json_array_size(shots) == 2, "2 screenshots stored");
    CHECK(str_eq(str_at(shots, 0, "content_type"), "image/png") &&
          json_integer_value(json_object_get(json_array_get(shots, 0), "size")) == (json_int_t)sizeof png,
          "png stored with all %zu bytes", sizeof png);
    CHECK(str_eq(str_at(shots, 1, "content_type"), "image/jpeg") &&
          json_integer_value(json_object_get(json_array_get(shots, 1), "size")) == (json_int_t)sizeof jpeg,
          "jpeg stored with all %zu bytes", sizeof jpeg);
    json_decref(state);

    /* At most five screenshots; exactly 2 MiB is allowed. */
    appnorth_feedback *many = appnorth_feedback_new();
    CHECK_STATUS(appnorth_feedback_add_screenshot(many, oversize, big - 1, "image/png", &err), APPNORTH_OK, err);
    for (int i = 1; i < APPNORTH_MAX_SCREENSHOTS; i++)
        CHECK_STATUS(appnorth_feedback_add_screenshot(many, png, sizeof png, "image/png", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(many, png, sizeof png, "image/png", &err), APPNORTH_E_TOO_LARGE, err);
    appnorth_feedback_free(many);
    free(oversize);

    /* Feedback without text is refused before sending. */
    appnorth_feedback *empty = appnorth_feedback_new();
    clear_request_log();
    CHECK_STATUS(appnorth_client_submit_feedback(c, empty, NULL, NULL, &err), APPNORTH_E_VALIDATION, err);
    json_t *sent = logged_requests(NULL, NULL);
    CHECK(json_array_size(sent) == 0, "nothing sent for empty feedback: %zu", json_array_size(sent));
    json_decref(sent);
    appnorth_feedback_free(empty);
    CHECK(stored("feedback") == 1, "still one feedback");

    appnorth_feedback_free(fb);
    appnorth_client_free(c);
}

static void test_second_vote_is_a_conflict(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *c = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_error err;
    char *text = NULL;

    CHECK_STATUS(appnorth_client_vote(c, idea, "vote-1", &text, &err), APPNORTH_OK, err);
    json_t *reply = take_json(text);
    CHECK(json_integer_value(json_object_get(json_object_get(reply, "vote"), "votes")) == 1, "one vote");
    json_decref(reply);
    /* The same key replays the first answer: not a second vote. */
    CHECK_STATUS(appnorth_client_vote(c, idea, "vote-1", NULL, &err), APPNORTH_OK, err);
    /* A new key is a second vote by the same identity. */
    CHECK_STATUS(appnorth_client_vote(c, idea, NULL, &text, &err), APPNORTH_E_CONFLICT, err);
    CHECK(err.http_status == 409, "HTTP 409: %d", err.http_status);
    CHECK(text == NULL, "no output on failure");
    CHECK_STATUS(appnorth_client_vote(c, "i_999999", NULL, NULL, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK_STATUS(appnorth_client_vote(c, NULL, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);

    json_t *state = server_state();
    json_t *votes = json_object_get(state, "votes");
    CHECK(json_array_size(votes) == 1 && str_eq(str_at(votes, 0, "identity"), ADA), "one vote stored, by ada");
    json_decref(state);
    appnorth_client_free(c);
    free(idea);
}

static void test_chat_send_and_list(void) {
    admin_reset(server);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_client *anon = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    char *text = NULL;

    CHECK_STATUS(appnorth_client_send_chat_message(ada, "Hello", NULL, &text, &err), APPNORTH_OK, err);
    json_t *reply = take_json(text);
    CHECK(str_eq(json_string_value(json_object_get(json_object_get(reply, "message"), "body")), "Hello"), "echo");
    json_decref(reply);
    CHECK_STATUS(appnorth_client_send_chat_message(ada, "Are you there?", "chat-2", NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_send_chat_message(anon, "Anonymous hi", NULL, NULL, &err), APPNORTH_OK, err);

    CHECK_STATUS(appnorth_client_list_chat_messages(ada, &text, &err), APPNORTH_OK, err);
    reply = take_json(text);
    json_t *messages = json_object_get(reply, "messages");
    CHECK(json_array_size(messages) == 2 && str_eq(str_at(messages, 0, "body"), "Hello") &&
          str_eq(str_at(messages, 1, "body"), "Are you there?"), "ada sees her 2 messages in order");
    json_decref(reply);
    CHECK_STATUS(appnorth_client_list_chat_messages(anon, &text, &err), APPNORTH_OK, err);
    reply = take_json(text);
    CHECK(json_array_size(json_object_get(reply, "messages")) == 1, "anonymous sees 1");
    json_decref(reply);

    char body[4002];
    memset(body, 'x', 4001);
    body[4001] = 0;
    CHECK_STATUS(appnorth_client_send_chat_message(ada, body, NULL, NULL, &err), APPNORTH_E_TOO_LARGE, err);
    body[4000] = 0;
    CHECK_STATUS(appnorth_client_send_chat_message(ada, body, NULL, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_send_chat_message(ada, " \n ", NULL, NULL, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_client_send_chat_message(ada, "\xc0\xaf", NULL, NULL, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK(stored("messages") == 4, "server has 4 messages: %zu", stored("messages"));
    appnorth_client_free(ada);
    appnorth_client_free(anon);
}

static void test_same_idempotency_key_applies_once(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    char *first = NULL, *second = NULL;

    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "Only once", "same-key", &first, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "Only once", "same-key", &second, &err), APPNORTH_OK, err);
    json_t *a = take_json(first), *b = take_json(second);
    CHECK(a && json_equal(a, b), "the retry replays the first answer");
    json_decref(a);
    json_decref(b);
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 1, "one server comment: %zu", json_array_size(comments));
    json_decref(comments);

    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "A different body", "same-key", NULL, &err),
                 APPNORTH_E_CONFLICT, err);
    CHECK(err.http_status == 409, "HTTP 409: %d", err.http_status);
    comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 1 && str_eq(str_at(comments, 0, "body"), "Only once"),
          "still one comment, the first body");
    json_decref(comments);
    appnorth_client_free(c);
    free(idea);
}

static void test_idempotency_key_rules(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    char key[300];

    memset(key, 'k', 255);
    key[255] = 0;
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "255-char key", key, NULL, &err), APPNORTH_OK, err);
    /* The header allows 1 to 255 printable ASCII characters; the protocol
     * spells that 0x20-0x7E, so an interior space is a valid key. */
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "key with a space", "retry key 1", NULL, &err),
                 APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "symbols", "a:b/c?d=e~!", NULL, &err), APPNORTH_OK, err);

    clear_request_log();
    key[255] = 'k';
    key[256] = 0;
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "256", key, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "empty", "", NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "ctl", "bad\x01key", NULL, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "non-ascii", "cl\xc3\xa9", NULL, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    json_t *sent = logged_requests(NULL, NULL);
    CHECK(json_array_size(sent) == 0, "bad keys are refused before sending: %zu sent", json_array_size(sent));
    json_decref(sent);

    /* A NULL key makes a fresh one per call: two calls, two comments. */
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "twice", NULL, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "twice", NULL, NULL, &err), APPNORTH_OK, err);
    sent = logged_requests("POST", "/comments");
    const char *k1 = logged_header(json_array_get(sent, 0), "Idempotency-Key");
    const char *k2 = logged_header(json_array_get(sent, 1), "Idempotency-Key");
    CHECK(k1 && k2 && *k1 && strcmp(k1, k2) != 0, "generated keys differ: %s %s", k1 ? k1 : "-", k2 ? k2 : "-");
    json_decref(sent);
    appnorth_client_free(c);
    free(idea);
}

/* Bad input is refused before anything is sent, and never queued. */
static void test_bad_input_queues_and_sends_nothing(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_feedback *fb = appnorth_feedback_new();
    appnorth_error err;
    int32_t submitted = -1;
    char long_text[10002];
    memset(long_text, 'a', 10001);
    long_text[10001] = 0;
    char long_title[202];
    memset(long_title, 't', 201);
    long_title[201] = 0;
    clear_request_log();

    /* NULL arguments */
    CHECK_STATUS(appnorth_queue_submit_comment(NULL, c, idea, "x", NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(strstr(err.message, "queue") != NULL, "message names the argument: %s", err.message);
    CHECK_STATUS(appnorth_queue_submit_comment(q, NULL, idea, "x", NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, NULL, "x", NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, NULL, NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, NULL, "t", NULL, NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, NULL, NULL, NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_submit_feedback(q, c, NULL, NULL, &submitted, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_comment(NULL, idea, "x", NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, NULL, "x", NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, NULL, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_idea(c, board, NULL, NULL, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_submit_feedback(c, NULL, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_list_comments(c, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(appnorth_queue_flush(NULL, c, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "flush NULL queue");
    CHECK(appnorth_queue_flush(q, NULL, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "flush NULL client");
    CHECK(appnorth_queue_pending_count(q, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "pending NULL out");
    CHECK(pending(q) == 0, "nothing queued after NULL arguments");

    /* Empty and whitespace-only text */
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "", NULL, &submitted, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, " \t\r\n ", NULL, &submitted, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "   ", "body", NULL, &submitted, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_queue_submit_feedback(q, c, fb, NULL, &submitted, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_feedback_set_text(fb, "\n\n", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_feedback(q, c, fb, NULL, &submitted, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "  ", NULL, NULL, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_client_submit_idea(c, board, "", NULL, NULL, NULL, &err), APPNORTH_E_VALIDATION, err);
    CHECK(pending(q) == 0, "nothing queued after empty text");

    /* Invalid UTF-8: truncated sequence, stray byte, overlong, surrogate */
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "caf\xc3", NULL, &submitted, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "\xff ok", NULL, &submitted, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "\xc0\xaf", NULL, &submitted, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "\xed\xa0\x80", NULL, NULL, &submitted, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, "i_\xfe", "fine", NULL, &submitted, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_client_submit_comment(c, idea, "\x80", NULL, NULL, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_feedback_set_text(fb, "bad \xff", &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK(pending(q) == 0, "nothing queued after invalid UTF-8");

    /* Oversize text */
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, long_text, NULL, &submitted, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, long_title, NULL, NULL, &submitted, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "ok", long_text, NULL, &submitted, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK(pending(q) == 0, "nothing queued after oversize text");

    json_t *sent = logged_requests(NULL, NULL);
    CHECK(json_array_size(sent) == 0, "no request reached the server: %zu", json_array_size(sent));
    json_decref(sent);

    /* While offline, bad input is still refused, not queued. */
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "", NULL, &submitted, &err), APPNORTH_E_VALIDATION, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "\xff", NULL, &submitted, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "ok", "bad\x01key", &submitted, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    go_online();
    CHECK(pending(q) == 0, "nothing queued while offline either");
    sent = logged_requests(NULL, NULL);
    CHECK(json_array_size(sent) == 0, "nothing sent while offline: %zu", json_array_size(sent));
    json_decref(sent);

    /* An unknown idea is the server's answer: returned, not queued. */
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, "i_999999", "hello", NULL, &submitted, &err),
                 APPNORTH_E_NOT_FOUND, err);
    CHECK(err.http_status == 404, "HTTP 404: %d", err.http_status);
    CHECK_STATUS(appnorth_client_submit_comment(c, "i_999999", "hello", NULL, NULL, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, "b_999999", "On no board", NULL, NULL, &submitted, &err),
                 APPNORTH_E_NOT_FOUND, err);
    CHECK(pending(q) == 0, "not found is not queued");
    sent = logged_requests("POST", NULL);
    CHECK(json_array_size(sent) == 3, "three requests answered 404: %zu", json_array_size(sent));
    json_decref(sent);
    CHECK(stored("comments") == 0 && stored("ideas") == 1, "the server stored nothing");

    appnorth_feedback_free(fb);
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_free_null_is_harmless(void) {
    appnorth_queue_free(NULL);
    appnorth_cache_free(NULL);
    appnorth_storage_free(NULL);
    appnorth_clock_free(NULL);
    appnorth_feedback_free(NULL);
    appnorth_error err;
    CHECK_STATUS(appnorth_clock_new_manual(0, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_storage_new_memory(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_queue_new(NULL, 0, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(appnorth_queue_pending_count(NULL, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "pending NULL");
}

/* Oversize values are refused by their setters, so nothing oversize can
 * reach the queue (50 MB of diagnostics queued offline once grew the
 * database by over 100 MB). */
static void test_oversize_values_are_refused_at_the_door(void) {
    admin_reset(server);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    appnorth_error err;

    appnorth_feedback *fb = appnorth_feedback_new();
    CHECK_STATUS(appnorth_feedback_set_text(fb, "Kept text", &err), APPNORTH_OK, err);
    size_t n = APPNORTH_MAX_FEEDBACK_TEXT_CHARS + 1;
    char *text = malloc(n + 1);
    memset(text, 'a', n);
    text[n] = 0;
    CHECK_STATUS(appnorth_feedback_set_text(fb, text, &err), APPNORTH_E_TOO_LARGE, err);
    text[n - 1] = 0; /* exactly the limit */
    CHECK_STATUS(appnorth_feedback_set_text(fb, text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_feedback_set_text(fb, "Kept text", &err), APPNORTH_OK, err);
    free(text);

    /* Diagnostics: a valid object one byte over the limit, and 50 MB. */
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, "{\"kept\":true}", &err), APPNORTH_OK, err);
    size_t huge = 50u * 1024 * 1024;
    char *diag = malloc(huge + 1);
    size_t len = APPNORTH_MAX_DIAGNOSTICS_BYTES + 1;
    memset(diag, 'x', huge);
    memcpy(diag, "{\"log\":\"", 8);
    memcpy(diag + len - 2, "\"}", 3);
    CHECK(strlen(diag) == len, "one byte over");
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, diag, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK(strstr(err.message, "diagnostics") != NULL, "message names diagnostics: %s", err.message);
    memcpy(diag + len - 3, "\"}", 3); /* exactly the limit */
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, diag, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, "{\"kept\":true}", &err), APPNORTH_OK, err);
    memset(diag + len - 3, 'x', 3);
    memcpy(diag + huge - 2, "\"}", 3);
    CHECK_STATUS(appnorth_feedback_set_diagnostics(fb, diag, &err), APPNORTH_E_TOO_LARGE, err);
    free(diag);

    /* A failed read()'s -1 passed as the length. */
    unsigned char png[16] = {0x89, 'P', 'N', 'G'};
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, png, SIZE_MAX, "image/png", &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(fb, png, (size_t)APPNORTH_MAX_SCREENSHOT_BYTES + 1, "image/png", &err),
                 APPNORTH_E_TOO_LARGE, err);

    /* Offline, what is queued is what the setters kept: small. */
    go_offline();
    int32_t submitted = -1;
    CHECK_STATUS(appnorth_queue_submit_feedback(q, c, fb, "fb-door", &submitted, &err), APPNORTH_OK, err);
    go_online();
    CHECK(submitted == 0 && pending(q) == 1, "queued offline");
    char *entries = NULL;
    CHECK_STATUS(appnorth_queue_entries(q, &entries, &err), APPNORTH_OK, err);
    CHECK(entries && strlen(entries) < 4096, "the queued entry is small: %zu bytes", entries ? strlen(entries) : 0);
    appnorth_string_free(entries);
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    json_t *state = server_state();
    json_t *stored = json_array_get(json_object_get(state, "feedback"), 0);
    CHECK(str_eq(json_string_value(json_object_get(stored, "text")), "Kept text"), "the kept text was sent");
    CHECK(json_is_true(json_object_get(json_object_get(stored, "diagnostics"), "kept")), "the kept diagnostics were sent");
    json_decref(state);
    appnorth_feedback_free(fb);
    appnorth_queue_free(q);
    appnorth_client_free(c);

    /* The API URL. */
    appnorth_client_options *options = appnorth_client_options_new();
    char *url = malloc(APPNORTH_MAX_URL_BYTES + 2);
    memset(url, 'p', APPNORTH_MAX_URL_BYTES + 1);
    memcpy(url, "http://h/", 9);
    url[APPNORTH_MAX_URL_BYTES + 1] = 0;
    CHECK_STATUS(appnorth_client_options_set_api_url(options, url, &err), APPNORTH_E_TOO_LARGE, err);
    url[APPNORTH_MAX_URL_BYTES] = 0;
    CHECK_STATUS(appnorth_client_options_set_api_url(options, url, &err), APPNORTH_OK, err);
    free(url);
    appnorth_client_options_free(options);
}

int main(void) {
    server = test_start("test_writes", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);

    RUN(test_free_null_is_harmless);
    RUN(test_client_writes_idea_and_comment_reach_the_server);
    RUN(test_feedback_keeps_diagnostics_verbatim_and_screenshot_bytes);
    RUN(test_second_vote_is_a_conflict);
    RUN(test_chat_send_and_list);
    RUN(test_same_idempotency_key_applies_once);
    RUN(test_idempotency_key_rules);
    RUN(test_bad_input_queues_and_sends_nothing);
    RUN(test_oversize_values_are_refused_at_the_door);

    curl_global_cleanup();
    return check_summary();
}
