/* Community writes, the offline write queue and the read cache, through the
 * real libappnorth.so, against the local API server ($APPNORTH_TEST_SERVER).
 *
 * Every test is a story: reset and arrange the server through /admin, act
 * through the public C API, then assert on what the server stored (admin
 * state, request log), not only on what the library answered.
 *
 * Being offline is made real with the server's drop fault: the request is
 * read and its connection closed without an answer, which is a network
 * failure for the live server's URL. Queued entries therefore carry the
 * same scope as the client that later flushes them ("reconnect" = clear the
 * faults). Time moves with a manual clock; nothing sleeps for a TTL. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <dirent.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "support.h"

#define APP "tapp"
#define ADA "ada@example.com"
#define ADA_TOKEN "tok-ada-7f3e9c"
#define BOB "bob@example.com"
#define BOB_TOKEN "tok-bob-21aa04"
#define WALL_START 1700000000000LL

static const char *server;

/* ---- arranging and inspecting the server ---------------------------------- */


static void add_user(const char *email, const char *token) {
    char body[512];
    snprintf(body, sizeof body, "{\"app\":\"%s\",\"email\":\"%s\",\"token\":\"%s\"}", APP, email, token);
    long status = admin_request(server, "POST", "/admin/users", body, NULL);
    CHECK(status == 201, "register %s: HTTP %ld", email, status);
}

/* Creates an open idea on a board; returns its id (caller frees). */
static char *seed_idea(const char *board_id, const char *title) {
    char body[512];
    snprintf(body, sizeof body,
             "{\"board_id\":\"%s\",\"title\":\"%s\",\"body\":\"about %s\",\"status\":\"open\"}",
             board_id ? board_id : "", title, title);
    json_t *reply = NULL;
    admin_request(server, "POST", "/admin/apps/" APP "/ideas", body, &reply);
    const char *id = json_string_value(json_object_get(json_object_get(reply, "idea"), "id"));
    char *copy = id ? strdup(id) : NULL;
    json_decref(reply);
    CHECK(copy != NULL, "idea '%s' seeded", title);
    return copy;
}

/* A board "Features" with one idea; returns the idea id, and the board id
 * through out_board when wanted (caller frees both). */
static char *seed_board_and_idea(char **out_board) {
    char *board = admin_board(server, APP, "Features");
    CHECK(board != NULL, "board seeded");
    char *idea = seed_idea(board, "Dark mode");
    if (out_board) *out_board = board;
    else free(board);
    return idea;
}

static json_t *server_state(void) {
    json_t *state = NULL;
    long status = admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &state);
    CHECK(status == 200 && state, "admin state: HTTP %ld", status);
    return state;
}

/* How many objects of a kind ("comments", "ideas", "feedback", ...) the
 * server stored for the app. */
static size_t stored(const char *member) {
    json_t *state = server_state();
    size_t n = json_array_size(json_object_get(state, member));
    json_decref(state);
    return n;
}

/* The comments the server stored for one idea, oldest first (new ref). */
static json_t *stored_comments(const char *idea_id) {
    json_t *state = server_state();
    json_t *out = json_array();
    size_t i;
    json_t *comment;
    json_array_foreach(json_object_get(state, "comments"), i, comment) {
        const char *of = json_string_value(json_object_get(comment, "idea_id"));
        if (of && idea_id && strcmp(of, idea_id) == 0) json_array_append(out, comment);
    }
    json_decref(state);
    return out;
}

static const char *str_at(json_t *array, size_t index, const char *key) {
    return json_string_value(json_object_get(json_array_get(array, index), key));
}

static int str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

static void clear_request_log(void) {
    admin_request(server, "DELETE", "/admin/requests", NULL, NULL);
}

/* The logged API requests since the last clear with this method (NULL: any)
 * whose path ends with `suffix` (NULL: any path). New reference. */
static json_t *logged_requests(const char *method, const char *suffix) {
    json_t *reply = NULL;
    admin_request(server, "GET", "/admin/requests", NULL, &reply);
    json_t *out = json_array();
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(reply, "requests"), i, entry) {
        const char *m = json_string_value(json_object_get(entry, "method"));
        const char *p = json_string_value(json_object_get(entry, "path"));
        if (method && !str_eq(m, method)) continue;
        if (suffix) {
            size_t pl = p ? strlen(p) : 0, sl = strlen(suffix);
            if (pl < sl || strcmp(p + pl - sl, suffix) != 0) continue;
        }
        json_array_append(out, entry);
    }
    json_decref(reply);
    return out;
}

static const char *logged_header(json_t *entry, const char *name) {
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(entry, "headers"), key, value) {
        if (strcasecmp(key, name) == 0) return json_string_value(value);
    }
    return NULL;
}

/* "Disable connectivity": every API request is read, then its connection is
 * closed with no answer, a network failure. "Reconnect" clears the faults. */
static void go_offline(void) {
    long status = admin_request(server, "POST", "/admin/faults", "{\"drop\":true,\"count\":1000}", NULL);
    CHECK(status == 201, "drop fault: HTTP %ld", status);
}

static void go_online(void) {
    admin_request(server, "DELETE", "/admin/faults", NULL, NULL);
}

static void add_fault(const char *spec) {
    long status = admin_request(server, "POST", "/admin/faults", spec, NULL);
    CHECK(status == 201, "fault %s: HTTP %ld", spec, status);
}

/* ---- library helpers --------------------------------------------------- */

static int32_t pending(appnorth_queue *queue) {
    appnorth_error err;
    int32_t count = -1;
    CHECK_STATUS(appnorth_queue_pending_count(queue, &count, &err), APPNORTH_OK, err);
    return count;
}

/* A queue on its own memory storage (the queue keeps the storage alive). */
static appnorth_queue *memory_queue(int32_t max_entries) {
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_queue *queue = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, max_entries, &queue, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    return queue;
}

