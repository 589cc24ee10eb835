/* The config's data-source status through the real libappnorth.so, against
 * the local server ($APPNORTH_TEST_SERVER): a status listener in dispatch
 * mode through an outage (the server drops every config connection) and a
 * recovery, every call on the dispatching thread; stop_live turning it
 * off; a 401 kept as the last error; bad arguments. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "support.h"

static const char *server;
static pthread_t main_thread;
static int app_counter;

static const char *new_app(char *buf, size_t size) {
    snprintf(buf, size, "stest-%d-%d", (int)getpid(), ++app_counter);
    return buf;
}

static void publish(const char *app, const char *config_json) { admin_publish_config(server, app, config_json); }

static void fault(const char *app, const char *what) {
    char body[512];
    snprintf(body, sizeof body, "{\"path_prefix\":\"/v1/apps/%s/config\",%s}", app, what);
    CHECK(admin_request(server, "POST", "/admin/faults", body, NULL) == 201, "arm fault %s", what);
}

/* What the status callbacks saw, in order. */
typedef struct {
    int calls;
    atomic_int off_main;
    int32_t states[64];
    appnorth_data_source_status last;
} seen_t;

static void on_status(const appnorth_data_source_status *status, void *user_data) {
    seen_t *s = user_data;
    if (!pthread_equal(pthread_self(), main_thread)) atomic_fetch_add(&s->off_main, 1);
    if (s->calls < 64) s->states[s->calls] = status->state;
    s->calls++;
    s->last = *status;
}

static appnorth_client *status_client(const char *app, int dispatch) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, app, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 3000, 3000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, dispatch, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static appnorth_config *make_config(appnorth_client *client) {
    appnorth_error err;
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_poll_interval_ms(o, 100, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(o, 20, 200, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    return config;
}

/* Dispatches (waiting on the descriptor) until a callback saw `state`;
 * the 15 s only catch a hang. */
static int dispatch_until(appnorth_client *client, seen_t *seen, int32_t state) {
    int32_t fd = -1;
    appnorth_dispatch_fd(client, &fd, NULL);
    double deadline = mono_ms() + 15000;
    while (mono_ms() < deadline) {
        if (seen->calls > 0 && seen->last.state == state) return 1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 20);
        appnorth_dispatch(client, 0, NULL, NULL);
    }
    return 0;
}

static void test_status_through_an_outage_and_a_recovery_in_dispatch_mode(void) {
    char app[64];
    appnorth_error err;
    appnorth_data_source_status status;
    seen_t seen = {0};
    new_app(app, sizeof app);
    publish(app, "{\"level\":1}");
    appnorth_client *client = status_client(app, 1);
    appnorth_config *config = make_config(client);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_status_listener(config, on_status, &seen, &token, &err), APPNORTH_OK, err);
    CHECK(token >= 1, "token %lld", (long long)token);
    CHECK_STATUS(appnorth_config_status(config, &status, &err), APPNORTH_OK, err);
    CHECK(status.state == APPNORTH_CONFIG_STATE_INITIALIZING && status.since_ms > 0 && status.last_error.code == 0 &&
              status.last_error_ms == 0, "at open: state %d since %lld", status.state, (long long)status.since_ms);

    /* The outage: the server drops every config connection, stream and polls. */
    fault(app, "\"drop\":true,\"count\":100000");
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK(dispatch_until(client, &seen, APPNORTH_CONFIG_STATE_OFFLINE), "offline delivered (state %d)", seen.last.state);
    CHECK(seen.last.last_error.code == APPNORTH_E_NETWORK && seen.last.last_error.http_status == 0 &&
              seen.last.last_error.message[0] != 0 && seen.last.last_error_ms >= seen.last.since_ms,
          "offline: last error %d (%s)", seen.last.last_error.code, seen.last.last_error.message);
    int calls_in_outage = seen.calls;

    /* The recovery. */
    CHECK(admin_request(server, "DELETE", "/admin/faults", NULL, NULL) == 200, "faults cleared");
    CHECK(dispatch_until(client, &seen, APPNORTH_CONFIG_STATE_VALID), "valid delivered (state %d)", seen.last.state);
    CHECK(seen.calls > calls_in_outage, "the recovery is a call of its own");
    CHECK(seen.last.last_error.code == APPNORTH_E_NETWORK, "the last error outlives the recovery: %d",
          seen.last.last_error.code);
    CHECK_STATUS(appnorth_config_status(config, &status, &err), APPNORTH_OK, err);
    CHECK(status.state == APPNORTH_CONFIG_STATE_VALID && status.since_ms == seen.last.since_ms,
          "status reads what the listener got: %d", status.state);

    /* stop_live: off, delivered by the next dispatch, not inside the call. */
    int before = seen.calls;
    CHECK_STATUS(appnorth_config_stop_live(config, &err), APPNORTH_OK, err);
    CHECK(seen.calls == before, "nothing ran inside stop_live");
    CHECK(dispatch_until(client, &seen, APPNORTH_CONFIG_STATE_OFF), "off delivered (state %d)", seen.last.state);
    CHECK(atomic_load(&seen.off_main) == 0, "every status call on the dispatching thread: %d elsewhere",
          atomic_load(&seen.off_main));

    /* Removed: later changes call nothing. */
    CHECK_STATUS(appnorth_config_remove_status_listener(config, token, &err), APPNORTH_OK, err);
    before = seen.calls;
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    appnorth_dispatch(client, 0, NULL, NULL);
    CHECK(seen.calls == before, "a removed listener is not called: %d calls", seen.calls - before);
    appnorth_config_free(config);
    appnorth_client_free(client);
}

