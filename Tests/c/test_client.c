/* The client and the first read path, through the real libappnorth.so,
 * against the local API server ($APPNORTH_TEST_SERVER). */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <pthread.h>
#include <stdlib.h>

#include "admin.h"
#include "check.h"
#include "support.h"

static const char *server;


static void test_version_and_status_names(void) {
    CHECK(strcmp(appnorth_version(), APPNORTH_VERSION_STRING) == 0, "version %s", appnorth_version());
    CHECK(appnorth_version_number() == APPNORTH_VERSION_NUMBER, "number %d", appnorth_version_number());
    for (int32_t code = APPNORTH_OK; code <= APPNORTH_E_TIMEOUT; code++) {
        const char *name = appnorth_status_str(code);
        CHECK(name && *name && strcmp(name, "unknown status") != 0, "code %d has no name", code);
    }
    CHECK(strcmp(appnorth_status_str(-7), "unknown status") == 0, "unknown code");
    CHECK(strcmp(appnorth_status_str(APPNORTH_E_NETWORK), "network error") == 0, "network name");
}

static void test_null_and_free_are_harmless(void) {
    appnorth_string_free(NULL);
    appnorth_client_free(NULL);
    appnorth_client_options_free(NULL);
    appnorth_error err;
    char *out = (char *)1;
    CHECK_STATUS(appnorth_client_list_boards(NULL, &out, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(out == NULL, "out set to NULL on failure");
    CHECK(strstr(err.message, "client") != NULL, "message names the argument: %s", err.message);
    CHECK_STATUS(appnorth_client_options_set_api_url(NULL, "http://x", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(appnorth_client_new(NULL, NULL, NULL) == APPNORTH_E_INVALID_ARGUMENT, "NULL err accepted");
    appnorth_client *c = make_client(server, "tapp", NULL, NULL);
    CHECK_STATUS(appnorth_client_list_boards(c, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_client_free(c);
}

static void test_options_validation(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_api_url(o, "ftp://host", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_api_url(o, "http://", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_api_url(o, "http://bad host", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_api_url(o, "http://\xff\xfe", &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, "", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, "has space", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_credential(o, "a@b.c", NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_credential(o, "no-at-sign", "t", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 0, 1000, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_set_logger(o, NULL, 99, NULL, &err), APPNORTH_OK, err);

    appnorth_client *c = (appnorth_client *)1;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(c == NULL, "out_client NULL on failure");
    CHECK(strstr(err.message, "API URL") != NULL, "missing URL named: %s", err.message);
    CHECK_STATUS(appnorth_client_options_set_api_url(o, "http://127.0.0.1:9/", &err), APPNORTH_OK, err);
    CHECK(err.code == 0 && err.message[0] == 0, "err cleared on success");
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(strstr(err.message, "App ID") != NULL, "missing App ID named: %s", err.message);
    appnorth_client_options_free(o);
}

static void test_lists_boards_and_ideas(void) {
    admin_request(server, "POST", "/admin/reset", "{}", NULL);
    char *features = admin_board(server, "tapp", "Features");
    char *bugs = admin_board(server, "tapp", "Bugs");
    CHECK(features && bugs, "boards seeded");
    if (!features || !bugs) return;
    admin_idea(server, "tapp", features, "Dark mode", "open");
    admin_idea(server, "tapp", features, "Offline sync", "planned");
    admin_idea(server, "tapp", features, "Dark icons", "done");
    admin_idea(server, "tapp", bugs, "Crash on login", "open");

    appnorth_client *c = make_client(server, "tapp", NULL, NULL);
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &text, &err), APPNORTH_OK, err);
    json_t *reply = json_loads(text ? text : "", 0, NULL);
    appnorth_string_free(text);
    CHECK(json_array_size(json_object_get(reply, "boards")) == 2, "two boards");
    json_decref(reply);

    char query[256];
    snprintf(query, sizeof query, "{\"board\":\"%s\"}", features);
    CHECK_STATUS(appnorth_client_list_ideas(c, query, &text, &err), APPNORTH_OK, err);
    reply = json_loads(text ? text : "", 0, NULL);
    appnorth_string_free(text);
    CHECK(json_array_size(json_object_get(reply, "ideas")) == 3, "three ideas on Features");
    json_decref(reply);

    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"q\":\"DARK\",\"status\":\"open\"}", &text, &err), APPNORTH_OK, err);
    reply = json_loads(text ? text : "", 0, NULL);
    appnorth_string_free(text);
    json_t *ideas = json_object_get(reply, "ideas");
    CHECK(json_array_size(ideas) == 1, "search + status filter: %zu", json_array_size(ideas));
    CHECK(strcmp(json_string_value(json_object_get(json_array_get(ideas, 0), "title")) ?: "", "Dark mode") == 0, "Dark mode");
    json_decref(reply);

    /* Cursor pagination walks every idea exactly once. */
    int seen = 0, pages = 0;
    char cursor_query[512] = "{\"limit\":3}";
    for (;;) {
        CHECK_STATUS(appnorth_client_list_ideas(c, cursor_query, &text, &err), APPNORTH_OK, err);
        if (!text) break;
        reply = json_loads(text, 0, NULL);
        appnorth_string_free(text);
        seen += (int)json_array_size(json_object_get(reply, "ideas"));
        pages++;
        const char *next = json_string_value(json_object_get(reply, "next_cursor"));
        if (!next) { json_decref(reply); break; }
        snprintf(cursor_query, sizeof cursor_query, "{\"limit\":3,\"cursor\":\"%s\"}", next);
        json_decref(reply);
        if (pages > 5) break;
    }
    CHECK(seen == 4 && pages == 2, "paged %d ideas over %d pages", seen, pages);

    appnorth_client_free(c);
    free(features);
    free(bugs);
}

static void test_bad_queries_are_refused_before_sending(void) {
    appnorth_client *c = make_client(server, "tapp", NULL, NULL);
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"board\":", &text, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK(strstr(err.message, "line 1") != NULL, "parse error has a position: %s", err.message);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"colour\":\"red\"}", &text, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"limit\":\"ten\"}", &text, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "[1,2]", &text, &err), APPNORTH_E_INVALID_JSON, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"q\":\"\xff\"}", &text, &err), APPNORTH_E_INVALID_UTF8, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"status\":\"bogus\"}", &text, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"limit\":1000}", &text, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_list_ideas(c, "{\"board\":\"b_missing\"}", &text, &err), APPNORTH_E_NOT_FOUND, err);
    CHECK(err.http_status == 404, "http 404: %d", err.http_status);
    CHECK(text == NULL, "no output on failure");
    appnorth_client_free(c);
}

static int log_lines;
static int log_leaked_secret;
static void count_log(int32_t level, const char *message, void *user_data) {
    (void)level;
    log_lines++;
    if (strstr(message, (const char *)user_data)) log_leaked_secret = 1;
}

static void test_authentication_and_scope(void) {
    admin_request(server, "POST", "/admin/users", "{\"app\":\"tapp\",\"email\":\"Ada@Example.com\",\"token\":\"tok-right\"}", NULL);
    appnorth_error err;
    char *text = NULL;

    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, "tapp", &err);
    appnorth_client_options_set_credential(o, "ADA@example.com", "tok-wrong", &err);
    CHECK_STATUS(appnorth_client_options_set_logger(o, count_log, APPNORTH_LOG_DEBUG, "tok-wrong", &err), APPNORTH_OK, err);
    appnorth_client *wrong = NULL;
    appnorth_client_new(o, &wrong, &err);
    appnorth_client_options_free(o);
    CHECK_STATUS(appnorth_client_list_boards(wrong, &text, &err), APPNORTH_E_AUTHENTICATION, err);
    CHECK(err.http_status == 401, "401: %d", err.http_status);
    CHECK(strstr(err.message, "tok-wrong") == NULL, "no token in message");
    CHECK(log_lines > 0 && !log_leaked_secret, "logged %d lines, secret leaked: %d", log_lines, log_leaked_secret);

    CHECK_STATUS(appnorth_client_scope(wrong, &text, &err), APPNORTH_OK, err);
    char expected[512];
    snprintf(expected, sizeof expected, "%s|tapp|ada@example.com", server);
    CHECK(text && strcmp(text, expected) == 0, "scope %s", text ? text : "(null)");
    appnorth_string_free(text);
    appnorth_client_free(wrong);

    appnorth_client *right = make_client(server, "tapp", "ada@example.com", "tok-right");
    CHECK_STATUS(appnorth_client_list_boards(right, &text, &err), APPNORTH_OK, err);
    appnorth_string_free(text);
    appnorth_client_free(right);

    appnorth_client *anon = make_client(server, "tapp", NULL, NULL);
    CHECK_STATUS(appnorth_client_scope(anon, &text, &err), APPNORTH_OK, err);
    CHECK(text && strstr(text, "|tapp|anonymous"), "anonymous scope %s", text ? text : "(null)");
    appnorth_string_free(text);
    appnorth_client_free(anon);
}

static void test_faults_and_outages(void) {
    appnorth_client *c = make_client(server, "tapp", NULL, NULL);
    appnorth_error err;
    char *text = NULL;

    admin_request(server, "POST", "/admin/faults", "{\"status\":503,\"count\":1}", NULL);
    CHECK_STATUS(appnorth_client_list_boards(c, &text, &err), APPNORTH_E_SERVER, err);
    CHECK(err.http_status == 503, "503: %d", err.http_status);

    admin_request(server, "POST", "/admin/faults", "{\"status\":418,\"count\":1}", NULL);
    CHECK_STATUS(appnorth_client_list_boards(c, &text, &err), APPNORTH_E_HTTP, err);
    CHECK(err.http_status == 418, "418: %d", err.http_status);

    /* curl retries once, transparently, when a reused keep-alive connection
     * dies before any response; two drops make the failure visible. */
    admin_request(server, "POST", "/admin/faults", "{\"drop\":true,\"count\":2}", NULL);
    CHECK_STATUS(appnorth_client_list_boards(c, &text, &err), APPNORTH_E_NETWORK, err);
    CHECK(err.http_status == 0, "no HTTP status on a dropped connection");

    /* After the faults the same client works again (connection reuse). */
    CHECK_STATUS(appnorth_client_list_boards(c, &text, &err), APPNORTH_OK, err);
    appnorth_string_free(text);
    appnorth_client_free(c);

    /* Port 9 (discard) on loopback is closed: connection refused. */
    appnorth_client *down = make_client("http://127.0.0.1:9", "tapp", NULL, NULL);
    CHECK_STATUS(appnorth_client_list_boards(down, &text, &err), APPNORTH_E_NETWORK, err);
    CHECK(strlen(err.message) > 0, "network message");
    appnorth_client_free(down);
}

static void *list_many(void *arg) {
    appnorth_client *c = arg;
    long failures = 0;
    for (int i = 0; i < 25; i++) {
        char *text = NULL;
        if (appnorth_client_list_boards(c, &text, NULL) != APPNORTH_OK) failures++;
        appnorth_string_free(text);
    }
    return (void *)failures;
}

static void test_one_client_many_threads(void) {
    appnorth_client *c = make_client(server, "tapp", NULL, NULL);
    pthread_t threads[4];
    for (int i = 0; i < 4; i++) pthread_create(&threads[i], NULL, list_many, c);
    long failures = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(threads[i], &r);
        failures += (long)r;
    }
    CHECK(failures == 0, "%ld failed calls across threads", failures);
    appnorth_client_free(c);
}

/* The DEBUG trace of a request, and a level changed on a live client. */
static char debug_lines[8][512];
static int debug_count;
static void keep_debug(int32_t level, const char *message, void *user_data) {
    (void)user_data;
    if (level == APPNORTH_LOG_DEBUG && debug_count < 8) {
        snprintf(debug_lines[debug_count], sizeof debug_lines[0], "%s", message);
        debug_count++;
    }
}

static void test_log_level_changes_on_a_live_client(void) {
    appnorth_error err;
    char *text = NULL;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, "tapp", &err);
    appnorth_client_options_set_credential(o, "dbg@example.com", "tok-dbg-secret", &err);
    CHECK_STATUS(appnorth_client_options_set_logger(o, keep_debug, APPNORTH_LOG_WARNING, NULL, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);

    /* 401 for the unknown credential: a response, traced at DEBUG only. */
    appnorth_client_list_boards(c, &text, &err);
    int quiet = debug_count;
    CHECK_STATUS(appnorth_client_set_log_level(c, APPNORTH_LOG_DEBUG, &err), APPNORTH_OK, err);
    appnorth_client_list_boards(c, &text, &err);
    CHECK(getenv("APPNORTH_DEBUG") != NULL || quiet == 0, "no DEBUG lines at WARNING: %d", quiet);
    CHECK(debug_count > quiet, "DEBUG lines once the level is lowered");
    int traced = 0;
    for (int i = quiet; i < debug_count; i++) {
        if (strstr(debug_lines[i], "HTTP GET /v1/apps/tapp/boards -> 401 in ") && strstr(debug_lines[i], " ms over HTTP/1.1 (sent 0 B, received "))
            traced = 1;
        CHECK(strstr(debug_lines[i], "tok-dbg-secret") == NULL && strstr(debug_lines[i], "dbg@example.com") == NULL,
              "no credential in %s", debug_lines[i]);
    }
    CHECK(traced, "the request is traced: %s", debug_count > quiet ? debug_lines[quiet] : "(none)");

    CHECK(appnorth_client_set_log_level(c, 4, &err) == APPNORTH_E_INVALID_ARGUMENT, "level 4 refused");
    CHECK(appnorth_client_set_log_level(c, -1, &err) == APPNORTH_E_INVALID_ARGUMENT, "level -1 refused");
    CHECK(appnorth_client_set_log_level(NULL, APPNORTH_LOG_INFO, &err) == APPNORTH_E_INVALID_ARGUMENT, "NULL client");
    CHECK_STATUS(appnorth_client_set_log_level(c, APPNORTH_LOG_ERROR, NULL), APPNORTH_OK, err);
    appnorth_client_free(c);
}

static int warned_cleartext;
static void keep_warnings(int32_t level, const char *message, void *user_data) {
    (void)user_data;
    if (level == APPNORTH_LOG_WARNING && strstr(message, "clear text to staging.internal")) warned_cleartext++;
}

/* Issue 23, class 3: a credential on http:// only to loopback, or to a
 * host allowed by name (with a warning). No request is made. */
static void test_a_credential_in_clear_text_is_refused(void) {
    appnorth_error err;
    appnorth_client *c = (appnorth_client *)1;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, "http://staging.internal:8080", &err);
    appnorth_client_options_set_app_id(o, "tapp", &err);
    CHECK_STATUS(appnorth_client_options_set_credential(o, "a@b.c", "tok", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_logger(o, keep_warnings, APPNORTH_LOG_WARNING, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(c == NULL && strstr(err.message, "clear text") != NULL, "refused: %s", err.message);
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(NULL, "x", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, "", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, "http://staging.internal", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, "staging.internal:8080", &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_E_INVALID_ARGUMENT, err);  /* nothing allowed yet */
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, "\xff", &err), APPNORTH_E_INVALID_UTF8, err);
    char longest[300];
    memset(longest, 'a', sizeof longest - 1);
    longest[sizeof longest - 1] = 0;
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, longest, &err), APPNORTH_E_TOO_LARGE, err);
    CHECK_STATUS(appnorth_client_options_allow_cleartext_host(o, "Staging.Internal", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    CHECK(warned_cleartext == 1, "a warning says the credential goes in clear text: %d", warned_cleartext);
    appnorth_client_free(c);
    /* Loopback needs no opt-in (the dev server is one). */
    c = NULL;
    appnorth_client_options *fresh = appnorth_client_options_new();
    appnorth_client_options_set_api_url(fresh, server, &err);
    appnorth_client_options_set_app_id(fresh, "tapp", &err);
    appnorth_client_options_set_credential(fresh, "a@b.c", "tok", &err);
    CHECK_STATUS(appnorth_client_new(fresh, &c, &err), APPNORTH_OK, err);
    appnorth_client_free(c);
    appnorth_client_options_free(fresh);
    appnorth_client_options_free(o);
}

int main(void) {
    server = test_start("test_client", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_version_and_status_names);
    RUN(test_null_and_free_are_harmless);
    RUN(test_options_validation);
    RUN(test_a_credential_in_clear_text_is_refused);
    RUN(test_lists_boards_and_ideas);
    RUN(test_bad_queries_are_refused_before_sending);
    RUN(test_authentication_and_scope);
    RUN(test_log_level_changes_on_a_live_client);
    RUN(test_faults_and_outages);
    RUN(test_one_client_many_threads);
    curl_global_cleanup();
    return check_summary();
}
