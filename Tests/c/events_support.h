/* Shared by the C tests of the analytics event queue (test_events.c,
 * test_events_retry.c, test_events_consent.c, test_events_lifecycle.c), through the
 * real libappnorth.so, against the
 * local API server ($APPNORTH_TEST_SERVER): one test per rule of the seed's
 * Event Queue, Retry Policy, Error Handling, Circuit Breaker, Consent and
 * Secure Storage sections, and of appnorth.h's "Analytics events" section.
 *
 * Every test is a story: reset and arrange the server through /admin
 * (faults, settings), act through the public C API, then assert on what the
 * server stored (admin state, request log) and on what is on disk (the data
 * directory's SQLite file, read with sqlite3 directly), not only on what the
 * library answered.
 *
 * Each test gets a fresh temporary data directory. "Quiet" options turn off
 * the timer and threshold flushes (flush interval 1 h, threshold 10000) and
 * shorten the retry delays to 10/20/40 ms, so uploads happen only when a
 * test flushes. Being offline is the server's drop fault: the request is
 * read and its connection closed with no answer, a real network failure for
 * the live server's URL.
 *
 * APPNORTH_TEST_SKIP_SLOW=1 skips the tests that track thousands of events
 * or run many threads (for valgrind). */
#ifndef APPNORTH_TEST_EVENTS_SUPPORT_H
#define APPNORTH_TEST_EVENTS_SUPPORT_H
#define _GNU_SOURCE
#include <appnorth.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "journal.h"
#include "support.h"

#define APP "tevents"
#define EVENTS_PATH "/v1/apps/" APP "/events"
/* Tests whose server keeps handling a request after the test ends (a delay
 * fault) use their own app, so the late write never lands in APP. */
#define HANG_APP "tevents-hang"
#define QUIET_INTERVAL_MS 3600000
#define QUIET_THRESHOLD 10000

static const char *server;
static int skip_slow;

/* ---- the server ------------------------------------------------------------ */

static inline void add_fault(const char *spec) { admin_add_fault(server, spec); }

static inline void clear_faults(void) {
    long status = admin_request(server, "DELETE", "/admin/faults", NULL, NULL);
    CHECK(status == 200, "clear faults: HTTP %ld", status);
}

/* The start of each event suite's main(): the server, the slow-test switch
 * (APPNORTH_TEST_SKIP_SLOW) and curl. False when there is no server. */
static inline int events_suite_start(const char *name) {
    server = test_start(name, 180);
    if (!server) return 0;
    const char *slow = getenv("APPNORTH_TEST_SKIP_SLOW");
    skip_slow = slow && *slow && strcmp(slow, "0") != 0;
    curl_global_init(CURL_GLOBAL_ALL);
    (void)admin_board; /* admin.h helpers the event suites do not need */
    (void)admin_idea;
    return 1;
}

/* "Disable connectivity": every API request is read and its connection
 * closed without an answer. "Reconnect" is clear_faults(). */
static inline void go_offline(void) { add_fault("{\"drop\":true,\"count\":100000}"); }

/* The events the server stored for an app, in arrival order (new ref). */
static inline json_t *server_events_of(const char *app) {
    char path[256];
    snprintf(path, sizeof path, "/admin/apps/%s/state", app);
    json_t *state = NULL;
    long status = admin_request(server, "GET", path, NULL, &state);
    CHECK(status == 200 && state, "admin state: HTTP %ld", status);
    json_t *events = json_object_get(state, "events");
    json_t *out = json_is_array(events) ? json_incref(events) : json_array();
    json_decref(state);
    return out;
}

static inline json_t *server_events(void) { return server_events_of(APP); }

static inline size_t server_event_count(void) {
    json_t *events = server_events();
    size_t n = json_array_size(events);
    json_decref(events);
    return n;
}

/* How many stored events carry this name. */
static inline size_t server_events_named(const char *name) {
    json_t *events = server_events();
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(events, i, e) {
        const char *got = json_string_value(json_object_get(e, "name"));
        if (got && strcmp(got, name) == 0) n++;
    }
    json_decref(events);
    return n;
}

/* Polls the server for up to 5 s until it holds exactly `n` events. */
static inline int eventually_server_holds(size_t n) {
    int64_t deadline = mono_ms() + 5000;
    do {
        if (server_event_count() == n) return 1;
        sleep_ms(20);
    } while (mono_ms() < deadline);
    return server_event_count() == n;
}

/* The logged POSTs to APP's events endpoint, oldest first (new ref). */
static inline json_t *event_posts(void) {
    json_t *reply = NULL;
    admin_request(server, "GET", "/admin/requests", NULL, &reply);
    json_t *out = json_array();
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(reply, "requests"), i, entry) {
        const char *m = json_string_value(json_object_get(entry, "method"));
        const char *p = json_string_value(json_object_get(entry, "path"));
        if (m && p && strcmp(m, "POST") == 0 && strcmp(p, EVENTS_PATH) == 0) json_array_append(out, entry);
    }
    json_decref(reply);
    return out;
}