static char *scope_of(appnorth_client *client) {
    appnorth_error err;
    char *scope = NULL;
    CHECK_STATUS(appnorth_client_scope(client, &scope, &err), APPNORTH_OK, err);
    return scope;
}

/* Submits a comment through the queue while the server drops connections;
 * expects it to be queued. */
static void queue_offline_comment(appnorth_queue *queue, appnorth_client *client, const char *idea,
                                  const char *body, const char *key) {
    appnorth_error err;
    int32_t submitted = -1;
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_comment(queue, client, idea, body, key, &submitted, &err),
                 APPNORTH_OK, err);
    CHECK(submitted == 0, "'%s' queued, not submitted: %d", body, submitted);
    go_online();
}

static json_t *parse(const char *text) {
    return text ? json_loads(text, 0, NULL) : NULL;
}

/* Takes a returned string, parses it and frees it. */
static json_t *take_json(char *text) {
    json_t *value = parse(text);
    appnorth_string_free(text);
    return value;
}

static json_t *queue_entries(appnorth_queue *queue) {
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_queue_entries(queue, &text, &err), APPNORTH_OK, err);
    json_t *entries = take_json(text);
    CHECK(json_is_array(entries), "entries is an array");
    return entries;
}


/* Whether any regular file in `dir` contains `needle`. */
static int dir_contains(const char *dir, const char *needle) {
    int found = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char *data = malloc((size_t)st.st_size + 1);
        size_t n = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
        if (data && memmem(data, n, needle, strlen(needle))) found = 1;
        free(data);
        fclose(f);
    }
    closedir(d);
    return found;
}

/* Host storage through callbacks: a blob in memory, with counters and
 * switches the tests drive. */
typedef struct {
    unsigned char *bytes;
    size_t len;
    int has;
    int loads, saves, releases;
    int fail_load, fail_save;
    const char *secret;      /* must never appear in a saved blob */
    int secret_saved;
    pthread_t caller;        /* the thread the callbacks must run on */
    int wrong_thread;
    appnorth_queue *reenter; /* a queue the next save calls back into */
    int32_t reenter_rc;
} host_store;

static void host_store_init(host_store *s) {
    memset(s, 0, sizeof *s);
    s->caller = pthread_self();
    s->reenter_rc = -1;
}

static void host_store_set(host_store *s, const void *bytes, size_t len) {
    free(s->bytes);
    s->bytes = NULL;
    s->len = 0;
    s->has = 0;
    if (bytes) {
        s->bytes = malloc(len ? len : 1);
        memcpy(s->bytes, bytes, len);
        s->len = len;
        s->has = 1;
    }
}

static int32_t host_load(void *user_data, appnorth_buffer *out) {
    host_store *s = user_data;
    s->loads++;
    if (!pthread_equal(pthread_self(), s->caller)) s->wrong_thread = 1;
    if (s->fail_load) return 5;
    if (s->has) return appnorth_buffer_set(out, s->bytes, s->len, NULL);
    return 0;
}

static int32_t host_save(void *user_data, const void *bytes, size_t length) {
    host_store *s = user_data;
    s->saves++;
    if (!pthread_equal(pthread_self(), s->caller)) s->wrong_thread = 1;
    if (s->reenter) {
        appnorth_queue *q = s->reenter;
        s->reenter = NULL;
        s->reenter_rc = appnorth_queue_discard(q, NULL, NULL, NULL);
    }
    if (s->fail_save) return 7;
    if (bytes && s->secret && memmem(bytes, length, s->secret, strlen(s->secret))) s->secret_saved = 1;
    host_store_set(s, bytes, length);
    return 0;
}

static void host_release(void *user_data) {
    ((host_store *)user_data)->releases++;
}

/* Collects the deliveries of appnorth_read_boards / appnorth_read_ideas. */
typedef struct {
    int calls;
    int32_t sources[4];
    json_t *values[4];
} deliveries;

static void on_read(int32_t source, const char *json, void *user_data) {
    deliveries *d = user_data;
    if (d->calls < 4) {
        d->sources[d->calls] = source;
        d->values[d->calls] = json_loads(json, 0, NULL);
    }
    d->calls++;
}

static void deliveries_reset(deliveries *d) {
    for (int i = 0; i < 4; i++) json_decref(d->values[i]);
    memset(d, 0, sizeof *d);
}

/* The ideas in a list response (borrowed from `page`). */
static size_t count_of(json_t *value) { return json_is_array(value) ? json_array_size(value) : (size_t)-1; }

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

/* Issue 10: two queue handles on one SQLite storage name (as two worker
 * processes have) keep every queued write. */
static void test_two_sqlite_queues_on_one_name_lose_nothing(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    char *dir = make_temp_dir("shared-queue");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    appnorth_queue *queues[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        appnorth_storage *storage = NULL;
        CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &storage, &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_queue_new(storage, 0, &queues[i], &err), APPNORTH_OK, err);
        appnorth_storage_free(storage);
    }
    go_offline();
    for (int n = 0; n < 5; n++) {
        for (int i = 0; i < 2; i++) {
            char body[32];
            snprintf(body, sizeof body, "q%d-%d", i, n);
            int32_t submitted = -1;
            CHECK_STATUS(appnorth_queue_submit_comment(queues[i], c, idea, body, NULL, &submitted, &err),
                         APPNORTH_OK, err);
        }
    }
    go_online();
    CHECK(pending(queues[0]) == 10 && pending(queues[1]) == 10, "both see all 10: %d %d",
          pending(queues[0]), pending(queues[1]));
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(queues[1], c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 10 && pending(queues[0]) == 0, "one flush sends all: %d", sent);
    CHECK(stored("comments") == 10, "ten comments stored");
    appnorth_queue_free(queues[0]);
    appnorth_queue_free(queues[1]);
    appnorth_client_free(c);
    remove_tree(dir);
    free(idea);
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

