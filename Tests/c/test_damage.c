/* Damaged stores and the known crashers: extreme and garbage values in
 * every stored column (config and cache rows, queue blobs, event rows, the
 * identity file, the consent row). Reopening drops the damaged item, logs
 * it, and carries on; nothing traps. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "journal.h"
#include "support.h"

#define APP "tdamage-app"
#define EVENTS_PATH "/v1/apps/" APP "/events"

static const char *server;

/* ---- log capture (log lines may come from library threads) -------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[65536];

static void capture_log(int32_t level, const char *message, void *user_data) {
    (void)level;
    (void)user_data;
    pthread_mutex_lock(&log_lock);
    size_t used = strlen(log_text);
    snprintf(log_text + used, sizeof log_text - used, "%s\n", message);
    pthread_mutex_unlock(&log_lock);
}

static void log_clear(void) {
    pthread_mutex_lock(&log_lock);
    log_text[0] = 0;
    pthread_mutex_unlock(&log_lock);
}

static int log_has(const char *needle) {
    pthread_mutex_lock(&log_lock);
    int found = strstr(log_text, needle) != NULL;
    pthread_mutex_unlock(&log_lock);
    return found;
}

/* ---- the data directory's database ----------------------------------------- */

static void sql(const char *dir, const char *statement) {
    char path[512];
    snprintf(path, sizeof path, "%s/appnorth.sqlite3", dir);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open(path, &db) == SQLITE_OK, "open %s", path);
    sqlite3_busy_timeout(db, 5000);
    char *message = NULL;
    CHECK(sqlite3_exec(db, statement, NULL, NULL, &message) == SQLITE_OK, "%s: %s", statement,
          message ? message : "");
    sqlite3_free(message);
    sqlite3_close(db);
}