static inline size_t event_post_count_now(void) {
    json_t *posts = event_posts();
    size_t n = json_array_size(posts);
    json_decref(posts);
    return n;
}

/* The server logs a request just after answering it: a count read right
 * after a flush is read again until it settles. */
static inline size_t event_post_count(void) {
    size_t n = event_post_count_now();
    for (int i = 0; i < 50; i++) {
        sleep_ms(10);
        size_t again = event_post_count_now();
        if (again == n) break;
        n = again;
    }
    return n;
}

/* GET an admin path, parsing numbers too large for an int64 (as reals).
 * New reference or NULL. */
static inline json_t *lenient_get(const char *path) {
    char url[1024];
    snprintf(url, sizeof url, "%s%s", server, path);
    CURL *h = curl_easy_init();
    admin_buffer buf = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, admin_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    json_t *out = NULL;
    if (curl_easy_perform(h) == CURLE_OK && buf.data) out = json_loads(buf.data, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, NULL);
    CHECK(out != NULL, "GET %s parsed", path);
    free(buf.data);
    curl_easy_cleanup(h);
    return out;
}

/* ---- the data directory ------------------------------------------------- */


static inline int path_exists(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return access(path, F_OK) == 0;
}

/* Permission bits of dir/file (file NULL: the dir itself), or -1. */
static inline int mode_of(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s%s%s", dir, file ? "/" : "", file ? file : "");
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

/* The whole of dir/file as a string (caller frees), or NULL. */
static inline char *read_file(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0, cap = 0;
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            char *grown = realloc(text, cap);
            if (!grown) break;
            text = grown;
        }
        memcpy(text + len, chunk, got);
        len += got;
        text[len] = 0;
    }
    fclose(f);
    return text;
}

static inline sqlite3 *open_db(const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/appnorth.sqlite3", dir);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 2000);
    return db;
}

/* Events on disk: records in the data directory's journal files plus rows
 * in its `events` table, read by a separate SQLite connection: what a new
 * process would find after a crash. -1 on error. */
static inline int disk_rows(const char *dir) {
    sqlite3 *db = open_db(dir);
    if (!db) return -1;
    int n = -1;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM events", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n < 0 ? n : n + journal_each(dir, NULL, NULL);
}

typedef struct {
    char *body;
    size_t len, cap;
    int rows;
} payload_batch;

static inline void batch_add(const unsigned char *bytes, size_t n, void *ctx) {
    payload_batch *b = ctx;
    if (b->len + n + 4 > b->cap) {
        b->cap = (b->len + n + 4) * 2;
        b->body = realloc(b->body, b->cap);
    }
    if (b->rows > 0) b->body[b->len++] = ',';
    memcpy(b->body + b->len, bytes, n);
    b->len += n;
    b->rows++;
}

/* The stored upload payloads, oldest first, joined into an events request
 * body {"events":[...]} (caller frees), or NULL. */
static inline char *disk_payload_batch(const char *dir, int *out_rows) {
    *out_rows = 0;
    sqlite3 *db = open_db(dir);
    if (!db) return NULL;
    payload_batch b = {malloc(64), 0, 64, 0};
    b.len += (size_t)sprintf(b.body, "{\"events\":[");
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT payload FROM events ORDER BY seq", -1, &st, NULL) == SQLITE_OK) {
        while (sqlite3_step(st) == SQLITE_ROW)
            batch_add(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &b);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    journal_each(dir, batch_add, &b); /* the journaled events come after the stored rows */
    memcpy(b.body + b.len, "]}", 3); /* batch_add keeps room for it */
    *out_rows = b.rows;
    return b.body;
}

/* ---- the library ------------------------------------------------------------ */