static void test_entries_persist_across_reopening(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    char *base = make_temp_dir("offline");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/data/sdk", base ? base : "/tmp");
    appnorth_error err;
    mode_t old_umask = umask(0); /* the library must not rely on the umask */

    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    queue_offline_comment(q, ada, idea, "Survives a restart", "restart-1");
    CHECK(pending(q) == 1, "one pending");
    appnorth_queue_free(q);
    appnorth_storage_free(storage);
    umask(old_umask);

    struct stat st;
    CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
          "data dir is 0700: %o", (unsigned)(st.st_mode & 0777));
    int files = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        files++;
        CHECK((st.st_mode & 0777) == 0600, "%s is 0600: %o", e->d_name, (unsigned)(st.st_mode & 0777));
    }
    if (d) closedir(d);
    CHECK(files >= 1, "a database file exists");
    CHECK(!dir_contains(dir, ADA_TOKEN), "the token is not on disk");

    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    CHECK(pending(q) == 1, "still one pending after reopening");
    json_t *entries = queue_entries(q);
    CHECK(str_eq(str_at(entries, 0, "idempotency_key"), "restart-1"), "same entry");
    json_decref(entries);
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, ada, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 1 && pending(q) == 0, "sent after the restart: %d", sent);
    json_t *comments = stored_comments(idea);
    CHECK(json_array_size(comments) == 1 && str_eq(str_at(comments, 0, "body"), "Survives a restart"), "stored");
    json_decref(comments);
    appnorth_queue_free(q);

    /* Bad storage names and paths. */
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "has space", &storage, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(storage == NULL, "out_storage NULL on failure");
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "", &storage, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_storage_new_sqlite(NULL, "queue", &storage, &err), APPNORTH_E_INVALID_ARGUMENT, err);

    appnorth_client_free(ada);
    remove_tree(base);
    free(idea);
}

/* Erase on SQLite storage empties every queue on it (they read the stored
 * entries); a queue on memory storage keeps what it loaded until discarded. */
static void test_storage_erase_and_loaded_queues(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *dir = make_temp_dir("offline");
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    queue_offline_comment(q, c, idea, "Loaded", NULL);

    CHECK_STATUS(appnorth_storage_erase(storage, &err), APPNORTH_OK, err);
    CHECK(pending(q) == 0, "a queue on SQLite storage reads the erased store: %d", pending(q));
    appnorth_storage *again = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &again, &err), APPNORTH_OK, err);
    appnorth_queue *fresh = NULL;
    CHECK_STATUS(appnorth_queue_new(again, 0, &fresh, &err), APPNORTH_OK, err);
    CHECK(pending(fresh) == 0, "erased on disk");
    appnorth_queue_free(fresh);
    appnorth_storage_free(again);
    appnorth_queue_free(q);
    appnorth_storage_free(storage);

    /* Memory storage: the loaded queue keeps its entries; discarding is
     * what forgets them. */
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    queue_offline_comment(q, c, idea, "Loaded", NULL);
    CHECK_STATUS(appnorth_storage_erase(storage, &err), APPNORTH_OK, err);
    CHECK(pending(q) == 1, "erasing memory storage does not clear the loaded queue");
    int32_t discarded = -1;
    CHECK_STATUS(appnorth_queue_discard(q, NULL, &discarded, &err), APPNORTH_OK, err);
    CHECK(discarded == 1 && pending(q) == 0, "discarded %d", discarded);
    CHECK(appnorth_storage_erase(NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "erase NULL");
    appnorth_queue_free(q);
    appnorth_storage_free(storage);
    appnorth_client_free(c);
    remove_tree(dir);
    free(idea);
}