static long sql_count(const char *dir, const char *query) {
    char path[512];
    snprintf(path, sizeof path, "%s/appnorth.sqlite3", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long n = -1;
    if (sqlite3_open(path, &db) == SQLITE_OK && sqlite3_prepare_v2(db, query, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = (long)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
}

/* Writes a kv row whose value is the SQL expression `value`. */
static void put_row(const char *dir, const char *ns, const char *key, const char *value, const char *updated) {
    char statement[8192];
    snprintf(statement, sizeof statement,
             "INSERT OR REPLACE INTO kv (namespace, key, value, updated_ms) VALUES ('%s', '%s', %s, %s)", ns, key,
             value, updated);
    sql(dir, statement);
}

static appnorth_client *logging_client(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, APP, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 3000, 3000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_logger(o, capture_log, APPNORTH_LOG_DEBUG, NULL, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

/* ---- config rows ------------------------------------------------------------ */

static int32_t open_config(appnorth_client *client, const char *dir, appnorth_config **out, appnorth_error *err) {
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, client, err), APPNORTH_OK, *err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, dir, err), APPNORTH_OK, *err);
    int32_t rc = appnorth_config_new(o, out, err);
    appnorth_config_options_free(o);
    return rc;
}

static void test_damaged_config_rows_are_dropped(void) {
    /* No config on the server: the revalidation that a read of the default
     * tier starts must find nothing to store, or its row would race the
     * "row deleted" checks below. */
    admin_request(server, "POST", "/admin/reset", "{}", NULL);
    char *dir = make_temp_dir("damage-config");
    appnorth_client *client = logging_client();
    appnorth_error err;
    appnorth_config *config = NULL;
    CHECK_STATUS(open_config(client, dir, &config, &err), APPNORTH_OK, err); /* creates the schema */
    appnorth_config_free(config);

    static const char *damaged[] = {
        "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"etag\":\"\\\"1\\\"\",\"config_version\":1,"
        "\"fetched_ms\":-9223372036854775808,\"config\":\"{\\\"a\\\":1}\"}'",
        "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"etag\":null,\"config_version\":null,"
        "\"fetched_ms\":-9223372036854775807,\"config\":\"{\\\"a\\\":1}\"}'",
        "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"etag\":null,\"config_version\":null,"
        "\"fetched_ms\":-1,\"config\":\"{\\\"a\\\":1}\"}'",
        "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"etag\":null,\"config_version\":null,"
        "\"fetched_ms\":9223372036854775807,\"config\":\"{\\\"a\\\":1}\"}'",
        "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"fetched_ms\":\"soon\",\"config\":\"{\\\"a\\\":1}\"}'",
        "'{\"format\":\"appnorth.config-cache\",\"version\":-9223372036854775808,\"fetched_ms\":1,\"config\":\"[1]\"}'",
        "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"fetched_ms\":1.5e300,\"config\":\"{\\\"a\\\":1}\"}'",
        "'garbage'",
        "x'00ff00ff'",
        "x''",
        "-9223372036854775808",
    };
    for (size_t i = 0; i < sizeof damaged / sizeof damaged[0]; i++) {
        put_row(dir, "config", APP, damaged[i], i % 2 ? "-9223372036854775808" : "9223372036854775807");
        log_clear();
        config = NULL;
        CHECK_STATUS(open_config(client, dir, &config, &err), APPNORTH_OK, err);
        if (!config) continue;
        int32_t tier = -1;
        int64_t fetched = -1;
        CHECK_STATUS(appnorth_config_source(config, &tier, &fetched, &err), APPNORTH_OK, err);
        CHECK(tier == APPNORTH_CONFIG_TIER_DEFAULT, "row %zu dropped: tier %d", i, tier);
        int64_t a = 0;
        CHECK_STATUS(appnorth_config_get_int(config, "a", 7, &a, &err), APPNORTH_OK, err);
        CHECK(a == 7, "row %zu: the damaged document is not served (a = %lld)", i, (long long)a);
        CHECK(log_has("discarding an unreadable cached config"), "row %zu logged: %s", i, log_text);
        CHECK(sql_count(dir, "SELECT COUNT(*) FROM kv WHERE namespace = 'config'") == 0, "row %zu deleted", i);
        appnorth_config_free(config);
    }

    /* A sound row with an extreme updated_ms column still loads. */
    char good[512];
    snprintf(good, sizeof good,
             "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"etag\":null,\"config_version\":null,"
             "\"fetched_ms\":%lld,\"config\":\"{\\\"a\\\":1}\"}'",
             (long long)wall_ms());
    put_row(dir, "config", APP, good, "-9223372036854775808");
    config = NULL;
    CHECK_STATUS(open_config(client, dir, &config, &err), APPNORTH_OK, err);
    int32_t tier = -1;
    CHECK_STATUS(appnorth_config_source(config, &tier, NULL, &err), APPNORTH_OK, err);
    CHECK(tier == APPNORTH_CONFIG_TIER_CACHED, "a sound row loads: tier %d", tier);
    appnorth_config_free(config);

    /* Issue 23: a stored ETag that is no entity tag (a CR LF in it) is
     * dropped, and the cached config with it is kept. */
    snprintf(good, sizeof good,
             "'{\"format\":\"appnorth.config-cache\",\"version\":1,\"etag\":\"\\\"1\\\"\\r\\nX-Injected: 1\","
             "\"config_version\":1,\"fetched_ms\":%lld,\"config\":\"{\\\"a\\\":1}\"}'",
             (long long)wall_ms());
    put_row(dir, "config", APP, good, "1");
    config = NULL;
    log_clear();
    CHECK_STATUS(open_config(client, dir, &config, &err), APPNORTH_OK, err);
    tier = -1;
    CHECK_STATUS(appnorth_config_source(config, &tier, NULL, &err), APPNORTH_OK, err);
    CHECK(tier == APPNORTH_CONFIG_TIER_CACHED, "a row with a bad ETag still loads: tier %d", tier);
    CHECK(!log_has("discarding an unreadable cached config"), "not counted as damaged: %s", log_text);
    int64_t cached_a = 0;
    CHECK_STATUS(appnorth_config_get_int(config, "a", 7, &cached_a, &err), APPNORTH_OK, err);
    CHECK(cached_a == 1, "the cached value is served (a = %lld)", (long long)cached_a);
    appnorth_config_free(config);

    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- cache rows -------------------------------------------------------------- */

static void test_damaged_cache_entries_are_dropped(void) {
    char *dir = make_temp_dir("damage-cache");
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "cache", &storage, &err), APPNORTH_OK, err);

    char blob[4096];
    snprintf(blob, sizeof blob,
             "'{\"format\":\"appnorth.read-cache\",\"version\":1,\"entries\":["
             "{\"kind\":\"boards\",\"scope\":\"min\",\"query\":\"\",\"value\":\"[1]\",\"stored_ms\":-9223372036854775808},"
             "{\"kind\":\"boards\",\"scope\":\"max\",\"query\":\"\",\"value\":\"[1]\",\"stored_ms\":9223372036854775807},"
             "{\"kind\":\"boards\",\"scope\":\"neg\",\"query\":\"\",\"value\":\"[1]\",\"stored_ms\":-1},"
             "{\"kind\":\"boards\",\"scope\":\"text\",\"query\":\"\",\"value\":\"[1]\",\"stored_ms\":\"x\"},"
             "{\"kind\":\"boards\",\"scope\":\"real\",\"query\":\"\",\"value\":\"[1]\",\"stored_ms\":1e300},"
             "{\"kind\":\"nonsense\",\"scope\":\"kind\",\"query\":\"\",\"value\":\"[1]\",\"stored_ms\":1},"
             "{\"kind\":\"boards\",\"scope\":\"value\",\"query\":\"\",\"value\":\"[1\",\"stored_ms\":%lld},"
             "{\"kind\":\"boards\",\"scope\":\"good\",\"query\":\"\",\"value\":\"[2]\",\"stored_ms\":%lld}]}'",
             (long long)wall_ms(), (long long)wall_ms());
    static const char *scopes[] = {"min", "max", "neg", "text", "real", "kind", "value"};
    static const char *updated[] = {"-9223372036854775808", "9223372036854775807", "0"};
    for (int round = 0; round < 3; round++) {
        put_row(dir, "blob", "cache", blob, updated[round]);
        appnorth_cache *cache = NULL;
        CHECK_STATUS(appnorth_cache_new(storage, 0, NULL, &cache, &err), APPNORTH_OK, err);
        if (!cache) continue;
        for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++) {
            char *json = (char *)1;
            CHECK_STATUS(appnorth_cache_boards(cache, scopes[i], &json, &err), APPNORTH_OK, err);
            CHECK(json == NULL, "damaged entry '%s' reads as absent", scopes[i]);
        }
        char *json = NULL;
        CHECK_STATUS(appnorth_cache_boards(cache, "good", &json, &err), APPNORTH_OK, err);
        CHECK(json && strcmp(json, "[2]") == 0, "the sound entry survives: %s", json ? json : "(null)");
        appnorth_string_free(json);
        appnorth_cache_free(cache);
    }

    /* Not JSON at all: an empty cache (a cache is rebuilt from the network). */
    put_row(dir, "blob", "cache", "x'ff00fe'", "0");
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 0, NULL, &cache, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, "s", "[3]", &err), APPNORTH_OK, err);
    char *json = NULL;
    CHECK_STATUS(appnorth_cache_boards(cache, "s", &json, &err), APPNORTH_OK, err);
    CHECK(json && strcmp(json, "[3]") == 0, "the cache carries on: %s", json ? json : "(null)");
    appnorth_string_free(json);
    appnorth_cache_free(cache);
    appnorth_storage_free(storage);
    remove_tree(dir);
}

