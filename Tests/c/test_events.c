/* The analytics event queue through the real libappnorth.so, against the
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

/* ---- time ------------------------------------------------------------------ */

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* ---- the server ------------------------------------------------------------ */

static void add_fault(const char *spec) {
    long status = admin_request(server, "POST", "/admin/faults", spec, NULL);
    CHECK(status == 201, "fault %s: HTTP %ld", spec, status);
}

static void clear_faults(void) {
    long status = admin_request(server, "DELETE", "/admin/faults", NULL, NULL);
    CHECK(status == 200, "clear faults: HTTP %ld", status);
}

/* "Disable connectivity": every API request is read and its connection
 * closed without an answer. "Reconnect" is clear_faults(). */
static void go_offline(void) { add_fault("{\"drop\":true,\"count\":100000}"); }

/* The events the server stored for an app, in arrival order (new ref). */
static json_t *server_events_of(const char *app) {
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

static json_t *server_events(void) { return server_events_of(APP); }

static size_t server_event_count(void) {
    json_t *events = server_events();
    size_t n = json_array_size(events);
    json_decref(events);
    return n;
}

/* How many stored events carry this name. */
static size_t server_events_named(const char *name) {
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
static int eventually_server_holds(size_t n) {
    int64_t deadline = mono_ms() + 5000;
    do {
        if (server_event_count() == n) return 1;
        sleep_ms(20);
    } while (mono_ms() < deadline);
    return server_event_count() == n;
}

/* The logged POSTs to APP's events endpoint, oldest first (new ref). */
static json_t *event_posts(void) {
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

static size_t event_post_count_now(void) {
    json_t *posts = event_posts();
    size_t n = json_array_size(posts);
    json_decref(posts);
    return n;
}

/* The server logs a request just after answering it: a count read right
 * after a flush is read again until it settles. */
static size_t event_post_count(void) {
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
static json_t *lenient_get(const char *path) {
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


static int path_exists(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return access(path, F_OK) == 0;
}

/* Permission bits of dir/file (file NULL: the dir itself), or -1. */
static int mode_of(const char *dir, const char *file) {
    char path[1024];
    snprintf(path, sizeof path, "%s%s%s", dir, file ? "/" : "", file ? file : "");
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

/* The whole of dir/file as a string (caller frees), or NULL. */
static char *read_file(const char *dir, const char *file) {
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

static sqlite3 *open_db(const char *dir) {
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
static int disk_rows(const char *dir) {
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

static void batch_add(const unsigned char *bytes, size_t n, void *ctx) {
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
static char *disk_payload_batch(const char *dir, int *out_rows) {
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

static appnorth_client *make_client_for(const char *app, appnorth_log_fn log, void *log_data) {
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

static appnorth_client *app_client(void) { return make_client_for(APP, NULL, NULL); }

/* Options for tests: client and data dir, no timer or threshold flushes,
 * retries after 10, 20 and 40 ms, breaker at 5. */
static appnorth_events_options *quiet_options(appnorth_client *client, const char *dir) {
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
static appnorth_events *open_events(appnorth_events_options *o) {
    appnorth_error err;
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    return e;
}

static appnorth_events *open_quiet(appnorth_client *client, const char *dir) {
    return open_events(quiet_options(client, dir));
}

static void track_ok(appnorth_events *e, const char *name, const char *props) {
    appnorth_error err;
    int32_t queued = -1;
    CHECK_STATUS(appnorth_events_track(e, name, props, &queued, &err), APPNORTH_OK, err);
    CHECK(queued == 1, "'%s' queued: %d", name, queued);
}

static int32_t flush(appnorth_events *e, int32_t timeout_ms, appnorth_error *err) {
    return appnorth_events_flush(e, timeout_ms, err);
}

static json_t *stats(appnorth_events *e) {
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_events_stats(e, &text, &err), APPNORTH_OK, err);
    json_t *value = text ? json_loads(text, 0, NULL) : NULL;
    CHECK(json_is_object(value), "stats is a JSON object: %s", text ? text : "(null)");
    appnorth_string_free(text);
    return value;
}

/* An integer from the stats JSON: stats[k1] or stats[k1][k2]; -1 if absent. */
static long stat_int(appnorth_events *e, const char *k1, const char *k2) {
    json_t *s = stats(e);
    json_t *v = json_object_get(s, k1);
    if (k2) v = json_object_get(v, k2);
    long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;
    json_decref(s);
    return n;
}

static long queued(appnorth_events *e) { return stat_int(e, "queued", NULL); }

static int breaker_open(appnorth_events *e) {
    json_t *s = stats(e);
    int open = json_is_true(json_object_get(json_object_get(s, "breaker"), "open"));
    json_decref(s);
    return open;
}

static char *anonymous_id(appnorth_events *e) {
    appnorth_error err;
    char *id = NULL;
    CHECK_STATUS(appnorth_events_anonymous_id(e, &id, &err), APPNORTH_OK, err);
    return id;
}

static int32_t consent_of(appnorth_events *e) {
    appnorth_error err;
    int32_t state = -99;
    CHECK_STATUS(appnorth_events_consent(e, &state, &err), APPNORTH_OK, err);
    return state;
}

static const char *str_of(json_t *object, const char *key) {
    return json_string_value(json_object_get(object, key));
}

static int str_eq(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

/* A JSON object {"pad":"ppp..."} with `n` padding characters (caller frees). */
static char *padded_props(char c, size_t n) {
    char *text = malloc(n + 16);
    memcpy(text, "{\"pad\":\"", 8);
    memset(text + 8, c, n);
    memcpy(text + 8 + n, "\"}", 3);
    return text;
}

/* ---- Event Queue: persistence -------------------------------------------- */

static void test_track_is_on_disk_before_it_returns(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);

    CHECK(disk_rows(dir) == 0, "empty queue on disk: %d", disk_rows(dir));
    track_ok(e, "opened", NULL);
    /* Read by another connection at once: the insert has committed. */
    CHECK(disk_rows(dir) == 1, "1 row on disk right after track: %d", disk_rows(dir));
    track_ok(e, "second", "{\"k\":1}");
    CHECK(disk_rows(dir) == 2, "2 rows on disk: %d", disk_rows(dir));
    CHECK(queued(e) == 2, "stats queued 2: %ld", queued(e));
    CHECK(server_event_count() == 0, "tracking alone sends nothing");
    CHECK(event_post_count() == 0, "no POST while quiet");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_events_survive_a_restart(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    char *first_anon = anonymous_id(e);
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%d", i);
        track_ok(e, name, NULL);
    }
    /* free without close: the upload thread stops, nothing is flushed. */
    appnorth_events_free(e);
    CHECK(disk_rows(dir) == 3, "3 rows after the handle is gone: %d", disk_rows(dir));
    CHECK(server_event_count() == 0, "nothing sent by free");

    /* A quiet queue (1 h timer, threshold 10,000) sends what an earlier
     * run left as soon as it opens: no flush call, no timer. */
    e = open_quiet(c, dir);
    char *anon = anonymous_id(e);
    CHECK(str_eq(anon, first_anon), "anonymous id stable across reopening: %s vs %s", anon, first_anon);
    CHECK(eventually_server_holds(3), "the left-over events arrive soon after open: %zu", server_event_count());
    appnorth_error err;
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    CHECK(json_array_size(events) == 3, "3 events delivered after the restart: %zu", json_array_size(events));
    CHECK(str_eq(str_of(json_array_get(events, 0), "name"), "r0") &&
              str_eq(str_of(json_array_get(events, 2), "name"), "r2"),
          "in tracking order");
    CHECK(str_eq(str_of(json_array_get(events, 0), "anonymous_id"), first_anon), "anonymous id on the events");
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "delivered events leave the disk: %d", disk_rows(dir));
    json_decref(events);
    appnorth_string_free(first_anon);
    appnorth_string_free(anon);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_event_fields_and_verbatim_properties(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    char *anon = anonymous_id(e);
    CHECK(anon && strlen(anon) > 0, "an anonymous id exists from the start");

    CHECK_STATUS(appnorth_events_identify(e, "user-42", &err), APPNORTH_OK, err);
    int64_t before = wall_ms();
    track_ok(e, "purchase", "{\"price\":9.99}");
    /* Spelling, spacing, key order, big numbers and escapes stay as written. */
    const char *odd = "{ \"z\" : 1.50, \"a\":[1e3, -0.0, 1E-7], \"s\":\"\\u00e9\\n\\\"q\\\"\" }";
    track_ok(e, "odd \"name\" \xc3\xa9", odd);
    track_ok(e, "no properties", NULL);
    int64_t after = wall_ms();
    CHECK_STATUS(appnorth_events_start_session(e, &err), APPNORTH_OK, err);
    track_ok(e, "next session", "{}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);

    json_t *events = server_events();
    CHECK(json_array_size(events) == 4, "4 events stored: %zu", json_array_size(events));
    json_t *p = json_array_get(events, 0);
    CHECK(str_eq(str_of(p, "name"), "purchase"), "name: %s", str_of(p, "name"));
    CHECK(str_eq(str_of(p, "properties_raw"), "{\"price\":9.99}"), "properties verbatim: %s", str_of(p, "properties_raw"));
    CHECK(str_eq(str_of(p, "user_id"), "user-42"), "user id: %s", str_of(p, "user_id"));
    CHECK(str_eq(str_of(p, "anonymous_id"), anon), "anonymous id: %s", str_of(p, "anonymous_id"));
    const char *id = str_of(p, "id");
    CHECK(id && strlen(id) == 36 && id[14] == '7' && id[8] == '-' && strchr("89ab", id[19]),
          "UUIDv7 id: %s", id ? id : "(null)");
    json_int_t ts = json_integer_value(json_object_get(p, "timestamp"));
    CHECK(ts >= before - 5 && ts <= after + 5, "timestamp %lld within [%lld, %lld]", (long long)ts,
          (long long)before, (long long)after);
    const char *session = str_of(p, "session_id");
    CHECK(session && *session, "a session id");

    json_t *o = json_array_get(events, 1);
    CHECK(str_eq(str_of(o, "name"), "odd \"name\" \xc3\xa9"), "name escaped and back: %s", str_of(o, "name"));
    CHECK(str_eq(str_of(o, "properties_raw"), odd), "odd properties verbatim: %s", str_of(o, "properties_raw"));
    CHECK(str_eq(str_of(o, "session_id"), session), "same session");

    json_t *n = json_array_get(events, 2);
    const char *raw = str_of(n, "properties_raw");
    CHECK(raw == NULL || strcmp(raw, "{}") == 0, "no properties arrive as absent or {}: %s", raw);
    CHECK(!str_eq(str_of(n, "id"), id), "each event has its own id");

    json_t *s = json_array_get(events, 3);
    CHECK(str_of(s, "session_id") && !str_eq(str_of(s, "session_id"), session),
          "start_session makes a new session id: %s", str_of(s, "session_id"));
    CHECK(queued(e) == 0, "queue empty after delivery");
    json_t *st = stats(e);
    CHECK(json_is_integer(json_object_get(st, "last_flush_ms")), "last_flush_ms set after a delivery");
    CHECK(json_is_null(json_object_get(st, "last_error")), "no last error");
    json_decref(st);

    json_decref(events);
    appnorth_string_free(anon);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* Valid JSON the host may well send: an integer past 64 bits (an order
 * number, an id from another system). The header promises the text is
 * stored and sent exactly as given; only invalid JSON may be refused. */
static void test_properties_with_huge_numbers_are_sent_verbatim(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    const char *props = "{\"order\":12345678901234567890123}";
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "big number", props, &q, &err), APPNORTH_OK, err);
    CHECK(q == 1, "queued: %d", q);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    /* The state holds the parsed properties too, which jansson reads only
     * with integers as reals. */
    json_t *state = lenient_get("/admin/apps/" APP "/state");
    json_t *events = json_object_get(state, "events");
    CHECK(json_array_size(events) == 1 && str_eq(str_of(json_array_get(events, 0), "properties_raw"), props),
          "arrives verbatim (%zu stored)", json_array_size(events));
    json_decref(state);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* \u0000 is valid JSON: accepted and sent as written. Properties over
 * max_event_bytes are refused before they are parsed, whatever their size. */
static void test_nul_escape_accepted_and_oversize_properties_refused_at_the_door(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    const char *props = "{\"s\":\"a\\u0000b\"}";
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "nul", props, &q, &err), APPNORTH_OK, err);
    CHECK(q == 1, "queued: %d", q);

    size_t huge = 50u * 1024 * 1024;
    char *big = malloc(huge + 1);
    memset(big, '[', huge); /* not even JSON: measured before parsing */
    big[huge] = 0;
    CHECK_STATUS(appnorth_events_track(e, "huge", big, &q, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK(q == 0, "not queued: %d", q);
    free(big);

    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *state = lenient_get("/admin/apps/" APP "/state");
    json_t *events = json_object_get(state, "events");
    CHECK(json_array_size(events) == 1 && str_eq(str_of(json_array_get(events, 0), "properties_raw"), props),
          "arrives verbatim (%zu stored)", json_array_size(events));
    json_decref(state);
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_defaults_are_the_seeds_numbers(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    json_t *s = stats(e);
    json_t *dropped = json_object_get(s, "dropped");
    json_t *breaker = json_object_get(s, "breaker");
    CHECK(json_integer_value(json_object_get(s, "queued")) == 0, "queued 0");
    CHECK(json_is_integer(json_object_get(s, "queued_bytes")), "queued_bytes");
    CHECK(json_integer_value(json_object_get(s, "batch_size")) == 20, "unknown network: batch 20");
    CHECK(str_eq(str_of(s, "network_type"), "unknown"), "network unknown: %s", str_of(s, "network_type"));
    CHECK(str_eq(str_of(s, "consent"), "unknown"), "consent unknown: %s", str_of(s, "consent"));
    CHECK(json_integer_value(json_object_get(breaker, "threshold")) == 5, "breaker threshold 5");
    CHECK(json_integer_value(json_object_get(breaker, "consecutive_failures")) == 0, "no failures");
    CHECK(json_is_false(json_object_get(breaker, "open")), "breaker closed");
    const char *reasons[] = {"queue_limit", "client_error", "payload_too_large", "consent"};
    for (int i = 0; i < 4; i++)
        CHECK(json_integer_value(json_object_get(dropped, reasons[i])) == 0 &&
                  json_is_integer(json_object_get(dropped, reasons[i])),
              "dropped.%s is 0", reasons[i]);
    CHECK(json_is_null(json_object_get(s, "last_error")), "last_error null");
    CHECK(json_is_null(json_object_get(s, "last_flush_ms")), "last_flush_ms null");
    CHECK(json_is_null(json_object_get(s, "last_attempt_ms")), "last_attempt_ms null");
    json_decref(s);

    /* The default batch threshold is 20: 19 events wait, the 20th sends. */
    for (int i = 0; i < 19; i++) track_ok(e, "d", NULL);
    sleep_ms(300);
    CHECK(event_post_count() == 0, "19 events: nothing sent (%zu POSTs)", event_post_count());
    track_ok(e, "d", NULL);
    CHECK(eventually_server_holds(20), "20 events: flushed at once (%zu stored)", server_event_count());
    CHECK(event_post_count() == 1, "in one batch of 20: %zu POSTs", event_post_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* appnorth_events_flush_sent reports what the server accepted, also when
 * the flush fails, and checks its arguments. */
static void test_flush_sent_counts_delivered_events(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    int64_t sent = -1;
    CHECK_STATUS(appnorth_events_flush_sent(e, 5000, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 0, "empty queue: sent %lld", (long long)sent);
    for (int i = 0; i < 4; i++) track_ok(e, "counted", NULL);
    CHECK_STATUS(appnorth_events_flush_sent(e, 5000, &sent, &err), APPNORTH_OK, err);
    CHECK(sent == 4 && server_event_count() == 4, "sent %lld, server holds %zu", (long long)sent,
          server_event_count());
    CHECK_STATUS(appnorth_events_flush_sent(e, 5000, NULL, &err), APPNORTH_OK, err);

    add_fault("{\"status\":503,\"count\":100}");
    track_ok(e, "refused", NULL);
    sent = -1;
    CHECK(appnorth_events_flush_sent(e, 5000, &sent, &err) == APPNORTH_E_SERVER && sent == 0,
          "a failed flush reports 0 sent: %d %lld", err.code, (long long)sent);
    clear_faults();

    CHECK(appnorth_events_flush_sent(e, -1, &sent, &err) == APPNORTH_E_INVALID_ARGUMENT, "negative timeout");
    CHECK(appnorth_events_flush_sent(NULL, 10, &sent, &err) == APPNORTH_E_INVALID_ARGUMENT && sent == 0,
          "NULL events");
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Event Queue: flush triggers --------------------------------------------- */

static void test_threshold_flush(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, QUIET_INTERVAL_MS, 5, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    for (int i = 0; i < 4; i++) track_ok(e, "below", NULL);
    sleep_ms(200);
    CHECK(server_event_count() == 0, "below the threshold nothing is sent");
    track_ok(e, "reached", NULL);
    CHECK(eventually_server_holds(5), "the 5th event starts a flush: %zu stored", server_event_count());
    CHECK(event_post_count() == 1, "one POST: %zu", event_post_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_timer_flush(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, 150, QUIET_THRESHOLD, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    track_ok(e, "timer", NULL);
    CHECK(eventually_server_holds(1), "the timer flushed one event: %zu stored", server_event_count());
    track_ok(e, "timer2", NULL);
    CHECK(eventually_server_holds(2), "and again on the next tick: %zu stored", server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Event Queue: adaptive batch size ------------------------------------------ */

static void test_batch_size_follows_the_network_type(void) {
    struct {
        int32_t type; /* -1: leave the default */
        const char *name;
        size_t posts;
        long batch;
    } cases[] = {
        {APPNORTH_NETWORK_WIFI, "wifi", 2, 100},
        {APPNORTH_NETWORK_CELLULAR, "cellular", 3, 50},
        {APPNORTH_NETWORK_EXPENSIVE_CELLULAR, "expensive_cellular", 8, 20},
        {APPNORTH_NETWORK_UNKNOWN, "unknown", 8, 20},
        {-1, "unknown", 8, 20},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        admin_reset(server);
        char *dir = make_temp_dir("events");
        appnorth_client *c = app_client();
        appnorth_events *e = open_quiet(c, dir);
        appnorth_error err;
        if (cases[k].type >= 0)
            CHECK_STATUS(appnorth_events_set_network_type(e, cases[k].type, &err), APPNORTH_OK, err);
        json_t *s = stats(e);
        CHECK(str_eq(str_of(s, "network_type"), cases[k].name), "network_type %s: %s", cases[k].name,
              str_of(s, "network_type"));
        CHECK(json_integer_value(json_object_get(s, "batch_size")) == cases[k].batch, "%s batch_size %ld",
              cases[k].name, cases[k].batch);
        json_decref(s);
        for (int i = 0; i < 150; i++) {
            char name[16];
            snprintf(name, sizeof name, "e%d", i);
            track_ok(e, name, NULL);
        }
        CHECK_STATUS(flush(e, 10000, &err), APPNORTH_OK, err);
        size_t posts = event_post_count();
        CHECK(posts == cases[k].posts, "%s%s: 150 events in %zu POSTs, want %zu", cases[k].name,
              cases[k].type < 0 ? " (default)" : "", posts, cases[k].posts);
        CHECK(server_event_count() == 150, "%s: 150 stored: %zu", cases[k].name, server_event_count());
        CHECK(queued(e) == 0, "%s: queue empty", cases[k].name);
        CHECK_STATUS(appnorth_events_close(e, 0, &err), APPNORTH_OK, err);
        appnorth_events_free(e);
        appnorth_client_free(c);
        remove_tree(dir);
    }
}

/* ---- Event Queue: storage limits ------------------------------------------------ */

static void test_oldest_dropped_past_the_count_limit(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_limits(o, 5, 5242880, 65536, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    for (int i = 0; i < 8; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        track_ok(e, name, NULL);
    }
    CHECK(queued(e) == 5, "queued 5: %ld", queued(e));
    CHECK(disk_rows(dir) == 5, "5 rows on disk: %d", disk_rows(dir));
    CHECK(stat_int(e, "dropped", "queue_limit") == 3, "3 dropped for the limit: %ld",
          stat_int(e, "dropped", "queue_limit"));
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    const char *want[] = {"e3", "e4", "e5", "e6", "e7"};
    int same = json_array_size(events) == 5;
    for (size_t i = 0; same && i < 5; i++) same = str_eq(str_of(json_array_get(events, i), "name"), want[i]);
    CHECK(same, "the newest 5 arrive, oldest first (%zu stored)", json_array_size(events));
    json_decref(events);

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_oldest_dropped_past_the_byte_limit(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_limits(o, 10000, 2048, 65536, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    char *props = padded_props('p', 300);
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        track_ok(e, name, props);
    }
    free(props);
    long bytes = stat_int(e, "queued_bytes", NULL), count = queued(e);
    long dropped = stat_int(e, "dropped", "queue_limit");
    CHECK(bytes > 0 && bytes <= 2048, "queued_bytes within 2048: %ld", bytes);
    CHECK(dropped > 0 && dropped + count == 10, "dropped %ld + queued %ld = 10", dropped, count);
    CHECK(disk_rows(dir) == count, "disk rows %d = queued %ld", disk_rows(dir), count);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == (size_t)count, "server holds the %ld kept: %zu", count, server_event_count());
    CHECK(server_events_named("e9") == 1 && server_events_named("e0") == 0, "newest kept, oldest dropped");

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_default_limits_are_10000_events_and_5_mb(void) {
    if (skip_slow) {
        printf("skipped test_default_limits_are_10000_events_and_5_mb (APPNORTH_TEST_SKIP_SLOW)\n");
        return;
    }
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    /* 10000 events reach even the quiet threshold: keep them from leaving. */
    go_offline();
    for (int i = 0; i < 10002; i++) {
        int32_t q = 0;
        if (appnorth_events_track(e, "n", NULL, &q, NULL) != APPNORTH_OK || q != 1) {
            CHECK(0, "track %d failed", i);
            break;
        }
    }
    CHECK(queued(e) == 10000, "at most 10000 events: %ld", queued(e));
    CHECK(stat_int(e, "dropped", "queue_limit") == 2, "2 dropped: %ld", stat_int(e, "dropped", "queue_limit"));
    appnorth_error err;
    CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_OK, err); /* purge */
    CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);

    /* ~60 KB events: 5 MB hold about 87 of them. */
    char *props = padded_props('b', 60000);
    for (int i = 0; i < 100; i++) track_ok(e, "big", props);
    free(props);
    long bytes = stat_int(e, "queued_bytes", NULL);
    CHECK(bytes <= 5242880 && bytes > 5242880 - 70000, "queued bytes just under 5 MB: %ld", bytes);
    CHECK(queued(e) >= 80 && queued(e) < 100, "oldest big events dropped: %ld kept", queued(e));
    CHECK(stat_int(e, "dropped", "queue_limit") == 2 + (100 - queued(e)), "drops counted: %ld",
          stat_int(e, "dropped", "queue_limit"));
    CHECK(server_event_count() == 0, "nothing sent");
    clear_faults();

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_oversize_event_is_refused_and_the_queue_still_works(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;

    /* The default max_event_bytes is 65536 (the whole upload JSON). */
    char *huge = padded_props('h', 65536);
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "huge", huge, &q, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK(err.code == APPNORTH_E_TOO_LARGE && strlen(err.message) > 0, "message: %s", err.message);
    CHECK(q == 0, "not queued: %d", q);
    CHECK(disk_rows(dir) == 0 && queued(e) == 0, "nothing stored: %d", disk_rows(dir));
    free(huge);

    char *large = padded_props('l', 60000);
    track_ok(e, "large but fits", large);
    free(large);
    track_ok(e, "fine", NULL);
    CHECK(queued(e) == 2, "an oversize event never blocks the queue: %ld", queued(e));
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 2 && server_events_named("fine") == 1 && server_events_named("huge") == 0,
          "the two accepted events arrive: %zu", server_event_count());

    appnorth_events_free(e);

    /* A smaller configured limit. */
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_limits(o, 10000, 5242880, 512, &err), APPNORTH_OK, err);
    e = open_events(o);
    char *props = padded_props('z', 600);
    CHECK_STATUS(appnorth_events_track(e, "x", props, &q, &err), APPNORTH_E_TOO_LARGE, err);
    free(props);
    track_ok(e, "small", "{\"a\":1}");
    CHECK(queued(e) == 1 && disk_rows(dir) == 1, "only the small one: %ld", queued(e));

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

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
    time_t when = time(NULL) + 2;
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
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    long gap = first_retry_gap();
    CHECK(gap >= 900 && gap <= 3500, "waited until the HTTP date: %ld ms", gap);
    CHECK(server_event_count() == 2, "delivered: %zu", server_event_count());
    appnorth_events_free(e);

    /* Capped by retry_after_cap_ms (300 ms here instead of 60 s). */
    admin_request(server, "DELETE", "/admin/requests", NULL, NULL);
    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_retry(o, 10, 3, 300, 5, &err), APPNORTH_OK, err);
    e = open_events(o);
    track_ok(e, "capped", NULL);
    add_fault("{\"status\":429,\"count\":1,\"retry_after\":\"60\",\"path_prefix\":\"" EVENTS_PATH "\"}");
    start = mono_ms();
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    elapsed = mono_ms() - start;
    CHECK(elapsed >= 250 && elapsed < 3000, "Retry-After capped at 300 ms: %lld ms", (long long)elapsed);
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

/* ---- Consent ------------------------------------------------------------------ */

struct flusher { appnorth_events *e; int32_t status; };

static void *flush_in_background(void *arg) {
    struct flusher *f = arg;
    f->status = appnorth_events_flush(f->e, 20000, NULL);
    return NULL;
}

/* Polls until the server has taken every injected fault (5 s at most). */
static int eventually_faults_taken(void) {
    int64_t deadline = mono_ms() + 5000;
    for (;;) {
        json_t *reply = NULL;
        admin_request(server, "GET", "/admin/faults", NULL, &reply);
        size_t left = json_array_size(json_object_get(reply, "faults"));
        json_decref(reply);
        if (left == 0) return 1;
        if (mono_ms() >= deadline) return 0;
        sleep_ms(20);
    }
}

struct racer { appnorth_events *e; volatile int started; };

/* Tracks until the revocation refuses an event, at most 2,000 events: the
 * four racers stay below the flush threshold (10,000), which would start an
 * upload that may rightly send events before the revocation comes (the
 * first batch goes out a few ms after the threshold is crossed). */
static void *track_until_refused(void *arg) {
    struct racer *r = arg;
    __atomic_store_n(&r->started, 1, __ATOMIC_RELEASE);
    int32_t q = 1;
    for (int n = 0; n < 2000 && q == 1 && appnorth_events_track(r->e, "racer", NULL, &q, NULL) == APPNORTH_OK; n++) {
    }
    return NULL;
}

static void test_a_track_racing_a_revocation_is_never_stored_nor_sent(void) {
    if (skip_slow) {
        printf("skipped test_a_track_racing_a_revocation_is_never_stored_nor_sent (APPNORTH_TEST_SKIP_SLOW)\n");
        return;
    }
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    for (int round = 0; round < 20; round++) {
        CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);
        struct racer racers[4];
        pthread_t threads[4];
        for (int t = 0; t < 4; t++) {
            racers[t].e = e;
            racers[t].started = 0;
            CHECK(pthread_create(&threads[t], NULL, track_until_refused, &racers[t]) == 0, "racer thread");
        }
        for (int t = 0; t < 4; t++)
            while (!__atomic_load_n(&racers[t].started, __ATOMIC_ACQUIRE)) sleep_ms(1);
        CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_OK, err);
        CHECK(disk_rows(dir) == 0, "round %d: nothing stored once the revocation returned", round);
        for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
        CHECK(disk_rows(dir) == 0 && queued(e) == 0, "round %d: no late insert", round);
    }
    CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 0, "nothing tracked before a revocation went out: %zu", server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_revoking_during_a_slow_upload_sends_nothing_afterwards(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    for (int i = 0; i < 3; i++) track_ok(e, "before", NULL);
    /* Slow, then 503: a retry 10 ms later would deliver the batch if the
     * uploader did not see the revocation. */
    add_fault("{\"delay_ms\":1500,\"status\":503,\"path_prefix\":\"" EVENTS_PATH "\"}");
    struct flusher f = {e, -1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, flush_in_background, &f) == 0, "flusher thread");
    CHECK(eventually_faults_taken(), "the upload is in progress");
    CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_OK, err);
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "purged: %ld", queued(e));
    pthread_join(t, NULL);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err); /* after any retry of the old cycle */
    int64_t deadline = mono_ms() + 5000;
    while (event_post_count() < 1 && mono_ms() < deadline) sleep_ms(20);
    CHECK(event_post_count() == 1, "one slow attempt, never retried: %zu", event_post_count());
    CHECK(server_event_count() == 0, "nothing stored at the server: %zu", server_event_count());

    CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);
    track_ok(e, "after", NULL);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 1 && server_events_named("after") == 1, "only 'after' arrives: %zu",
          server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_consent_revoke_drops_purges_and_is_remembered(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;

    CHECK(consent_of(e) == APPNORTH_CONSENT_UNKNOWN, "unknown by default");
    track_ok(e, "before", NULL); /* queued before any choice */
    CHECK(disk_rows(dir) == 1, "1 row before revoking");
    CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_OK, err);
    CHECK(consent_of(e) == APPNORTH_CONSENT_REVOKED, "revoked");
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "revoking purges the queue: %d rows", disk_rows(dir));

    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "while revoked", "{\"a\":1}", &q, &err), APPNORTH_OK, err);
    CHECK(q == 0, "dropped silently: out_queued %d", q);
    CHECK(disk_rows(dir) == 0, "nothing stored while revoked");
    CHECK(stat_int(e, "dropped", "consent") == 2, "consent drops: %ld (1 purged + 1 dropped)",
          stat_int(e, "dropped", "consent"));
    json_t *s = stats(e);
    CHECK(str_eq(str_of(s, "consent"), "revoked"), "stats consent: %s", str_of(s, "consent"));
    json_decref(s);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(event_post_count() == 0, "nothing transmitted while revoked: %zu", event_post_count());
    CHECK_STATUS(appnorth_events_close(e, 0, &err), APPNORTH_OK, err);
    appnorth_events_free(e);

    /* A restart remembers the choice. */
    e = open_quiet(c, dir);
    CHECK(consent_of(e) == APPNORTH_CONSENT_REVOKED, "revoked after reopening: %d", consent_of(e));
    CHECK_STATUS(appnorth_events_track(e, "still revoked", NULL, &q, &err), APPNORTH_OK, err);
    CHECK(q == 0 && disk_rows(dir) == 0, "still dropped after reopening");

    CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);
    CHECK(consent_of(e) == APPNORTH_CONSENT_GRANTED, "granted");
    track_ok(e, "after grant", NULL);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    CHECK(json_array_size(events) == 1 && str_eq(str_of(json_array_get(events, 0), "name"), "after grant"),
          "only the event after the grant arrives: %zu", json_array_size(events));
    json_decref(events);
    appnorth_events_free(e);

    e = open_quiet(c, dir);
    CHECK(consent_of(e) == APPNORTH_CONSENT_GRANTED, "granted after reopening");
    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void test_require_consent_stores_nothing_before_a_choice(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_events_options *o = quiet_options(c, dir);
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_require_consent(o, 1, &err), APPNORTH_OK, err);
    appnorth_events *e = open_events(o);

    CHECK(consent_of(e) == APPNORTH_CONSENT_UNKNOWN, "no choice yet");
    int32_t q = -1;
    CHECK_STATUS(appnorth_events_track(e, "too early", NULL, &q, &err), APPNORTH_OK, err);
    CHECK(q == 0, "dropped: %d", q);
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "nothing stored before consent");
    CHECK_STATUS(appnorth_events_set_consent(e, 1, &err), APPNORTH_OK, err);
    track_ok(e, "allowed", NULL);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 1 && server_events_named("allowed") == 1, "only 'allowed' arrives: %zu",
          server_event_count());

    appnorth_events_free(e);
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Secure Storage and identity ------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    char *text;
    size_t len;
    int lines;
} log_capture;

static void capture_log(int32_t level, const char *message, void *user_data) {
    (void)level;
    log_capture *cap = user_data;
    pthread_mutex_lock(&cap->mu);
    size_t n = strlen(message);
    char *grown = realloc(cap->text, cap->len + n + 2);
    if (grown) {
        cap->text = grown;
        memcpy(cap->text + cap->len, message, n);
        cap->len += n;
        cap->text[cap->len++] = '\n';
        cap->text[cap->len] = 0;
        cap->lines++;
    }
    pthread_mutex_unlock(&cap->mu);
}

static void test_identity_persists_privately_and_never_in_logs(void) {
    admin_reset(server);
    char *root = make_temp_dir("events");
    char dir[1024];
    /* A data directory the library creates itself. */
    snprintf(dir, sizeof dir, "%s/data", root ? root : "/tmp");
    log_capture cap = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0};
    appnorth_client *c = make_client_for(APP, capture_log, &cap);
    appnorth_events *e = open_quiet(c, dir);
    appnorth_error err;
    CHECK(mode_of(dir, NULL) == 0700, "data dir created 0700: %o", mode_of(dir, NULL));

    char *anon = anonymous_id(e);
    CHECK_STATUS(appnorth_events_identify(e, "secret-user-77", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_set_push_token(e, "secret-push-99", &err), APPNORTH_OK, err);
    track_ok(e, "identified", NULL);
    /* Failures that the library logs: offline, then a discarded batch. */
    go_offline();
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_NETWORK, err);
    CHECK(!strstr(err.message, "secret") && (!anon || !strstr(err.message, anon)), "error message clean");
    clear_faults();
    /* 4 failures so far: a new session, so the 400 is not the breaker's 5th. */
    CHECK_STATUS(appnorth_events_start_session(e, &err), APPNORTH_OK, err);
    add_fault("{\"status\":400,\"count\":1,\"path_prefix\":\"" EVENTS_PATH "\"}");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_E_VALIDATION, err);
    /* A refused user id is not echoed either. */
    char long_id[300];
    memset(long_id, 's', sizeof long_id - 1);
    memcpy(long_id, "secret-", 7);
    long_id[sizeof long_id - 1] = 0;
    CHECK_STATUS(appnorth_events_identify(e, long_id, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(!strstr(err.message, "secret"), "refused user id not in the message: %s", err.message);
    CHECK_STATUS(appnorth_events_close(e, 0, &err), APPNORTH_OK, err);
    appnorth_events_free(e);

    CHECK(mode_of(dir, "identity.json") == 0600, "identity.json is 0600: %o", mode_of(dir, "identity.json"));
    CHECK(mode_of(dir, "appnorth.sqlite3") == 0600, "database is 0600: %o", mode_of(dir, "appnorth.sqlite3"));
    CHECK(mode_of(dir, NULL) == 0700, "data dir still 0700");
    char *file = read_file(dir, "identity.json");
    CHECK(file && strstr(file, "secret-push-99") && anon && strstr(file, anon), "identity.json holds the values");
    free(file);

    /* Reopen: the anonymous id and the user id come back. */
    e = open_quiet(c, dir);
    char *again = anonymous_id(e);
    CHECK(str_eq(again, anon), "anonymous id stable across reopening");
    track_ok(e, "after reopen", NULL);
    CHECK_STATUS(appnorth_events_reset(e, &err), APPNORTH_OK, err);
    track_ok(e, "after reset", NULL);
    CHECK_STATUS(appnorth_events_set_push_token(e, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    json_t *a = json_array_get(events, 0), *b = json_array_get(events, 1);
    CHECK(json_array_size(events) == 2, "2 events: %zu", json_array_size(events));
    CHECK(str_eq(str_of(a, "user_id"), "secret-user-77"), "user id survives a restart: %s", str_of(a, "user_id"));
    CHECK(str_eq(str_of(a, "anonymous_id"), anon), "anonymous id on the event");
    CHECK(json_is_null(json_object_get(b, "user_id")), "reset clears the user id");
    CHECK(str_eq(str_of(b, "anonymous_id"), anon), "reset keeps the anonymous id");
    json_decref(events);
    appnorth_string_free(again);
    again = anonymous_id(e);
    CHECK(str_eq(again, anon), "anonymous id unchanged by reset");
    appnorth_events_free(e);
    file = read_file(dir, "identity.json");
    CHECK(file && !strstr(file, "secret-push-99") && !strstr(file, "secret-user-77"),
          "cleared values leave identity.json");
    free(file);

    appnorth_client_free(c);
    pthread_mutex_lock(&cap.mu);
    CHECK(cap.lines > 0, "the failed flushes were logged");
    CHECK(!cap.text || (!strstr(cap.text, "secret") && !(anon && strstr(cap.text, anon))),
          "no identity value in the log:\n%s", cap.text ? cap.text : "");
    pthread_mutex_unlock(&cap.mu);
    free(cap.text);
    appnorth_string_free(anon);
    appnorth_string_free(again);
    remove_tree(root);
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

static int secret_key(const char *key) {
    if (key && strcmp(key, "anonymous_id") == 0) return K_ANON;
    if (key && strcmp(key, "user_id") == 0) return K_USER;
    if (key && strcmp(key, "push_token") == 0) return K_PUSH;
    return -1;
}

static int32_t secrets_get(void *user_data, const char *key, appnorth_buffer *out) {
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

static int32_t secrets_set(void *user_data, const char *key, const char *value) {
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

static void secrets_release(void *user_data) {
    host_secrets *s = user_data;
    if (!s || s->magic != SECRETS_MAGIC) {
        secrets_bad_user_data++;
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->releases++;
    pthread_mutex_unlock(&s->mu);
}

static void secrets_init(host_secrets *s) {
    memset(s, 0, sizeof *s);
    s->magic = SECRETS_MAGIC;
    pthread_mutex_init(&s->mu, NULL);
}

static void secrets_clear(host_secrets *s) {
    for (int k = 0; k < K_COUNT; k++) free(s->values[k]);
    pthread_mutex_destroy(&s->mu);
}

static const char *secret(host_secrets *s, int k) { return s->values[k]; }

static void test_host_secure_store_is_used_instead_of_the_file(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_error err;
    host_secrets s;
    secrets_init(&s);
    s.values[K_ANON] = strdup("host-anon-1");

    appnorth_events_options *o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_secure_store(o, secrets_get, secrets_set, secrets_release, &s, &err),
                 APPNORTH_OK, err);
    appnorth_events *e = open_events(o); /* frees the options */
    CHECK(s.releases == 0, "release not called while the handle lives: %d", s.releases);
    CHECK(s.gets > 0, "get was called: %d", s.gets);

    char *anon = anonymous_id(e);
    CHECK(str_eq(anon, "host-anon-1"), "the host's anonymous id is used: %s", anon);
    CHECK_STATUS(appnorth_events_identify(e, "u1", &err), APPNORTH_OK, err);
    CHECK(str_eq(secret(&s, K_USER), "u1"), "user id in the host store: %s", secret(&s, K_USER));
    CHECK_STATUS(appnorth_events_set_push_token(e, "push-1", &err), APPNORTH_OK, err);
    CHECK(str_eq(secret(&s, K_PUSH), "push-1"), "push token in the host store");
    track_ok(e, "hosted", NULL);
    CHECK_STATUS(appnorth_events_reset(e, &err), APPNORTH_OK, err);
    CHECK(secret(&s, K_USER) == NULL, "reset deletes the user id (set with NULL)");
    CHECK(str_eq(secret(&s, K_ANON), "host-anon-1"), "anonymous id kept");
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    json_t *events = server_events();
    json_t *ev = json_array_get(events, 0);
    CHECK(str_eq(str_of(ev, "anonymous_id"), "host-anon-1") && str_eq(str_of(ev, "user_id"), "u1"),
          "the uploaded event carries the host's ids");
    json_decref(events);
    CHECK(!path_exists(dir, "identity.json"), "no identity.json with a host store");

    /* A store that fails is reported as a storage error. */
    s.fail_set = 1;
    CHECK_STATUS(appnorth_events_identify(e, "u2", &err), APPNORTH_E_STORAGE, err);
    s.fail_set = 0;
    CHECK(s.unknown_keys == 0 && secrets_bad_user_data == 0, "only the documented keys, with our user_data");

    appnorth_events_free(e);
    CHECK(s.releases == 1, "release called once at free: %d", s.releases);
    appnorth_string_free(anon);
    secrets_clear(&s);

    /* A fresh store gets a new anonymous id written to it; a failing get
     * refuses to open, and release still comes once. */
    host_secrets fresh;
    secrets_init(&fresh);
    o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_secure_store(o, secrets_get, secrets_set, secrets_release, &fresh, &err),
                 APPNORTH_OK, err);
    e = open_events(o);
    anon = anonymous_id(e);
    CHECK(anon && str_eq(secret(&fresh, K_ANON), anon), "a new anonymous id is stored in the host store");
    appnorth_string_free(anon);
    appnorth_events_free(e);
    CHECK(fresh.releases == 1, "released once: %d", fresh.releases);
    secrets_clear(&fresh);

    host_secrets broken;
    secrets_init(&broken);
    broken.fail_get = 1;
    o = quiet_options(c, dir);
    CHECK_STATUS(appnorth_events_options_set_secure_store(o, secrets_get, secrets_set, secrets_release, &broken, &err),
                 APPNORTH_OK, err);
    e = (appnorth_events *)1;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_E_STORAGE, err);
    CHECK(e == NULL, "no handle on failure");
    appnorth_events_options_free(o);
    CHECK(broken.releases == 1, "released once after a failed open: %d", broken.releases);
    secrets_clear(&broken);

    CHECK(!path_exists(dir, "identity.json"), "still no identity.json");
    appnorth_client_free(c);
    remove_tree(dir);
}

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
    int64_t start = mono_ms();
    CHECK_STATUS(appnorth_events_close(e, 5000, &err), APPNORTH_OK, err);
    CHECK(mono_ms() - start < 5000, "within the bound");
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
    add_fault("{\"delay_ms\":5000,\"count\":1,\"path_prefix\":\"/v1/apps/" HANG_APP "/events\"}");
    int64_t start = mono_ms();
    appnorth_events_close(e, 300, &err);
    int64_t elapsed = mono_ms() - start;
    CHECK(elapsed < 2500, "close(300) returned in %lld ms while the server hangs 5 s", (long long)elapsed);
    CHECK(disk_rows(dir) == 1, "the unconfirmed event stays on disk: %d", disk_rows(dir));
    appnorth_events_free(e);
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
    add_fault("{\"delay_ms\":5000,\"count\":1,\"path_prefix\":\"/v1/apps/" HANG_APP "/events\"}");
    int64_t start = mono_ms();
    CHECK_STATUS(flush(e, 200, &err), APPNORTH_E_TIMEOUT, err);
    CHECK(mono_ms() - start < 1500, "flush(200) gave up in time: %lld ms", (long long)(mono_ms() - start));
    start = mono_ms();
    appnorth_events_free(e);
    int64_t elapsed = mono_ms() - start;
    CHECK(elapsed < 2500, "free aborted the upload within about a second: %lld ms", (long long)elapsed);
    CHECK(disk_rows(dir) == 1, "the event stays on disk: %d", disk_rows(dir));
    appnorth_client_free(c);
    remove_tree(dir);
}

/* ---- Bad input ---------------------------------------------------------------- */

static void expect_refused(int32_t rc, int32_t want, const appnorth_error *err, const char *what) {
    CHECK(rc == want, "%s: got %d (%s), want %d (%s): %s", what, rc, appnorth_status_str(rc), want,
          appnorth_status_str(want), err->message);
    CHECK(err->code == rc && err->http_status == 0 && strlen(err->message) > 0, "%s: err filled: %d '%s'", what,
          err->code, err->message);
}

static void test_bad_input_is_refused_and_nothing_is_stored(void) {
    admin_reset(server);
    char *dir = make_temp_dir("events");
    appnorth_client *c = app_client();
    appnorth_error err;
    int32_t q = -1;
    char *out = (char *)1;

    /* NULL handles. */
    appnorth_events_free(NULL);
    appnorth_events_options_free(NULL);
    expect_refused(appnorth_events_track(NULL, "x", NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "track NULL");
    CHECK(q == 0, "out_queued 0 on failure: %d", q);
    CHECK(strstr(err.message, "events") != NULL, "message names the handle: %s", err.message);
    expect_refused(appnorth_events_flush(NULL, 10, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "flush NULL");
    expect_refused(appnorth_events_close(NULL, 0, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "close NULL");
    expect_refused(appnorth_events_set_network_type(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "network NULL");
    expect_refused(appnorth_events_start_session(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "session NULL");
    expect_refused(appnorth_events_foreground(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "foreground NULL");
    expect_refused(appnorth_events_set_consent(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "consent NULL");
    int32_t state = 7;
    expect_refused(appnorth_events_consent(NULL, &state, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "get consent NULL");
    expect_refused(appnorth_events_identify(NULL, "u", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify NULL");
    expect_refused(appnorth_events_reset(NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "reset NULL");
    expect_refused(appnorth_events_set_push_token(NULL, "t", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "push NULL");
    expect_refused(appnorth_events_anonymous_id(NULL, &out, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "anon NULL");
    CHECK(out == NULL, "out_id NULL on failure");
    out = (char *)1;
    expect_refused(appnorth_events_stats(NULL, &out, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "stats NULL");
    CHECK(out == NULL, "out_json NULL on failure");
    CHECK(appnorth_events_track(NULL, "x", NULL, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "NULL err accepted");

    /* Options. */
    appnorth_events *e = (appnorth_events *)1;
    expect_refused(appnorth_events_new(NULL, &e, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "new NULL options");
    CHECK(e == NULL, "out_events NULL on failure");
    expect_refused(appnorth_events_options_set_client(NULL, c, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "set_client NULL options");
    expect_refused(appnorth_events_options_set_data_dir(NULL, dir, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "set_data_dir NULL options");
    appnorth_events_options *o = appnorth_events_options_new();
    expect_refused(appnorth_events_options_set_client(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL client");
    expect_refused(appnorth_events_options_set_data_dir(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL dir");
    expect_refused(appnorth_events_options_set_data_dir(o, "", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "empty dir");
    expect_refused(appnorth_events_options_set_flush_policy(o, 0, 20, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "interval 0");
    expect_refused(appnorth_events_options_set_flush_policy(o, 30000, 0, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "threshold 0");
    expect_refused(appnorth_events_options_set_flush_policy(o, 30000, 10001, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "threshold 10001");
    expect_refused(appnorth_events_options_set_limits(o, 0, 5242880, 65536, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "max_events 0");
    expect_refused(appnorth_events_options_set_retry(o, 0, 3, 120000, 5, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "base 0");
    expect_refused(appnorth_events_options_set_retry(o, 1000, 3, 120000, 0, &err), APPNORTH_E_INVALID_ARGUMENT, &err,
                   "breaker 0");
    expect_refused(appnorth_events_options_set_secure_store(o, NULL, secrets_set, NULL, NULL, &err),
                   APPNORTH_E_INVALID_ARGUMENT, &err, "secure store without get");
    expect_refused(appnorth_events_options_set_secure_store(o, secrets_get, NULL, NULL, NULL, &err),
                   APPNORTH_E_INVALID_ARGUMENT, &err, "secure store without set");
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    e = (appnorth_events *)1;
    expect_refused(appnorth_events_new(o, &e, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "no client");
    CHECK(strstr(err.message, "client") != NULL, "message names the client: %s", err.message);
    CHECK(e == NULL, "no handle");
    appnorth_events_options_free(o);
    o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, c, &err), APPNORTH_OK, err);
    expect_refused(appnorth_events_new(o, &e, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "no data dir");
    CHECK(strstr(err.message, "dir") != NULL, "message names the data directory: %s", err.message);
    expect_refused(appnorth_events_new(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL out_events");
    appnorth_events_options_free(o);
    CHECK(!path_exists(dir, "appnorth.sqlite3"), "no database made by refused opens");

    /* Calls on a good handle. */
    e = open_quiet(c, dir);
    char name[600];
    memset(name, 'n', 257);
    name[257] = 0;
    q = -1;
    expect_refused(appnorth_events_track(e, NULL, NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "NULL name");
    CHECK(q == 0, "out_queued 0");
    expect_refused(appnorth_events_track(e, "", NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "empty name");
    expect_refused(appnorth_events_track(e, name, NULL, &q, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "257 chars");
    expect_refused(appnorth_events_track(e, "bad\xff", NULL, &q, &err), APPNORTH_E_INVALID_UTF8, &err, "bad UTF-8 name");
    const char *bad_json[] = {"[1]", "{\"a\":", "\"text\"", "null", "42", "", "{} {}", "{\"a\":1,}",
                              /* as jansson judges them: a lone surrogate, a double overflow,
                               * \u0000 in a key, a leading zero */
                              "{\"a\":\"\\uD800\"}", "{\"n\":1e400}", "{\"a\\u0000\":1}", "{\"n\":01}"};
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "properties '%s'", bad_json[i]);
        q = -1;
        expect_refused(appnorth_events_track(e, "x", bad_json[i], &q, &err), APPNORTH_E_INVALID_JSON, &err, what);
        CHECK(q == 0, "%s: out_queued 0", what);
    }
    expect_refused(appnorth_events_track(e, "x", "{\"a\":1,}", &q, &err), APPNORTH_E_INVALID_JSON, &err, "trailing comma");
    CHECK(strstr(err.message, "string or '}' expected") && strstr(err.message, "byte 7"),
          "the message says what and where: %s", err.message);
    expect_refused(appnorth_events_track(e, "x", "{\"a\":\"\xff\xfe\"}", &q, &err), APPNORTH_E_INVALID_UTF8, &err,
                   "properties bad UTF-8");
    expect_refused(appnorth_events_set_network_type(e, 9, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "network 9");
    expect_refused(appnorth_events_set_network_type(e, -1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "network -1");
    expect_refused(appnorth_events_identify(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify NULL");
    expect_refused(appnorth_events_identify(e, "", &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify empty");
    expect_refused(appnorth_events_identify(e, name, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "identify 257 bytes");
    expect_refused(appnorth_events_flush(e, -1, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "flush -1");
    expect_refused(appnorth_events_consent(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "consent NULL out");
    expect_refused(appnorth_events_anonymous_id(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "anon NULL out");
    expect_refused(appnorth_events_stats(e, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, &err, "stats NULL out");
    CHECK(queued(e) == 0 && disk_rows(dir) == 0, "nothing stored by refused calls: %d", disk_rows(dir));

    /* The edges that are fine: 256 characters, counted as characters. */
    name[256] = 0;
    track_ok(e, name, NULL);
    char wide[600];
    for (int i = 0; i < 256; i++) memcpy(wide + 2 * i, "\xc3\xa9", 2); /* é: 256 characters, 512 bytes */
    wide[512] = 0;
    track_ok(e, wide, NULL);
    CHECK(disk_rows(dir) == 2, "2 stored: %d", disk_rows(dir));
    CHECK_STATUS(flush(e, 5000, &err), APPNORTH_OK, err);
    CHECK(server_event_count() == 2 && server_events_named(name) == 1 && server_events_named(wide) == 1,
          "the server accepts 256-character names: %zu", server_event_count());

    appnorth_events_free(e);
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

/* ---- main ------------------------------------------------------------------- */

int main(void) {
    server = test_start("test_events", 180);
    if (!server) return 2;
    const char *slow = getenv("APPNORTH_TEST_SKIP_SLOW");
    skip_slow = slow && *slow && strcmp(slow, "0") != 0;
    curl_global_init(CURL_GLOBAL_ALL);
    (void)admin_board; /* admin.h helpers this suite does not need */
    (void)admin_idea;

    RUN(test_bad_input_is_refused_and_nothing_is_stored);
    /* Event Queue */
    RUN(test_track_is_on_disk_before_it_returns);
    RUN(test_events_survive_a_restart);
    RUN(test_flush_sent_counts_delivered_events);
    RUN(test_event_fields_and_verbatim_properties);
    RUN(test_properties_with_huge_numbers_are_sent_verbatim);
    RUN(test_nul_escape_accepted_and_oversize_properties_refused_at_the_door);
    RUN(test_defaults_are_the_seeds_numbers);
    RUN(test_threshold_flush);
    RUN(test_timer_flush);
    RUN(test_batch_size_follows_the_network_type);
    RUN(test_oldest_dropped_past_the_count_limit);
    RUN(test_oldest_dropped_past_the_byte_limit);
    RUN(test_default_limits_are_10000_events_and_5_mb);
    RUN(test_oversize_event_is_refused_and_the_queue_still_works);
    /* Retry Policy and Error Handling */
    RUN(test_server_errors_retried_three_times_then_kept);
    RUN(test_network_errors_keep_the_events);
    RUN(test_client_errors_discard_the_batch);
    RUN(test_408_and_429_are_kept_and_retried);
    RUN(test_429_honours_retry_after);
    RUN(test_413_splits_the_batch_and_drops_a_single_oversize_event);
    /* Circuit Breaker */
    RUN(test_circuit_breaker_trips_at_the_5th_failure_until_a_new_session);
    RUN(test_foreground_resumes_uploads);
    RUN(test_one_success_resets_the_failure_count);
    RUN(test_dropped_4xx_batches_count_toward_the_breaker);
    /* One bad event */
    RUN(test_one_rejected_event_leaves_its_batch_mates_delivered);
    /* Consent */
    RUN(test_consent_revoke_drops_purges_and_is_remembered);
    RUN(test_require_consent_stores_nothing_before_a_choice);
    RUN(test_revoking_during_a_slow_upload_sends_nothing_afterwards);
    RUN(test_a_track_racing_a_revocation_is_never_stored_nor_sent);
    /* Secure Storage */
    RUN(test_identity_persists_privately_and_never_in_logs);
    RUN(test_host_secure_store_is_used_instead_of_the_file);
    /* Crashes and shutdown */
    RUN(test_a_resend_after_a_crash_is_deduplicated);
    RUN(test_close_flushes_within_its_bound);
    RUN(test_close_is_bounded_while_the_server_hangs);
    RUN(test_free_aborts_an_upload_in_progress);
    /* Threads */
    RUN(test_eight_threads_track_while_flushes_and_consent_changes_run);

    curl_global_cleanup();
    return check_summary();
}