static void test_a_storage_serves_one_queue_or_one_cache(void) {
    appnorth_error err;
    appnorth_storage *s1 = NULL, *s2 = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&s1, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_storage_new_memory(&s2, &err), APPNORTH_OK, err);

    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(s1, 0, &q, &err), APPNORTH_OK, err);
    appnorth_cache *cache = (appnorth_cache *)1;
    CHECK_STATUS(appnorth_cache_new(s1, 0, NULL, &cache, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(cache == NULL, "out_cache NULL on failure");

    appnorth_cache *other = NULL;
    CHECK_STATUS(appnorth_cache_new(s2, 0, NULL, &other, &err), APPNORTH_OK, err);
    appnorth_queue *q2 = (appnorth_queue *)1;
    CHECK_STATUS(appnorth_queue_new(s2, 0, &q2, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(q2 == NULL, "out_queue NULL on failure");

    appnorth_cache_free(other);
    appnorth_queue_free(q);
    appnorth_storage_free(s1);
    appnorth_storage_free(s2);
}

typedef struct {
    int count;
    int32_t levels[8];
    char lines[8][512];
} log_capture;

static void capture_log(int32_t level, const char *message, void *user_data) {
    log_capture *c = user_data;
    if (c->count < 8) {
        c->levels[c->count] = level;
        snprintf(c->lines[c->count], sizeof c->lines[0], "%s", message);
    }
    c->count++;
}

/* Damaged stored entries are dropped with one warning naming what went
 * (never the content) through the storage's logger; a bad logger call is
 * refused. */
static void test_damaged_stored_entries_are_logged(void) {
    appnorth_error err;
    host_store hs;
    host_store_init(&hs);
    static const char queue_blob[] =
        "{\"format\":\"appnorth.offline-queue\",\"version\":1,\"entries\":["
        "{\"id\":\"good\",\"scope\":\"s\",\"kind\":\"feedback\",\"path\":\"/feedback\",\"body\":\"{}\","
        "\"idempotency_key\":\"k1\",\"created_ms\":1},"
        "{\"id\":\"torn\",\"scope\":\"s\",\"kind\":\"feedback\",\"path\":\"/feedback\",\"body\":\"private words\","
        "\"idempotency_key\":\"k2\",\"created_ms\":1}]}";
    host_store_set(&hs, queue_blob, sizeof queue_blob - 1);
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_callbacks(host_load, host_save, NULL, &hs, &storage, &err), APPNORTH_OK, err);
    log_capture logs = {0};
    CHECK_STATUS(appnorth_storage_set_logger(NULL, capture_log, APPNORTH_LOG_DEBUG, &logs, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_storage_set_logger(storage, capture_log, 99, &logs, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_storage_set_logger(storage, capture_log, APPNORTH_LOG_DEBUG, &logs, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    int32_t pending = -1;
    CHECK_STATUS(appnorth_queue_pending_count(q, &pending, &err), APPNORTH_OK, err);
    CHECK(pending == 1, "the sound entry stays: %d", pending);
    CHECK(logs.count == 1, "one log line: %d", logs.count);
    CHECK(logs.levels[0] == APPNORTH_LOG_WARNING, "a warning: %d", logs.levels[0]);
    CHECK(strstr(logs.lines[0], "offline queue: dropped 1 damaged stored entry (id torn)") != NULL, "names it: %s",
          logs.lines[0]);
    CHECK(strstr(logs.lines[0], "private") == NULL, "never the content: %s", logs.lines[0]);
    appnorth_queue_free(q);
    appnorth_storage_free(storage);
    free(hs.bytes);

    /* A cache whose blob is unreadable starts empty, and says so. */
    host_store cs;
    host_store_init(&cs);
    host_store_set(&cs, "{not json", 9);
    CHECK_STATUS(appnorth_storage_new_callbacks(host_load, host_save, NULL, &cs, &storage, &err), APPNORTH_OK, err);
    log_capture cache_logs = {0};
    CHECK_STATUS(appnorth_storage_set_logger(storage, capture_log, APPNORTH_LOG_WARNING, &cache_logs, &err),
                 APPNORTH_OK, err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 0, NULL, &cache, &err), APPNORTH_OK, err);
    CHECK(cache_logs.count == 1 && strstr(cache_logs.lines[0], "read cache: dropped the stored read cache") != NULL,
          "the dropped cache is logged: %d %s", cache_logs.count, cache_logs.lines[0]);
    appnorth_cache_free(cache);

    /* NULL fn turns it off for what opens next. */
    CHECK_STATUS(appnorth_storage_set_logger(storage, NULL, 99, NULL, &err), APPNORTH_OK, err);
    appnorth_cache *again = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 0, NULL, &again, &err), APPNORTH_OK, err);
    CHECK(cache_logs.count == 1, "no line once turned off: %d", cache_logs.count);
    appnorth_cache_free(again);
    appnorth_storage_free(storage);
    free(cs.bytes);
}

static void test_host_callback_storage(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_error err;
    host_store hs;
    host_store_init(&hs);
    appnorth_storage *storage = (appnorth_storage *)1;

    CHECK_STATUS(appnorth_storage_new_callbacks(NULL, host_save, NULL, &hs, &storage, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(storage == NULL, "out_storage NULL on failure");
    CHECK_STATUS(appnorth_storage_new_callbacks(host_load, NULL, NULL, &hs, &storage, &err),
                 APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_storage_new_callbacks(host_load, host_save, host_release, &hs, &storage, &err),
                 APPNORTH_OK, err);

    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    CHECK(hs.loads == 1, "loaded once at open: %d", hs.loads);
    queue_offline_comment(q, c, idea, "Through host storage", "host-1");
    CHECK(hs.saves >= 1 && hs.has && hs.len > 0, "saved through the callback: %d saves", hs.saves);

    /* Reopen: the load callback hands the blob back with appnorth_buffer_set. */
    appnorth_queue_free(q);
    CHECK(hs.releases == 0, "the storage is still alive");
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    CHECK(hs.loads == 2 && pending(q) == 1, "reloaded one entry (%d loads)", hs.loads);

    /* A failing save: the call fails, and nothing in memory is lost. */
    hs.fail_save = 1;
    int32_t submitted = -1;
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "Cannot be saved", NULL, &submitted, &err),
                 APPNORTH_E_STORAGE, err);
    go_online();
    CHECK(pending(q) == 1, "the earlier entry is kept, the unsaved one not counted: %d", pending(q));
    int32_t discarded = -1;
    CHECK_STATUS(appnorth_queue_discard(q, NULL, &discarded, &err), APPNORTH_E_STORAGE, err);
    CHECK(pending(q) == 1, "a discard that could not be saved keeps the entry");
    json_t *entries = queue_entries(q);
    CHECK(json_array_size(entries) == 1 && str_eq(str_at(entries, 0, "idempotency_key"), "host-1"), "entry intact");
    json_decref(entries);
    hs.fail_save = 0;

    /* A callback calling back into its own queue is refused, not a deadlock. */
    hs.reenter = q;
    queue_offline_comment(q, c, idea, "Second entry", "host-2");
    CHECK_STATUS(hs.reenter_rc, APPNORTH_E_WRONG_STATE, err);
    CHECK(pending(q) == 2, "two pending");

    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, c, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 2 && pending(q) == 0, "flushed %d", sent);
    CHECK(!hs.has, "an empty queue erases the host blob (save with NULL)");
    CHECK(stored("comments") == 2, "two comments: the unsaved one was never sent");
    CHECK(!hs.wrong_thread, "callbacks ran on the calling thread");

    /* The queue keeps its own reference: release runs after both are freed. */
    appnorth_storage_free(storage);
    CHECK(hs.releases == 0, "not released while the queue holds it");
    appnorth_queue_free(q);
    CHECK(hs.releases == 1, "released once: %d", hs.releases);

    /* A failing load, and a blob that is not a queue: refused, not overwritten. */
    host_store bad;
    host_store_init(&bad);
    bad.fail_load = 1;
    CHECK_STATUS(appnorth_storage_new_callbacks(host_load, host_save, NULL, &bad, &storage, &err), APPNORTH_OK, err);
    q = (appnorth_queue *)1;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_E_STORAGE, err);
    CHECK(q == NULL, "out_queue NULL on failure");
    bad.fail_load = 0;
    host_store_set(&bad, "not a queue \x00\x01", 14);
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_E_STORAGE, err);
    CHECK(bad.saves == 0 && bad.has && bad.len == 14 && memcmp(bad.bytes, "not a queue", 11) == 0,
          "the unreadable blob was not overwritten");
    appnorth_storage_free(storage);
    host_store_set(&bad, NULL, 0);

    host_store_set(&hs, NULL, 0);
    appnorth_client_free(c);
    free(idea);
}