/* ---- queue blobs ------------------------------------------------------------- */

static void test_damaged_queue_entries_are_dropped(void) {
    char *dir = make_temp_dir("damage-queue");
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "queue", &storage, &err), APPNORTH_OK, err);
    appnorth_queue *queue = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &queue, &err), APPNORTH_OK, err); /* creates the schema */
    appnorth_queue_free(queue);

#define ENTRY(id, created, body) \
    "{\"id\":\"" id "\",\"scope\":\"s\",\"kind\":\"feedback\",\"path\":\"/feedback\",\"body\":" body \
    ",\"idempotency_key\":\"k-" id "\",\"created_ms\":" created "}"
    put_row(dir, "blob", "queue",
            "'{\"format\":\"appnorth.offline-queue\",\"version\":1,\"entries\":["
            ENTRY("good", "1700000000000", "\"{\\\"text\\\":\\\"hi\\\"}\"") ","
            ENTRY("created-min", "-9223372036854775808", "\"{\\\"text\\\":\\\"hi\\\"}\"") ","
            ENTRY("created-max", "9223372036854775807", "\"{\\\"text\\\":\\\"hi\\\"}\"") ","
            ENTRY("body-garbage", "1", "\"not json\"") ","
            ENTRY("body-number", "1", "5") ","
            "{\"id\":\"no-path\",\"scope\":\"s\",\"kind\":\"feedback\",\"body\":\"{}\",\"idempotency_key\":\"k\",\"created_ms\":1},"
            "{\"id\":\"bad-path\",\"scope\":\"s\",\"kind\":\"feedback\",\"path\":\"http://elsewhere/x\",\"body\":\"{}\","
            "\"idempotency_key\":\"k2\",\"created_ms\":1},"
            "7]}'",
            "-9223372036854775808");