static void test_a_refused_credential_is_kept_as_the_last_error(void) {
    char app[64];
    appnorth_error err;
    appnorth_data_source_status status;
    new_app(app, sizeof app);
    publish(app, "{\"level\":1}");
    appnorth_client *client = status_client(app, 0);
    appnorth_config *config = make_config(client);
    fault(app, "\"status\":401,\"count\":1");
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_AUTHENTICATION, err);
    CHECK_STATUS(appnorth_config_status(config, &status, &err), APPNORTH_OK, err);
    CHECK(status.state == APPNORTH_CONFIG_STATE_INTERRUPTED && status.last_error.code == APPNORTH_E_AUTHENTICATION &&
              status.last_error.http_status == 401 && strncmp(status.last_error.message, "HTTP 401", 8) == 0,
          "401: state %d, %d/%d %s", status.state, status.last_error.code, status.last_error.http_status,
          status.last_error.message);
    /* The host's own refresh is not held back, and recovers. */
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_status(config, &status, &err), APPNORTH_OK, err);
    CHECK(status.state == APPNORTH_CONFIG_STATE_VALID && status.last_error.http_status == 401,
          "valid, 401 kept: %d", status.state);
    appnorth_config_free(config);
    appnorth_client_free(client);
}

static void test_bad_arguments(void) {
    char app[64];
    appnorth_error err;
    appnorth_data_source_status status;
    int64_t token = 7;
    new_app(app, sizeof app);
    appnorth_client *client = status_client(app, 0);
    appnorth_config *config = make_config(client);
    CHECK_STATUS(appnorth_config_status(NULL, &status, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(status.state == 0 && status.since_ms == 0, "zeroed on failure");
    CHECK_STATUS(appnorth_config_status(config, NULL, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(strstr(err.message, "out_status") != NULL, "names the argument: %s", err.message);
    CHECK_STATUS(appnorth_config_status(config, &status, NULL), APPNORTH_OK, (appnorth_error){0});
    CHECK_STATUS(appnorth_config_add_status_listener(config, NULL, NULL, &token, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(token == 0, "token zeroed on failure");
    CHECK_STATUS(appnorth_config_add_status_listener(config, on_status, NULL, NULL, &err), APPNORTH_E_INVALID_ARGUMENT,
                 err);
    CHECK_STATUS(appnorth_config_add_status_listener(NULL, on_status, NULL, &token, &err), APPNORTH_E_INVALID_ARGUMENT,
                 err);
    CHECK_STATUS(appnorth_config_remove_status_listener(config, 12345, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_remove_status_listener(config, -1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_config_remove_status_listener(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    /* A config listener's token is not a status listener's. */
    CHECK_STATUS(appnorth_config_add_status_listener(config, on_status, NULL, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_remove_status_listener(config, token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_remove_status_listener(config, token, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_config_free(config);
    appnorth_client_free(client);
}

int main(void) {
    server = test_start("test_config_status", 120);
    if (!server) return 2;
    main_thread = pthread_self();
    (void)admin_board, (void)admin_idea;
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_status_through_an_outage_and_a_recovery_in_dispatch_mode);
    RUN(test_a_refused_credential_is_kept_as_the_last_error);
    RUN(test_bad_arguments);
    curl_global_cleanup();
    return check_summary();
}
