/* The seed's Consent and Secure Storage rules: revocation, required
 * consent, identity in the 0600 file or the host's store. Fixtures and the
 * story rules: events_support.h. */
#include "events_support.h"

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

int main(void) {
    if (!events_suite_start("test_events_consent")) return 2;

    RUN(test_consent_revoke_drops_purges_and_is_remembered);
    RUN(test_require_consent_stores_nothing_before_a_choice);
    RUN(test_revoking_during_a_slow_upload_sends_nothing_afterwards);
    RUN(test_a_track_racing_a_revocation_is_never_stored_nor_sent);
    RUN(test_identity_persists_privately_and_never_in_logs);
    RUN(test_host_secure_store_is_used_instead_of_the_file);

    curl_global_cleanup();
    return check_summary();
}