#undef ENTRY
    queue = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &queue, &err), APPNORTH_OK, err);
    if (queue) {
        int32_t count = -1;
        CHECK_STATUS(appnorth_queue_pending_count(queue, &count, &err), APPNORTH_OK, err);
        CHECK(count == 3, "the three sound entries stay, the damaged ones go: %d", count);
        char *json = NULL;
        CHECK_STATUS(appnorth_queue_entries(queue, &json, &err), APPNORTH_OK, err);
        json_t *list = json ? json_loads(json, 0, NULL) : NULL;
        size_t i;
        json_t *item;
        json_array_foreach(list, i, item) {
            json_int_t created = json_integer_value(json_object_get(item, "created_ms"));
            CHECK(created >= 0 && created <= 253402300799999LL, "created_ms within the stored range: %lld",
                  (long long)created);
        }
        json_decref(list);
        appnorth_string_free(json);
        appnorth_queue_free(queue);
    }

    /* A blob that is not a queue at all is refused with a status (it may be
     * another component's data); erasing the storage recovers. */
    put_row(dir, "blob", "queue", "x'ff00'", "0");
    queue = NULL;
    CHECK_STATUS(appnorth_queue_new(storage, 0, &queue, &err), APPNORTH_E_STORAGE, err);
    CHECK_STATUS(appnorth_storage_erase(storage, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_queue_new(storage, 0, &queue, &err), APPNORTH_OK, err);
    appnorth_queue_free(queue);
    appnorth_storage_free(storage);
    remove_tree(dir);
}

/* ---- event rows, identity file, consent row ---------------------------------- */

static appnorth_events *open_events(appnorth_client *client, const char *dir, int32_t cap_ms) {
    appnorth_error err;
    appnorth_events_options *o = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(o, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_flush_policy(o, 3600000, 10000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_retry(o, 10, 3, cap_ms, 5, &err), APPNORTH_OK, err);
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(o, &e, &err), APPNORTH_OK, err);
    appnorth_events_options_free(o);
    return e;
}

static void track(appnorth_events *e, const char *name) {
    appnorth_error err;
    int32_t queued = -1;
    CHECK_STATUS(appnorth_events_track(e, name, NULL, &queued, &err), APPNORTH_OK, err);
    CHECK(queued == 1, "'%s' queued", name);
}

static size_t server_events_named(const char *name) {
    json_t *state = NULL;
    long status = admin_request(server, "GET", "/admin/apps/" APP "/state", NULL, &state);
    CHECK(status == 200 && state, "admin state: HTTP %ld", status);
    size_t i, n = 0;
    json_t *e;
    json_array_foreach(json_object_get(state, "events"), i, e) {
        const char *got = json_string_value(json_object_get(e, "name"));
        if (got && strcmp(got, name) == 0) n++;
    }
    json_decref(state);
    return n;
}