static void test_queue_never_stores_the_token(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    add_user(ADA, ADA_TOKEN);
    appnorth_client *ada = make_client(server, APP, ADA, ADA_TOKEN);
    appnorth_error err;
    host_store hs;
    host_store_init(&hs);
    hs.secret = ADA_TOKEN;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_callbacks(host_load, host_save, NULL, &hs, &storage, &err), APPNORTH_OK, err);
    appnorth_queue *q = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &q, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);

    appnorth_feedback *fb = appnorth_feedback_new();
    appnorth_feedback_set_text(fb, "Queued feedback", &err);
    appnorth_feedback_set_diagnostics(fb, "{\"fps\":59.94}", &err);
    int32_t submitted = -1;
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_comment(q, ada, idea, "A comment", NULL, &submitted, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_idea(q, ada, board, "An idea", "text", NULL, &submitted, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_feedback(q, ada, fb, NULL, &submitted, &err), APPNORTH_OK, err);
    go_online();
    CHECK(pending(q) == 3 && hs.saves >= 3, "three saved entries (%d saves)", hs.saves);
    CHECK(!hs.secret_saved, "no saved blob contains the token");
    CHECK(!(hs.bytes && memmem(hs.bytes, hs.len, "Bearer", 6)), "no Authorization header saved");
    char *entries_text = NULL;
    CHECK_STATUS(appnorth_queue_entries(q, &entries_text, &err), APPNORTH_OK, err);
    CHECK(entries_text && !strstr(entries_text, ADA_TOKEN), "entries JSON has no token");
    appnorth_string_free(entries_text);

    /* The replay authenticates with the flushing client's credential. */
    int32_t sent = -1;
    CHECK_STATUS(appnorth_queue_flush(q, ada, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 3, "sent %d", sent);
    appnorth_feedback_free(fb);
    appnorth_queue_free(q);
    host_store_set(&hs, NULL, 0);
    appnorth_client_free(ada);
    free(board);
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
    long long before = (long long)time(NULL) * 1000;
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_idea(q, c, board, "Idea title", "Private idea body", "k-idea", &submitted, &err),
                 APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_comment(q, c, idea, "Private comment body", "k-comment", &submitted, &err),
                 APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_submit_feedback(q, c, fb, NULL, &submitted, &err), APPNORTH_OK, err);
    go_online();
    long long after = (long long)time(NULL) * 1000 + 1000;

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

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A flush waiting for the network does not block other calls on the queue. */
static void test_flush_waiting_on_the_network_does_not_block_the_queue(void) {
    admin_reset(server);
    char *idea = seed_board_and_idea(NULL);
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_queue *q = memory_queue(0);
    queue_offline_comment(q, c, idea, "slow", NULL);
    add_fault("{\"delay_ms\":1500,\"count\":1}");

    worker w = {q, c, idea, 0, 0, 0};
    pthread_t t;
    long long start = now_ms();
    pthread_create(&t, NULL, flush_once, &w);
    struct timespec pause = {0, 300 * 1000000L}; /* let the flush reach the server */
    nanosleep(&pause, NULL);
    long long asked = now_ms();
    int32_t count = pending(q);
    long long answered = now_ms();
    pthread_join(t, NULL);
    long long finished = now_ms();
    CHECK(finished - start >= 1400, "the flush took the delay: %lld ms", finished - start);
    CHECK(answered - asked < 500, "pending_count answered in %lld ms during the flush", answered - asked);
    CHECK(count == 1, "still pending while in flight: %d", count);
    CHECK(w.sent == 1 && pending(q) == 0, "then sent");
    go_online();
    appnorth_queue_free(q);
    appnorth_client_free(c);
    free(idea);
}

/* ---- the read cache --------------------------------------------------------- */

/* A cache on its own memory storage with a manual clock. */
static appnorth_cache *memory_cache(int32_t ttl, appnorth_clock *clock) {
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, ttl, clock, &cache, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    return cache;
}

static int cached_ideas(appnorth_cache *cache, const char *scope, const char *query) {
    appnorth_error err;
    char *text = (char *)1;
    int32_t rc = appnorth_cache_ideas(cache, scope, query, &text, &err);
    CHECK_STATUS(rc, APPNORTH_OK, err);
    int hit = rc == APPNORTH_OK && text != NULL;
    if (rc == APPNORTH_OK) appnorth_string_free(text);
    return hit;
}

static int cached_boards(appnorth_cache *cache, const char *scope) {
    appnorth_error err;
    char *text = (char *)1;
    int32_t rc = appnorth_cache_boards(cache, scope, &text, &err);
    CHECK_STATUS(rc, APPNORTH_OK, err);
    int hit = rc == APPNORTH_OK && text != NULL;
    if (rc == APPNORTH_OK) appnorth_string_free(text);
    return hit;
}

static void test_cache_stores_and_reads_boards_and_ideas(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    admin_idea(server, APP, board, "Faster search", "planned");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(0, clock);

    char *boards_text = NULL, *ideas_text = NULL, *text = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &boards_text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, NULL, &ideas_text, &err), APPNORTH_OK, err);
    json_t *boards_reply = parse(boards_text), *ideas_reply = parse(ideas_text);

    CHECK(!cached_boards(cache, scope), "empty cache: no boards (NULL, APPNORTH_OK)");
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, boards_text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_boards(cache, scope, &text, &err), APPNORTH_OK, err);
    json_t *got = take_json(text);
    CHECK(json_is_array(got) && json_equal(got, json_object_get(boards_reply, "boards")),
          "boards read back as the array from the response object");
    json_decref(got);

    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, NULL, ideas_text, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_ideas(cache, scope, NULL, &text, &err), APPNORTH_OK, err);
    got = take_json(text);
    CHECK(json_array_size(got) == 2 && json_equal(got, json_object_get(ideas_reply, "ideas")), "ideas read back");
    json_decref(got);
    CHECK(ideas_text && strstr(ideas_text, "next_cursor"), "the response object had a cursor field");

    /* An array is accepted as well as the response object. */
    char *array = json_dumps(json_object_get(ideas_reply, "ideas"), JSON_COMPACT);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"status\":\"planned\"}", "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_ideas(cache, scope, "{\"status\":\"planned\"}", &text, &err), APPNORTH_OK, err);
    CHECK(str_eq(text, "[]"), "empty array cached: %s", text ? text : "(null)");
    appnorth_string_free(text);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"q\":\"a\"}", array, &err), APPNORTH_OK, err);
    CHECK(cached_ideas(cache, scope, "{\"q\":\"a\"}"), "array stored");
    free(array);

    /* Bad input */
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "{\"boards\":", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "{\"ideas\":[]}", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, NULL, "[]", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_store_boards(NULL, scope, "[]", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"colour\":\"red\"}", "[]", &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_cache_boards(cache, scope, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_cache_new(NULL, 0, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_storage *s = NULL;
    appnorth_storage_new_memory(&s, &err);
    appnorth_cache *bad = (appnorth_cache *)1;
    CHECK_STATUS(appnorth_cache_new(s, -1, NULL, &bad, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(bad == NULL, "out_cache NULL on failure");
    CHECK_STATUS(appnorth_cache_new(s, 31536001, NULL, &bad, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_storage_free(s);
    CHECK(cached_boards(cache, scope), "earlier entries survive refused stores");

    json_decref(boards_reply);
    json_decref(ideas_reply);
    appnorth_string_free(boards_text);
    appnorth_string_free(ideas_text);
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_cache_keys_include_every_filter(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(0, clock);
    const char *scope = "http://127.0.0.1:1|tapp|ada@example.com";
    const char *query = "{\"board\":\"b_1\",\"q\":\"dark\",\"status\":\"open\"}";
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, query, "[{\"id\":\"i_1\"}]", &err), APPNORTH_OK, err);

    CHECK(cached_ideas(cache, scope, query), "the same query hits");
    CHECK(cached_ideas(cache, scope, "{\"status\":\"open\",\"q\":\"dark\",\"board\":\"b_1\"}"),
          "the same filters in another key order hit");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"q\":\"light\",\"status\":\"open\"}"), "different q misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"status\":\"open\"}"), "no q misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"q\":\"dark\",\"status\":\"planned\"}"), "status misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_2\",\"q\":\"dark\",\"status\":\"open\"}"), "board misses");
    CHECK(!cached_ideas(cache, scope, "{\"board\":\"b_1\",\"q\":\"dark\",\"status\":\"open\",\"limit\":5}"),
          "page size misses");
    CHECK(!cached_ideas(cache, scope, NULL), "no filters misses");
    CHECK(!cached_ideas(cache, "http://127.0.0.1:1|tapp|bob@example.com", query), "another account misses");
    CHECK(!cached_ideas(cache, "http://127.0.0.1:1|other|ada@example.com", query), "another app misses");
    CHECK(!cached_ideas(cache, "http://127.0.0.2:1|tapp|ada@example.com", query), "another server misses");
    CHECK(!cached_boards(cache, scope), "ideas are not boards");
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
}