static inline appnorth_client *make_client_for(const char *app, appnorth_log_fn log, void *log_data) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, app, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 3000, 3000, &err), APPNORTH_OK, err);
    if (log) CHECK_STATUS(appnorth_client_options_set_logger(o, log, APPNORTH_LOG_DEBUG, log_data, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static inline appnorth_client *app_client(void) { return make_client_for(APP, NULL, NULL); }

/* Options for tests: client and data dir, no timer or threshold flushes,
 * retries after 10, 20 and 40 ms, breaker at 5. */
static inline appnorth_events_options *quiet_options(appnorth_client *client, const char *dir) {
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK(o != NULL, "events options");
    CHECK_STATUS(appnorth_events_options_set_client(o, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, QUIET_INTERVAL_MS, QUIET_THRESHOLD, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_retry(o, 10, 3, 120000, 5, &err), APPNORTH_OK, err);
    return o;
}

/* Opens the queue and frees the options (the handle copied them). */
static inline appnorth_events *open_events(appnorth_events_options *o) {
    appnorth_error err;
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    return e;
}

static inline appnorth_events *open_quiet(appnorth_client *client, const char *dir) {
    return open_events(quiet_options(client, dir));
}

static inline void track_ok(appnorth_events *e, const char *name, const char *props) {
    appnorth_error err;
    int32_t queued = -1;
    CHECK_STATUS(appnorth_events_track(e, name, props, &queued, &err), APPNORTH_OK, err);
    CHECK(queued == 1, "'%s' queued: %d", name, queued);
}

static inline int32_t flush(appnorth_events *e, int32_t timeout_ms, appnorth_error *err) {
    return appnorth_events_flush(e, timeout_ms, err);
}

static inline json_t *stats(appnorth_events *e) {
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_events_stats(e, &text, &err), APPNORTH_OK, err);
    json_t *value = text ? json_loads(text, 0, NULL) : NULL;
    CHECK(json_is_object(value), "stats is a JSON object: %s", text ? text : "(null)");
    appnorth_string_free(text);
    return value;
}

/* An integer from the stats JSON: stats[k1] or stats[k1][k2]; -1 if absent. */
static inline long stat_int(appnorth_events *e, const char *k1, const char *k2) {
    json_t *s = stats(e);
    json_t *v = json_object_get(s, k1);
    if (k2) v = json_object_get(v, k2);
    long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;
    json_decref(s);
    return n;
}

static inline long queued(appnorth_events *e) { return stat_int(e, "queued", NULL); }

static inline int breaker_open(appnorth_events *e) {
    json_t *s = stats(e);
    int open = json_is_true(json_object_get(json_object_get(s, "breaker"), "open"));
    json_decref(s);
    return open;
}

static inline char *anonymous_id(appnorth_events *e) {
    appnorth_error err;
    char *id = NULL;
    CHECK_STATUS(appnorth_events_anonymous_id(e, &id, &err), APPNORTH_OK, err);
    return id;
}

static inline int32_t consent_of(appnorth_events *e) {
    appnorth_error err;
    int32_t state = -99;
    CHECK_STATUS(appnorth_events_consent(e, &state, &err), APPNORTH_OK, err);
    return state;
}

static inline const char *str_of(json_t *object, const char *key) {
    return json_string_value(json_object_get(object, key));
}

static inline int str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* A JSON object {"pad":"ppp..."} with `n` padding characters (caller frees). */
static inline char *padded_props(char c, size_t n) {
    char *text = malloc(n + 16);
    memcpy(text, "{\"pad\":\"", 8);
    memset(text + 8, c, n);
    memcpy(text + 8 + n, "\"}", 3);
    return text;
}

/* A host secure store: three keys in memory. */
#define SECRETS_MAGIC 0x5ec12e75u
enum { K_ANON, K_USER, K_PUSH, K_COUNT };
typedef struct {
    unsigned magic;
    pthread_mutex_t mu;
    char *values[K_COUNT];
    int gets, sets, releases, unknown_keys;
    int fail_get, fail_set;
} host_secrets;

/* Callbacks that got a user_data other than the one registered. */
static int secrets_bad_user_data;

static inline int secret_key(const char *key) {
    if (key && strcmp(key, "anonymous_id") == 0) return K_ANON;
    if (key && strcmp(key, "user_id") == 0) return K_USER;
    if (key && strcmp(key, "push_token") == 0) return K_PUSH;
    return -1;
}

static inline int32_t secrets_get(void *user_data, const char *key, appnorth_buffer *out) {
    host_secrets *s = user_data;
    if (!s || s->magic != SECRETS_MAGIC) {
        secrets_bad_user_data++;
        return 9;
    }
    pthread_mutex_lock(&s->mu);
    s->gets++;
    int k = secret_key(key), rc = 0;
    if (s->fail_get) rc = 1;
    else if (k < 0) s->unknown_keys++;
    else if (s->values[k] && appnorth_buffer_set(out, s->values[k], strlen(s->values[k]), NULL) != APPNORTH_OK)
        rc = 2;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static inline int32_t secrets_set(void *user_data, const char *key, const char *value) {
    host_secrets *s = user_data;
    if (!s || s->magic != SECRETS_MAGIC) {
        secrets_bad_user_data++;
        return 9;
    }
    pthread_mutex_lock(&s->mu);
    s->sets++;
    int k = secret_key(key), rc = 0;
    if (s->fail_set) rc = 1;
    else if (k < 0) s->unknown_keys++;
    else {
        free(s->values[k]);
        s->values[k] = value ? strdup(value) : NULL;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static inline void secrets_release(void *user_data) {
    host_secrets *s = user_data;
    if (!s || s->magic != SECRETS_MAGIC) {
        secrets_bad_user_data++;
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->releases++;
    pthread_mutex_unlock(&s->mu);
}

static inline void secrets_init(host_secrets *s) {
    memset(s, 0, sizeof *s);
    s->magic = SECRETS_MAGIC;
    pthread_mutex_init(&s->mu, NULL);
}

static inline void secrets_clear(host_secrets *s) {
    for (int k = 0; k < K_COUNT; k++) free(s->values[k]);
    pthread_mutex_destroy(&s->mu);
}

static inline const char *secret(host_secrets *s, int k) { return s->values[k]; }

#endif