static void test_damaged_event_rows_are_dropped(void) {
    admin_request(server, "POST", "/admin/reset", "{}", NULL);
    char *dir = make_temp_dir("damage-events");
    appnorth_client *client = logging_client();
    appnorth_error err;
    appnorth_events *e = open_events(client, dir, 120000);
    track(e, "good1");
    track(e, "bytes-min");
    track(e, "bytes-max");
    track(e, "seq-max");
    appnorth_events_free(e);

    sql(dir, "UPDATE events SET bytes = -9223372036854775808 WHERE instr(CAST(payload AS TEXT), '\"bytes-min\"') > 0;"
             "UPDATE events SET bytes = 9223372036854775807 WHERE instr(CAST(payload AS TEXT), '\"bytes-max\"') > 0;"
             "INSERT INTO events (seq, id, payload, bytes) VALUES (-9223372036854775808, 'g1', 'garbage', 7);"
             "INSERT INTO events (id, payload, bytes) VALUES ('g2', x'ff00fe', -1);"
             "INSERT INTO events (id, payload, bytes) VALUES ('g3', '[1,2]', 0);"
             "INSERT INTO events (id, payload, bytes) VALUES ('g4', 12345, 9223372036854775807);"
             "INSERT INTO events (id, payload, bytes) VALUES ('g5', '{\"id\":\"g5\",\"name\":\"n\","
             "\"timestamp\":-9223372036854775808,\"properties\":{}}', 60);"
             "INSERT INTO events (id, payload, bytes) VALUES ('g6', '{\"name\":\"n\",\"timestamp\":1}', 30);"
             "INSERT INTO events (id, payload, bytes) VALUES ('g7', '{\"id\":\"g7\",\"name\":\"n\",\"timestamp\":\"x\"}', 40);"
             /* Last: with this row in place AUTOINCREMENT has no number left. */
             "UPDATE events SET seq = 9223372036854775807 WHERE instr(CAST(payload AS TEXT), '\"seq-max\"') > 0;"
             "UPDATE sqlite_sequence SET seq = 9223372036854775807 WHERE name = 'events';");

    CHECK(sql_count(dir, "SELECT COUNT(*) FROM events WHERE seq > 4611686018427387904") == 1, "the seq row is in place");
    CHECK(sql_count(dir, "SELECT COUNT(*) FROM events") == 11, "11 rows: %ld", sql_count(dir, "SELECT COUNT(*) FROM events"));
    log_clear();
    /* The server refuses one event by id: its row (bytes column INT64_MIN)
     * is removed without trusting that column. Set before the reopen, whose
     * start-up upload may already send it. */
    CHECK(admin_request(server, "POST", "/admin/settings", "{\"rejected_event_names\":[\"bytes-min\"]}", NULL) == 200,
          "settings");
    e = open_events(client, dir, 120000);
    CHECK(e != NULL, "the queue opens over damaged rows");
    if (e) {
        CHECK(log_has("impossible sequence number"), "the seq row is logged: %s", log_text);
        track(e, "after");
        CHECK_STATUS(appnorth_events_flush(e, 20000, &err), APPNORTH_OK, err);
        CHECK(admin_request(server, "POST", "/admin/settings", "{\"rejected_event_names\":[]}", NULL) == 200, "settings");
        CHECK(log_has("damaged event row"), "damaged payloads are logged: %s", log_text);
        CHECK(server_events_named("good1") == 1, "good1 delivered");
        CHECK(server_events_named("bytes-min") == 0, "the rejected event is dropped, not delivered");
        CHECK(server_events_named("bytes-max") == 1, "a damaged bytes column does not stop an event");
        CHECK(server_events_named("after") == 1, "tracking carries on after a damaged sequence");
        CHECK(sql_count(dir, "SELECT COUNT(*) FROM events") == 0, "nothing damaged is left behind");
        appnorth_events_free(e);
    }
    appnorth_client_free(client);
    remove_tree(dir);
}

static void write_file(const char *dir, const char *name, const void *bytes, size_t length) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    CHECK(fwrite(bytes, 1, length, f) == length, "write %s", path);
    fclose(f);
}

/* ---- damaged event journals ---------------------------------------------------- */

/* Journals left by ended processes, damaged every way a file can be: a
 * flipped payload byte (bad checksum), a huge length, a length too small,
 * a torn tail, garbage, an empty file. Opening the queue imports the sound
 * records, skips and counts the rest, and never crashes. */