static void test_cache_clear_scope(void) {
    appnorth_error err;
    appnorth_cache *cache = memory_cache(0, NULL);
    const char *ada = "http://127.0.0.1:1|tapp|ada@example.com", *bob = "http://127.0.0.1:1|tapp|bob@example.com";
    CHECK_STATUS(appnorth_cache_store_boards(cache, ada, "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, ada, "{\"q\":\"x\"}", "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, bob, "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_ideas(cache, bob, NULL, "[]", &err), APPNORTH_OK, err);

    CHECK_STATUS(appnorth_cache_clear(cache, ada, &err), APPNORTH_OK, err);
    CHECK(!cached_boards(cache, ada) && !cached_ideas(cache, ada, "{\"q\":\"x\"}"), "ada's boards and ideas removed");
    CHECK(cached_boards(cache, bob) && cached_ideas(cache, bob, NULL), "bob's kept");
    CHECK_STATUS(appnorth_cache_clear(cache, "unknown", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_clear(cache, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_cache_free(cache);
}

static void test_cache_refuses_cursor_queries(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    admin_idea(server, APP, board, "Second", "open");
    admin_idea(server, APP, board, "Third", "open");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_cache *cache = memory_cache(0, NULL);

    char *page1 = NULL;
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"limit\":2}", &page1, &err), APPNORTH_OK, err);
    json_t *reply = parse(page1);
    const char *cursor = json_string_value(json_object_get(reply, "next_cursor"));
    CHECK(cursor != NULL, "a second page exists");
    char cursor_query[512];
    snprintf(cursor_query, sizeof cursor_query, "{\"limit\":2,\"cursor\":\"%s\"}", cursor ? cursor : "x");

    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, cursor_query, page1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(!cached_ideas(cache, scope, "{\"limit\":2}"), "nothing stored for a cursor query");

    /* Only first pages are cached: a cursor query never reads page 1 back. */
    CHECK_STATUS(appnorth_cache_store_ideas(cache, scope, "{\"limit\":2}", page1, &err), APPNORTH_OK, err);
    char *text = NULL;
    int32_t rc = appnorth_cache_ideas(cache, scope, cursor_query, &text, &err);
    CHECK((rc == APPNORTH_OK && text == NULL) || rc == APPNORTH_E_INVALID_ARGUMENT,
          "a cursor query must not return the cached first page: rc %d, got %s", rc, text ? text : "(null)");
    appnorth_string_free(text);

    deliveries d = {0};
    clear_request_log();
    CHECK_STATUS(appnorth_read_ideas(cache, c, cursor_query, on_read, &d, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(d.calls == 0, "no delivery for a cursor query");
    json_t *sent = logged_requests(NULL, NULL);
    CHECK(json_array_size(sent) == 0, "refused before any request");
    json_decref(sent);
    deliveries_reset(&d);

    json_decref(reply);
    appnorth_string_free(page1);
    appnorth_cache_free(cache);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
    free(idea);
}

static void test_cache_expiry_with_a_manual_clock(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(WALL_START, &clock, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_clock_advance(clock, -1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_clock_advance(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    const char *scope = "http://127.0.0.1:1|tapp|anonymous";

    appnorth_cache *short_ttl = memory_cache(10, clock);
    CHECK_STATUS(appnorth_cache_store_boards(short_ttl, scope, "[]", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_ideas(short_ttl, scope, NULL, "[]", &err), APPNORTH_OK, err);
    appnorth_clock_advance(clock, 9000, &err);
    CHECK(cached_boards(short_ttl, scope) && cached_ideas(short_ttl, scope, NULL), "9 s of 10: fresh");
    appnorth_clock_advance(clock, 2000, &err);
    CHECK(!cached_boards(short_ttl, scope) && !cached_ideas(short_ttl, scope, NULL), "11 s of 10: expired");
    /* Storing again makes it fresh again. */
    CHECK_STATUS(appnorth_cache_store_boards(short_ttl, scope, "[]", &err), APPNORTH_OK, err);
    CHECK(cached_boards(short_ttl, scope), "restored: fresh");
    appnorth_cache_free(short_ttl);

    appnorth_cache *default_ttl = memory_cache(0, clock);
    CHECK_STATUS(appnorth_cache_store_boards(default_ttl, scope, "[]", &err), APPNORTH_OK, err);
    appnorth_clock_advance(clock, (APPNORTH_CACHE_DEFAULT_TTL_SECONDS - 1) * 1000LL, &err);
    CHECK(cached_boards(default_ttl, scope), "299 s of the default 300: fresh");
    appnorth_clock_advance(clock, 2000, &err);
    CHECK(!cached_boards(default_ttl, scope), "301 s: expired");
    appnorth_cache_free(default_ttl);
    appnorth_clock_free(clock);
}

static void test_wall_clock_changes_do_not_change_freshness(void) {
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(WALL_START, &clock, &err), APPNORTH_OK, err);
    appnorth_storage *storage = NULL;
    appnorth_storage_new_memory(&storage, &err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    const char *scope = "http://127.0.0.1:1|tapp|anonymous";
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);

    /* Within this process age is monotonic: wall jumps change nothing. */
    CHECK_STATUS(appnorth_clock_set_wall(clock, WALL_START + 10LL * 365 * 24 * 3600 * 1000, &err), APPNORTH_OK, err);
    CHECK(cached_boards(cache, scope), "wall clock ten years ahead: still fresh");
    CHECK_STATUS(appnorth_clock_set_wall(clock, 0, &err), APPNORTH_OK, err);
    CHECK(cached_boards(cache, scope), "wall clock back to 1970: still fresh");
    CHECK_STATUS(appnorth_clock_set_wall(clock, WALL_START, &err), APPNORTH_OK, err);
    appnorth_clock_advance(clock, 61 * 1000, &err);
    CHECK(!cached_boards(cache, scope), "61 s of monotonic time: expired");

    /* Across a restart (a new cache on the same storage) age is wall time,
     * and an entry stored "in the future" counts as expired. */
    CHECK_STATUS(appnorth_cache_store_boards(cache, scope, "[{\"id\":\"b_1\"}]", &err), APPNORTH_OK, err);
    long long stored_at = WALL_START + 61 * 1000;
    appnorth_cache_free(cache);
    appnorth_clock_set_wall(clock, stored_at + 5000, &err);
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK(cached_boards(cache, scope), "restart 5 s later: fresh");
    appnorth_cache_free(cache);
    appnorth_clock_set_wall(clock, stored_at - 3600 * 1000, &err);
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK(!cached_boards(cache, scope), "restart with the wall clock an hour before the entry: expired");
    appnorth_cache_free(cache);
    appnorth_clock_set_wall(clock, stored_at + 61 * 1000, &err);
    CHECK_STATUS(appnorth_cache_new(storage, 60, clock, &cache, &err), APPNORTH_OK, err);
    CHECK(!cached_boards(cache, scope), "restart 61 s later: expired");
    appnorth_cache_free(cache);
    appnorth_storage_free(storage);
    appnorth_clock_free(clock);
}

static void test_read_boards_cached_then_fresh(void) {
    admin_reset(server);
    char *board = admin_board(server, APP, "Features");
    free(admin_board(server, APP, "Bugs"));
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(60, clock);
    deliveries d = {0};

    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK && count_of(d.values[0]) == 2,
          "cold: one network delivery of 2 boards (%d calls)", d.calls);
    deliveries_reset(&d);
    CHECK(cached_boards(cache, scope), "the network result is now cached");

    /* The server changes; the cache shows the old list first, then the new. */
    free(admin_board(server, APP, "Questions"));
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 2 && d.sources[0] == APPNORTH_SOURCE_CACHE && d.sources[1] == APPNORTH_SOURCE_NETWORK,
          "warm: cache then network (%d calls)", d.calls);
    CHECK(count_of(d.values[0]) == 2 && count_of(d.values[1]) == 3, "cached 2, fresh 3");
    deliveries_reset(&d);

    /* Server unreachable, fresh cache: the cached data, then the error. */
    go_offline();
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_E_NETWORK, err);
    go_online();
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_CACHE && count_of(d.values[0]) == 3,
          "offline: the cached 3 boards delivered (%d calls)", d.calls);
    deliveries_reset(&d);

    /* Server unreachable, expired cache: nothing delivered. */
    appnorth_clock_advance(clock, 61 * 1000, &err);
    go_offline();
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_E_NETWORK, err);
    go_online();
    CHECK(d.calls == 0, "offline and expired: no stale delivery (%d calls)", d.calls);
    deliveries_reset(&d);

    /* An HTTP error is returned the same way, after the cached data. */
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_OK, err);
    deliveries_reset(&d);
    add_fault("{\"status\":503,\"count\":1}");
    CHECK_STATUS(appnorth_read_boards(cache, c, on_read, &d, &err), APPNORTH_E_SERVER, err);
    go_online();
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_CACHE, "503: cached data delivered");
    deliveries_reset(&d);

    CHECK_STATUS(appnorth_read_boards(cache, c, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_read_boards(NULL, c, on_read, &d, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
    appnorth_string_free(scope);
    appnorth_client_free(c);
    free(board);
}

static void test_read_ideas_cached_then_fresh(void) {
    admin_reset(server);
    char *board = NULL;
    char *idea = seed_board_and_idea(&board);
    admin_idea(server, APP, board, "Dark icons", "open");
    admin_idea(server, APP, board, "Offline sync", "planned");
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *scope = scope_of(c);
    appnorth_error err;
    appnorth_clock *clock = NULL;
    appnorth_clock_new_manual(WALL_START, &clock, &err);
    appnorth_cache *cache = memory_cache(0, clock);
    deliveries d = {0};
    const char *dark = "{\"q\":\"dark\"}";

    CHECK_STATUS(appnorth_read_ideas(cache, c, dark, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK && count_of(d.values[0]) == 2,
          "cold: network only, 2 dark ideas");
    deliveries_reset(&d);
    CHECK(cached_ideas(cache, scope, dark), "stored under the query");
    CHECK(!cached_ideas(cache, scope, NULL), "not under another query");

    admin_idea(server, APP, board, "Dark splash", "open");
    CHECK_STATUS(appnorth_read_ideas(cache, c, dark, on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 2 && d.sources[0] == APPNORTH_SOURCE_CACHE && d.sources[1] == APPNORTH_SOURCE_NETWORK &&
          count_of(d.values[0]) == 2 && count_of(d.values[1]) == 3, "warm: cached 2, then fresh 3");
    deliveries_reset(&d);

    /* Another query has no cache entry: network only. */
    CHECK_STATUS(appnorth_read_ideas(cache, c, "{\"status\":\"planned\"}", on_read, &d, &err), APPNORTH_OK, err);
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_NETWORK && count_of(d.values[0]) == 1, "planned: network only");
    deliveries_reset(&d);

    go_offline();
    CHECK_STATUS(appnorth_read_ideas(cache, c, dark, on_read, &d, &err), APPNORTH_E_NETWORK, err);
    go_online();
    CHECK(d.calls == 1 && d.sources[0] == APPNORTH_SOURCE_CACHE && count_of(d.values[0]) == 3,
          "offline: cached ideas delivered, then the network error");
    deliveries_reset(&d);

    CHECK_STATUS(appnorth_read_ideas(cache, c, "{\"colour\":1}", on_read, &d, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(d.calls == 0, "bad query: no delivery");
    appnorth_cache_free(cache);
    appnorth_clock_free(clock);
    appnorth_string_free(scope);
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
    server = test_start("test_offline", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);

    RUN(test_free_null_is_harmless);
    /* community writes */
    RUN(test_client_writes_idea_and_comment_reach_the_server);
    RUN(test_feedback_keeps_diagnostics_verbatim_and_screenshot_bytes);
    RUN(test_second_vote_is_a_conflict);
    RUN(test_chat_send_and_list);
    RUN(test_same_idempotency_key_applies_once);
    RUN(test_idempotency_key_rules);
    RUN(test_bad_input_queues_and_sends_nothing);
    RUN(test_oversize_values_are_refused_at_the_door);
    /* the seed's Verify list */
    RUN(test_verify1_offline_comment_is_queued);
    RUN(test_verify2_reconnect_flush_sends_once);
    RUN(test_verify3_switched_account_does_not_send_old_entry);
    RUN(test_verify4_cache_ttl_and_logout);
    /* the offline queue */
    RUN(test_only_network_failures_queue);
    RUN(test_queue_limit);
    RUN(test_flush_stops_on_network_failure_keeping_the_rest);
    RUN(test_flush_error_is_returned_and_leaves_the_entry_pending);
    RUN(test_poison_entry_is_named_and_discarded_alone);
    RUN(test_two_sqlite_queues_on_one_name_lose_nothing);
    RUN(test_flush_replays_the_original_idempotency_key);
    RUN(test_flush_after_the_write_was_applied_makes_no_duplicate);
    RUN(test_entries_persist_across_reopening);
    RUN(test_storage_erase_and_loaded_queues);
    RUN(test_a_storage_serves_one_queue_or_one_cache);
    RUN(test_host_callback_storage);
    RUN(test_damaged_stored_entries_are_logged);
    RUN(test_queue_never_stores_the_token);
    RUN(test_discard_per_scope_and_all);
    RUN(test_entries_json);
    RUN(test_queued_idea_and_feedback_replay_intact);
    RUN(test_concurrent_submits_and_flushes);
    RUN(test_flush_waiting_on_the_network_does_not_block_the_queue);
    /* the read cache */
    RUN(test_cache_stores_and_reads_boards_and_ideas);
    RUN(test_cache_keys_include_every_filter);
    RUN(test_cache_clear_scope);
    RUN(test_cache_refuses_cursor_queries);
    RUN(test_cache_expiry_with_a_manual_clock);
    RUN(test_wall_clock_changes_do_not_change_freshness);
    RUN(test_read_boards_cached_then_fresh);
    RUN(test_read_ideas_cached_then_fresh);

    curl_global_cleanup();
    return check_summary();
}
