/* appnorth_shutdown(), through the real .so: refused from inside a library
 * callback and for a negative timeout (nothing stopped then); with live
 * handles whose host callbacks run on library threads (default mode: a
 * logger on the events uploader, a config listener on the stream thread,
 * completions on the transfer thread, reads in flight held by the server)
 * it returns with no library thread left (events, config, transfer and
 * workers), every later call
 * refused with APPNORTH_E_WRONG_STATE, _free functions that free nothing,
 * and no host callback called again. Shutdown is for good, so it is the
 * last test of this program. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fixtures.h"
#include "support.h"
#include "threads.h"

static const char *base;
static atomic_int logged, listened, completed, shutdown_inside;

static void count_log(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    atomic_fetch_add(&logged, 1);
}

static void count_change(const char *config, const char *keys, int32_t tier, void *user_data) {
    (void)config, (void)keys, (void)tier, (void)user_data;
    atomic_fetch_add(&listened, 1);
}

static void count_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user_data) {
    (void)op, (void)status, (void)err, (void)json, (void)user_data;
    atomic_fetch_add(&completed, 1);
}

/* A logger that tries to shut the library down from inside a callback. */
static void shutdown_from_log(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    appnorth_error err;
    if (atomic_load(&shutdown_inside) == 0) atomic_store(&shutdown_inside, appnorth_shutdown(1000, &err) + 100);
}

static appnorth_client *client_logging_to(appnorth_log_fn fn, int dispatch) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, base, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, "shutdown", &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 10000, 10000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_logger(o, fn, APPNORTH_LOG_DEBUG, NULL, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, dispatch, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

static void test_shutdown_refused_inside_a_callback(void) {
    appnorth_client *c = client_logging_to(shutdown_from_log, 1);
    char *json = NULL;
    appnorth_error err;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err);
    appnorth_string_free(json);
    int32_t ran = 0;
    CHECK_STATUS(appnorth_dispatch(c, 0, &ran, &err), APPNORTH_OK, err);
    CHECK(ran > 0, "the request's log line ran in the dispatch");
    CHECK(atomic_load(&shutdown_inside) == 100 + APPNORTH_E_WRONG_STATE, "inside a callback: %d",
          atomic_load(&shutdown_inside) - 100);
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err); /* still running */
    appnorth_string_free(json);
    appnorth_client_free(c);
    CHECK_STATUS(appnorth_shutdown(-1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
}

static void test_shutdown_stops_every_thread_and_callback(void) {
    char *dir = make_temp_dir("shutdown");
    char events_dir[512], config_dir[512];
    snprintf(events_dir, sizeof events_dir, "%s/events", dir);
    snprintf(config_dir, sizeof config_dir, "%s/config", dir);
    appnorth_error err;
    admin_request(base, "POST", "/admin/apps/shutdown/config", "{\"config\":{\"v\":1}}", NULL);
    appnorth_client *c = client_logging_to(count_log, 0);
    appnorth_events *events = events_in(c, events_dir);
    appnorth_config *config = config_in(c, config_dir);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, count_change, NULL, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    for (int i = 0; i < 100; i++) appnorth_events_track(events, "before_shutdown", NULL, NULL, &err);
    /* The first listener call and an upload's log lines: both threads have called the host. */
    int64_t deadline = mono_ms() + 15000;
    while ((atomic_load(&listened) == 0 || atomic_load(&logged) == 0) && mono_ms() < deadline) {
        appnorth_events_flush(events, 100, &err);
        sleep_ms(5);
    }
    CHECK(atomic_load(&listened) > 0 && atomic_load(&logged) > 0, "callbacks ran before: %d %d",
          atomic_load(&listened), atomic_load(&logged));
    CHECK(threads_named("appnorth-events") == 1 && threads_named("appnorth-config") == 1, "threads before");
    /* 16 reads the server holds until the release at the end: in flight at
     * the shutdown. Its timeout outlasts the program's watchdog, so a
     * shutdown (or a free below) that waited for a held read would hang;
     * returning at all shows it waits for none. */
    admin_add_fault(base, "{\"delay_ms\":600000,\"count\":16,\"path_prefix\":\"/v1/apps/shutdown/boards\"}");
    for (int i = 0; i < 16; i++)
        CHECK_STATUS(appnorth_client_list_boards_async(c, count_done, NULL, NULL, &err), APPNORTH_OK, err);
    CHECK(admin_wait_held(base, 1), "the reads are held at the server");

    CHECK_STATUS(appnorth_shutdown(600000, &err), APPNORTH_OK, err);
    int after_log = atomic_load(&logged), after_listen = atomic_load(&listened), after_done = atomic_load(&completed);
    CHECK(threads_named("appnorth-events") == 0, "the events uploader is gone");
    CHECK(threads_named("appnorth-config") == 0, "the config stream thread is gone");
    /* Detached: they leave the library's registry as their last step, and
     * the kernel's task list a moment later. */
    int64_t gone_by = mono_ms() + 2000;
    while ((threads_named("appnorth-xfer") != 0 || threads_named("appnorth-ops") != 0) && mono_ms() < gone_by)
        sleep_ms(1);
    CHECK(threads_named("appnorth-xfer") == 0 && threads_named("appnorth-ops") == 0,
          "the transfer thread and the operation workers are gone: %d %d", threads_named("appnorth-xfer"),
          threads_named("appnorth-ops"));
    CHECK(after_done == 0, "no completion of the held reads was called (%d)", after_done);

    /* Every call is refused; _free frees nothing and returns at once. */
    char *json = NULL;
    int32_t queued = 1;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(strstr(err.message, "shut down") != NULL, "message: %s", err.message);
    CHECK_STATUS(appnorth_client_list_boards_async(c, count_done, NULL, NULL, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_events_track(events, "after", NULL, &queued, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_WRONG_STATE, err);
    appnorth_client *another = NULL;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_new(o, &another, &err), APPNORTH_E_WRONG_STATE, err);
    appnorth_client_options_free(o);
    admin_request(base, "POST", "/admin/apps/shutdown/config", "{\"config\":{\"v\":2}}", NULL);
    appnorth_config_free(config);
    appnorth_events_free(events);
    appnorth_client_free(c);
    CHECK(admin_held(base) >= 1, "the frees returned with the reads still held: %d", admin_held(base));
    admin_release(base);
    CHECK_STATUS(appnorth_shutdown(0, &err), APPNORTH_OK, err); /* again: at once */
    CHECK(atomic_load(&logged) == after_log && atomic_load(&listened) == after_listen &&
              atomic_load(&completed) == after_done, "no host callback after shutdown returned");
    remove_tree(dir);
}

int main(void) {
    base = test_start("test_shutdown", 120);
    if (base == NULL) return 2;
    RUN(test_shutdown_refused_inside_a_callback);
    RUN(test_shutdown_stops_every_thread_and_callback); /* last: for good */
    return check_summary();
}