static void test_damaged_event_journals_are_skipped(void) {
    admin_request(server, "POST", "/admin/reset", "{}", NULL);
    char *source = make_temp_dir("damage-journal-src");
    char *dir = make_temp_dir("damage-journal");
    appnorth_client *client = logging_client();
    appnorth_error err;
    /* Real records: tracked by a handle on another directory, copied from
     * its live journal, never sent from there. */
    appnorth_events *writer = open_events(client, source, 120000);
    const char *names[] = {"jd-0", "jd-1", "jd-2", "jd-3", "jd-4", "jd-5"};
    for (int i = 0; i < 6; i++) track(writer, names[i]);
    char path[1024];
    size_t len = 0;
    unsigned char *bytes = journal_first_path(source, path, sizeof path) ? journal_read_file(path, &len) : NULL;
    CHECK(bytes != NULL, "the writer's journal is readable");
    size_t at[7] = {0};
    for (int i = 0; bytes && i < 6; i++) {
        uint32_t n = (uint32_t)bytes[at[i] + 4] | (uint32_t)bytes[at[i] + 5] << 8 | (uint32_t)bytes[at[i] + 6] << 16;
        at[i + 1] = at[i] + JOURNAL_HEADER + n;
    }
    CHECK(bytes && at[6] == len, "6 records in the journal: %zu of %zu bytes", at[6], len);
    if (bytes && at[6] == len) {
        unsigned char *copy = malloc(len);
        /* jd-0 sound, jd-1 with a flipped payload byte, jd-2 sound. */
        memcpy(copy, bytes, at[3]);
        copy[at[1] + JOURNAL_HEADER + 20] ^= 0x20;
        write_file(dir, "events-4000001-0000000000000001.journal", copy, at[3]);
        /* jd-3 claims 4 GiB. */
        memcpy(copy, bytes + at[3], at[4] - at[3]);
        memset(copy + 4, 0xff, 4);
        write_file(dir, "events-4000002-0000000000000002.journal", copy, at[4] - at[3]);
        /* jd-4 claims 3 bytes, then jd-5 torn in its payload. */
        memcpy(copy, bytes + at[4], len - at[4]);
        copy[4] = 3, copy[5] = 0, copy[6] = 0, copy[7] = 0;
        write_file(dir, "events-4000003-0000000000000003.journal", copy, len - at[4] - 10);
        write_file(dir, "events-4000004-0000000000000004.journal", "ANJ1\xff\xff\xff\x7fgarbage", 15);
        write_file(dir, "events-4000005-0000000000000005.journal", "", 0);
        free(copy);
    }
    free(bytes);
    appnorth_events_free(writer);

    log_clear();
    appnorth_events *e = open_events(client, dir, 120000);
    CHECK(e != NULL, "the queue opens over damaged journals");
    if (e) {
        CHECK(log_has("damaged stretch"), "damage is logged: %s", log_text);
        char *stats = NULL;
        CHECK_STATUS(appnorth_events_stats(e, &stats, &err), APPNORTH_OK, err);
        json_t *s = stats ? json_loads(stats, 0, NULL) : NULL;
        CHECK(json_integer_value(json_object_get(s, "queued")) == 2, "the 2 sound records are queued: %s", stats);
        /* One stretch per file: jd-4's bad length runs into jd-5's torn tail. */
        CHECK(json_integer_value(json_object_get(json_object_get(s, "dropped"), "damaged")) == 4,
              "4 damaged stretches counted: %s", stats);
        json_decref(s);
        appnorth_string_free(stats);
        CHECK_STATUS(appnorth_events_flush(e, 20000, &err), APPNORTH_OK, err);
        CHECK(server_events_named("jd-0") == 1 && server_events_named("jd-2") == 1, "the sound records arrive");
        for (int i = 1; i < 6; i++)
            if (i != 2) CHECK(server_events_named(names[i]) == 0, "damaged %s is not sent", names[i]);
        char left[1024];
        CHECK(!journal_first_path(dir, left, sizeof left) || strstr(left, "events-4000") == NULL,
              "the damaged journals are removed: %s", left);
        appnorth_events_free(e);
    }
    appnorth_client_free(client);
    remove_tree(source);
    remove_tree(dir);
}

static int is_uuid(const char *id) {
    if (!id || strlen(id) != 36) return 0;
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? id[i] != '-' : !strchr("0123456789abcdef", id[i])) return 0;
    }
    return 1;
}

static void test_damaged_identity_file_starts_afresh(void) {
    char *dir = make_temp_dir("damage-identity");
    appnorth_client *client = logging_client();
    appnorth_error err;
    appnorth_events_free(open_events(client, dir, 120000)); /* the folder and files exist */

    char *long_id = malloc(5001);
    memset(long_id, 'x', 5000);
    long_id[5000] = 0;
    char *long_file = malloc(5200);
    snprintf(long_file, 5200, "{\"anonymous_id\":\"%s\",\"user_id\":\"%s\"}", long_id, long_id);
    const char *files[] = {
        "not json",
        "{\"anonymous_id\":5,\"user_id\":[1]}",
        "{\"anonymous_id\":\"\",\"user_id\":\"\"}",
        "{\"anonymous_id\":-9223372036854775808}",
        "[\"anonymous_id\"]",
        "\xff\xfe\x00\x01",
        "{\"anonymous_id\":\"a\\u0000b\",\"user_id\":\"line\\nbreak\"}",
        long_file,
    };
    size_t lengths[] = {8, 0, 0, 0, 0, 4, 0, 0};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        write_file(dir, "identity.json", files[i], lengths[i] ? lengths[i] : strlen(files[i]));
        log_clear();
        appnorth_events *e = open_events(client, dir, 120000);
        CHECK(e != NULL, "file %zu: the queue opens", i);
        if (!e) continue;
        char *id = NULL;
        CHECK_STATUS(appnorth_events_anonymous_id(e, &id, &err), APPNORTH_OK, err);
        CHECK(is_uuid(id), "file %zu: a fresh anonymous id: %.40s", i, id ? id : "(null)");
        CHECK(log_has("identity"), "file %zu: logged: %s", i, log_text);
        appnorth_string_free(id);
        CHECK_STATUS(appnorth_events_identify(e, "user-1", &err), APPNORTH_OK, err);
        appnorth_events_free(e);
    }
    free(long_id);
    free(long_file);
    appnorth_client_free(client);
    remove_tree(dir);
}

