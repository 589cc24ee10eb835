/* Shared by the C tests of community writes, the offline write queue and
 * the read cache (test_writes.c, test_offline.c, test_cache.c), through the
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
 * faults). Time moves with a manual clock; nothing sleeps for a TTL.
 * Include it first: it defines _GNU_SOURCE. */
#ifndef APPNORTH_TEST_OFFLINE_SUPPORT_H
#define APPNORTH_TEST_OFFLINE_SUPPORT_H
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


static inline void add_user(const char *email, const char *token) {
    char body[512];
    snprintf(body, sizeof body, "{\"app\":\"%s\",\"email\":\"%s\",\"token\":\"%s\"}", APP, email, token);
    long status = admin_request(server, "POST", "/admin/users", body, NULL);
    CHECK(status == 201, "register %s: HTTP %ld", email, status);
}

/* Creates an open idea on a board; returns its id (caller frees). */
static inline char *seed_idea(const char *board_id, const char *title) {
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
static inline char *seed_board_and_idea(char **out_board) {
    char *board = admin_board(server, APP, "Features");
    CHECK(board != NULL, "board seeded");
    char *idea = seed_idea(board, "Dark mode");
    if (out_board) *out_board = board;
    else free(board);
    return idea;
}

static inline json_t *server_state(void) {
    json_t *state = NULL;
    long status = admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &state);
    CHECK(status == 200 && state, "admin state: HTTP %ld", status);
    return state;
}

/* How many objects of a kind ("comments", "ideas", "feedback", ...) the
 * server stored for the app. */
static inline size_t stored(const char *member) {
    json_t *state = server_state();
    size_t n = json_array_size(json_object_get(state, member));
    json_decref(state);
    return n;
}

/* The comments the server stored for one idea, oldest first (new ref). */
static inline json_t *stored_comments(const char *idea_id) {
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

static inline const char *str_at(json_t *array, size_t index, const char *key) {
    return json_string_value(json_object_get(json_array_get(array, index), key));
}

static inline int str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

static inline void clear_request_log(void) {
    admin_request(server, "DELETE", "/admin/requests", NULL, NULL);
}

/* The logged API requests since the last clear with this method (NULL: any)
 * whose path ends with `suffix` (NULL: any path). New reference. */
static inline json_t *logged_requests(const char *method, const char *suffix) {
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

static inline const char *logged_header(json_t *entry, const char *name) {
    const char *key;
    json_t *value;
    json_object_foreach(json_object_get(entry, "headers"), key, value) {
        if (strcasecmp(key, name) == 0) return json_string_value(value);
    }
    return NULL;
}

/* "Disable connectivity": every API request is read, then its connection is
 * closed with no answer, a network failure. "Reconnect" clears the faults. */
static inline void go_offline(void) {
    long status = admin_request(server, "POST", "/admin/faults", "{\"drop\":true,\"count\":1000}", NULL);
    CHECK(status == 201, "drop fault: HTTP %ld", status);
}

static inline void go_online(void) {
    admin_request(server, "DELETE", "/admin/faults", NULL, NULL);
}

static inline void add_fault(const char *spec) { admin_add_fault(server, spec); }

/* ---- library helpers --------------------------------------------------- */

static inline int32_t pending(appnorth_queue *queue) {
    appnorth_error err;
    int32_t count = -1;
    CHECK_STATUS(appnorth_queue_pending_count(queue, &count, &err), APPNORTH_OK, err);
    return count;
}

/* A queue on its own memory storage (the queue keeps the storage alive). */
static inline appnorth_queue *memory_queue(int32_t max_entries) {
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_queue *queue = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, max_entries, &queue, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    return queue;
}

static inline char *scope_of(appnorth_client *client) {
    appnorth_error err;
    char *scope = NULL;
    CHECK_STATUS(appnorth_client_scope(client, &scope, &err), APPNORTH_OK, err);
    return scope;
}

/* Submits a comment through the queue while the server drops connections;
 * expects it to be queued. */
static inline void queue_offline_comment(appnorth_queue *queue, appnorth_client *client, const char *idea,
                                  const char *body, const char *key) {
    appnorth_error err;
    int32_t submitted = -1;
    go_offline();
    CHECK_STATUS(appnorth_queue_submit_comment(queue, client, idea, body, key, &submitted, &err),
                 APPNORTH_OK, err);
    CHECK(submitted == 0, "'%s' queued, not submitted: %d", body, submitted);
    go_online();
}

static inline json_t *parse(const char *text) {
    return text ? json_loads(text, 0, NULL) : NULL;
}

/* Takes a returned string, parses it and frees it. */
static inline json_t *take_json(char *text) {
    json_t *value = parse(text);
    appnorth_string_free(text);
    return value;
}

static inline json_t *queue_entries(appnorth_queue *queue) {
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_queue_entries(queue, &text, &err), APPNORTH_OK, err);
    json_t *entries = take_json(text);
    CHECK(json_is_array(entries), "entries is an array");
    return entries;
}


/* Whether any regular file in `dir` contains `needle`. */
static inline int dir_contains(const char *dir, const char *needle) {
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

static inline void host_store_init(host_store *s) {
    memset(s, 0, sizeof *s);
    s->caller = pthread_self();
    s->reenter_rc = -1;
}

static inline void host_store_set(host_store *s, const void *bytes, size_t len) {
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

static inline int32_t host_load(void *user_data, appnorth_buffer *out) {
    host_store *s = user_data;
    s->loads++;
    if (!pthread_equal(pthread_self(), s->caller)) s->wrong_thread = 1;
    if (s->fail_load) return 5;
    if (s->has) return appnorth_buffer_set(out, s->bytes, s->len, NULL);
    return 0;
}

static inline int32_t host_save(void *user_data, const void *bytes, size_t length) {
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

static inline void host_release(void *user_data) {
    ((host_store *)user_data)->releases++;
}

/* Collects the deliveries of appnorth_read_boards / appnorth_read_ideas. */
typedef struct {
    int calls;
    int32_t sources[4];
    json_t *values[4];
} deliveries;

static inline void on_read(int32_t source, const char *json, void *user_data) {
    deliveries *d = user_data;
    if (d->calls < 4) {
        d->sources[d->calls] = source;
        d->values[d->calls] = json_loads(json, 0, NULL);
    }
    d->calls++;
}

static inline void deliveries_reset(deliveries *d) {
    for (int i = 0; i < 4; i++) json_decref(d->values[i]);
    memset(d, 0, sizeof *d);
}

/* The ideas in a list response (borrowed from `page`). */
static inline size_t count_of(json_t *value) { return json_is_array(value) ? json_array_size(value) : (size_t)-1; }

#endif
