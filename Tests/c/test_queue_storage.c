/* The offline queue on its storage: two queues on one SQLite name, entries
 * across reopening, erase, one storage per queue or cache, host callback
 * storage, damaged stored entries, and no token ever stored. Fixtures and
 * the story rules: offline_support.h. */
#include "offline_support.h"

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

int main(void) {
    server = test_start("test_queue_storage", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);

    RUN(test_two_sqlite_queues_on_one_name_lose_nothing);
    RUN(test_entries_persist_across_reopening);
    RUN(test_storage_erase_and_loaded_queues);
    RUN(test_a_storage_serves_one_queue_or_one_cache);
    RUN(test_host_callback_storage);
    RUN(test_damaged_stored_entries_are_logged);
    RUN(test_queue_never_stores_the_token);

    curl_global_cleanup();
    return check_summary();
}