static void test_damaged_consent_row_is_dropped(void) {
    char *dir = make_temp_dir("damage-consent");
    appnorth_client *client = logging_client();
    appnorth_error err;
    appnorth_events_free(open_events(client, dir, 120000));

    static const char *values[] = {"'maybe'", "x'ff00'", "''", "1", "-9223372036854775808", "'GRANTED'", "'granted '"};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        put_row(dir, "consent", "analytics", values[i], "-9223372036854775808");
        log_clear();
        appnorth_events *e = open_events(client, dir, 120000);
        if (!e) continue;
        int32_t state = 99;
        CHECK_STATUS(appnorth_events_consent(e, &state, &err), APPNORTH_OK, err);
        CHECK(state == APPNORTH_CONSENT_UNKNOWN, "value %zu: consent unknown again: %d", i, state);
        CHECK(log_has("damaged consent row"), "value %zu: logged: %s", i, log_text);
        CHECK(sql_count(dir, "SELECT COUNT(*) FROM kv WHERE namespace = 'consent'") == 0, "value %zu: row deleted", i);
        appnorth_events_free(e);
    }
    /* A sound value with an extreme updated_ms still counts. */
    put_row(dir, "consent", "analytics", "'granted'", "9223372036854775807");
    appnorth_events *e = open_events(client, dir, 120000);
    int32_t state = 99;
    CHECK_STATUS(appnorth_events_consent(e, &state, &err), APPNORTH_OK, err);
    CHECK(state == APPNORTH_CONSENT_GRANTED, "granted survives: %d", state);
    /* Known crasher: 7 is not a yes. */
    CHECK_STATUS(appnorth_events_set_consent(e, 7, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_set_consent(e, 0, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_set_consent(e, 7, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_consent(e, &state, &err), APPNORTH_OK, err);
    CHECK(state == APPNORTH_CONSENT_REVOKED, "7 did not grant: %d", state);
    appnorth_events_free(e);
    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- the known crashers ------------------------------------------------------ */

/* Retry-After: 9223372036854776 seconds overflowed `seconds * 1000` on the
 * upload thread, at every start while the events stayed queued. */
static void test_huge_retry_after_is_capped(void) {
    static const int statuses[] = {429, 503};
    for (int i = 0; i < 2; i++) {
        admin_request(server, "POST", "/admin/reset", "{}", NULL);
        char *dir = make_temp_dir("damage-retry-after");
        appnorth_client *client = logging_client();
        appnorth_error err;
        appnorth_events *e = open_events(client, dir, 100);
        track(e, "waited");
        char spec[256];
        snprintf(spec, sizeof spec,
                 "{\"status\":%d,\"count\":2,\"retry_after\":\"9223372036854776\",\"path_prefix\":\"" EVENTS_PATH "\"}",
                 statuses[i]);
        CHECK(admin_request(server, "POST", "/admin/faults", spec, NULL) == 201, "fault");
        CHECK_STATUS(appnorth_events_flush(e, 20000, &err), APPNORTH_OK, err);
        CHECK(server_events_named("waited") == 1, "HTTP %d: delivered after capped waits", statuses[i]);
        appnorth_events_free(e);
        appnorth_client_free(client);
        remove_tree(dir);
    }
}

static void test_host_value_crashers(void) {
    appnorth_error err;
    /* A failed read() passed straight in. */
    appnorth_feedback *f = appnorth_feedback_new();
    unsigned char byte = 0;
    CHECK_STATUS(appnorth_feedback_add_screenshot(f, &byte, (size_t)-1, "image/png", &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_feedback_add_screenshot(f, &byte, SIZE_MAX / 2 + 1, "image/png", &err), APPNORTH_E_TOO_LARGE, err);
    appnorth_feedback_free(f);

    /* A clock moved as far as the header allows, twice; then a cache read. */
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(1700000000000, &clock, &err), APPNORTH_OK, err);
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_memory(&storage, &err), APPNORTH_OK, err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 0, clock, &cache, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_cache_store_boards(cache, "s", "[1]", &err), APPNORTH_OK, err);
    int64_t walls[] = {INT64_MIN, INT64_MIN + 1, -1, INT64_MAX};
    for (int i = 0; i < 4; i++) {
        CHECK_STATUS(appnorth_clock_set_wall(clock, walls[i], &err), APPNORTH_OK, err);
        char *json = NULL;
        CHECK_STATUS(appnorth_cache_boards(cache, "s", &json, &err), APPNORTH_OK, err);
        appnorth_string_free(json);
        CHECK_STATUS(appnorth_cache_store_ideas(cache, "s", NULL, "[2]", &err), APPNORTH_OK, err);
    }
    CHECK_STATUS(appnorth_clock_advance(clock, INT64_MAX, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_clock_advance(clock, INT64_MAX, &err), APPNORTH_OK, err);
    char *json = (char *)1;
    CHECK_STATUS(appnorth_cache_boards(cache, "s", &json, &err), APPNORTH_OK, err);
    CHECK(json == NULL, "after the largest advance the entry has expired");
    appnorth_cache_free(cache);
    /* The rows stored at the extreme times: dropped on the next open. */
    CHECK_STATUS(appnorth_cache_new(storage, 0, clock, &cache, &err), APPNORTH_OK, err);
    json = (char *)1;
    CHECK_STATUS(appnorth_cache_ideas(cache, "s", NULL, &json, &err), APPNORTH_OK, err);
    CHECK(json == NULL, "an entry stored at an impossible time is not served");
    appnorth_cache_free(cache);
    appnorth_storage_free(storage);
    appnorth_clock_free(clock);
}

/* A config on a clock at either end of its range: reads, fetches and the
 * row it stores never trap; a row stamped at an impossible time is
 * dropped on the next open. */
static void test_config_on_an_extreme_clock(void) {
    admin_request(server, "POST", "/admin/reset", "{}", NULL);
    CHECK(admin_request(server, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"a\":2}}", NULL) == 201, "publish");
    char *dir = make_temp_dir("damage-config-clock");
    appnorth_client *client = logging_client();
    appnorth_error err;
    appnorth_clock *clock = NULL;
    CHECK_STATUS(appnorth_clock_new_manual(INT64_MIN, &clock, &err), APPNORTH_OK, err);
    int64_t walls[] = {INT64_MIN, INT64_MAX};
    for (int i = 0; i < 2; i++) {
        CHECK_STATUS(appnorth_clock_set_wall(clock, walls[i], &err), APPNORTH_OK, err);
        appnorth_config_options *o = appnorth_config_options_new();
        CHECK_STATUS(appnorth_config_options_set_client(o, client, &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_config_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_config_options_set_clock(o, clock, &err), APPNORTH_OK, err);
        appnorth_config *config = NULL;
        CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
        appnorth_config_options_free(o);
        if (!config) continue;
        int32_t tier = -1;
        CHECK_STATUS(appnorth_config_source(config, &tier, NULL, &err), APPNORTH_OK, err);
        CHECK(tier == APPNORTH_CONFIG_TIER_DEFAULT, "wall %lld: the row stored at an impossible time was dropped: %d",
              (long long)walls[i], tier);
        CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_clock_advance(clock, INT64_MAX, &err), APPNORTH_OK, err);
        int64_t a = 0;
        CHECK_STATUS(appnorth_config_get_int(config, "a", 0, &a, &err), APPNORTH_OK, err);
        CHECK(a == 2, "wall %lld: the fetched config is served: %lld", (long long)walls[i], (long long)a);
        CHECK_STATUS(appnorth_config_source(config, &tier, NULL, &err), APPNORTH_OK, err);
        appnorth_config_free(config);
    }
    appnorth_clock_free(clock);
    appnorth_client_free(client);
    remove_tree(dir);
}

int main(void) {
    server = test_start("test_damage", 600);
    if (!server) return 2;
    (void)admin_board; /* admin.h helpers this file does not need */
    (void)admin_idea;
    RUN(test_host_value_crashers);
    RUN(test_huge_retry_after_is_capped);
    RUN(test_config_on_an_extreme_clock);
    RUN(test_damaged_config_rows_are_dropped);
    RUN(test_damaged_cache_entries_are_dropped);
    RUN(test_damaged_queue_entries_are_dropped);
    RUN(test_damaged_event_rows_are_dropped);
    RUN(test_damaged_event_journals_are_skipped);
    RUN(test_damaged_identity_file_starts_afresh);
    RUN(test_damaged_consent_row_is_dropped);
    return check_summary();
}
