/* Range tests through the C ABI: every integer, size and clock parameter
 * in include/appnorth.h, called with the type's extremes, the classic
 * careless-host values and the values around each documented limit.
 * Every call must return a status (no trap), the documented status for
 * its range. bindings/python/tests/test_ranges.py checks that this table
 * names every such parameter of the header. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "support.h"

static const char *server;
static char *dir;
static appnorth_client *client;
static appnorth_client *dispatch_client; /* in dispatch mode */
static appnorth_client_options *client_options;
static appnorth_storage *memory;
static appnorth_clock *clock_;
static appnorth_events_options *events_options;
static appnorth_events *events;
static appnorth_config_options *config_options;
static appnorth_config *config;
static unsigned char *screenshot; /* APPNORTH_MAX_SCREENSHOT_BYTES + 1 readable bytes */
static unsigned char *ca_pem;     /* APPNORTH_MAX_CA_PEM_BYTES + 1 bytes, a PEM marker first */

static void quiet_log(int32_t level, const char *message, void *user_data) {
    (void)level;
    (void)message;
    (void)user_data;
}

/* Each caller passes `v`, already converted to the parameter's type by the
 * table driver (as a C host's own conversion would), and returns the
 * status. */
typedef int32_t (*range_call)(int64_t v, appnorth_error *err);

static int32_t status_str(int64_t v, appnorth_error *err) {
    (void)err;
    const char *name = appnorth_status_str((int32_t)v);
    return name && *name ? APPNORTH_OK : -1000;
}
static int32_t api_timeout(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_timeouts(client_options, (int32_t)v, 3000, err);
}
static int32_t download_timeout(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_timeouts(client_options, 3000, (int32_t)v, err);
}
static int32_t client_log_level(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_logger(client_options, quiet_log, (int32_t)v, NULL, err);
}
static int32_t storage_log_level(int64_t v, appnorth_error *err) {
    return appnorth_storage_set_logger(memory, quiet_log, (int32_t)v, NULL, err);
}
static int32_t client_live_log_level(int64_t v, appnorth_error *err) {
    return appnorth_client_set_log_level(client, (int32_t)v, err);
}
static int32_t ca_pem_length(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_ca_pem(client_options, ca_pem, (size_t)v, err);
}
static int32_t proxy_ignore_environment(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_proxy(client_options, NULL, (int32_t)v, err);
}
static int32_t compression_enabled(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_compression(client_options, (int32_t)v, err);
}
static int32_t dispatch_mode_enabled(int64_t v, appnorth_error *err) {
    return appnorth_client_options_set_dispatch_mode(client_options, (int32_t)v, err);
}
static int32_t dispatch_max_callbacks(int64_t v, appnorth_error *err) {
    return appnorth_dispatch(dispatch_client, (int32_t)v, NULL, err);
}
static int32_t screenshot_length(int64_t v, appnorth_error *err) {
    appnorth_feedback *f = appnorth_feedback_new();
    int32_t rc = appnorth_feedback_add_screenshot(f, screenshot, (size_t)v, "image/png", err);
    appnorth_feedback_free(f);
    return rc;
}

/* appnorth_buffer_set only runs inside a storage load callback. */
static int64_t buffer_length;
static int32_t buffer_status;
static int32_t load_with_length(void *user_data, appnorth_buffer *out) {
    (void)user_data;
    appnorth_error err;
    buffer_status = appnorth_buffer_set(out, screenshot, (size_t)buffer_length, &err);
    return 0;
}
static int32_t save_nothing(void *user_data, const void *bytes, size_t length) {
    (void)user_data;
    (void)bytes;
    (void)length;
    return 0;
}
static int32_t buffer_set_length(int64_t v, appnorth_error *err) {
    appnorth_storage *s = NULL;
    CHECK_STATUS(appnorth_storage_new_callbacks(load_with_length, save_nothing, NULL, NULL, &s, err), APPNORTH_OK, *err);
    buffer_length = v;
    buffer_status = -1000;
    appnorth_queue *q = NULL;
    appnorth_queue_new(s, 0, &q, err); /* the blob is garbage: only buffer_set's status counts */
    appnorth_queue_free(q);
    appnorth_storage_free(s);
    return buffer_status;
}
static int32_t queue_max_entries(int64_t v, appnorth_error *err) {
    appnorth_queue *q = NULL;
    int32_t rc = appnorth_queue_new(memory, (int32_t)v, &q, err);
    appnorth_queue_free(q);
    return rc;
}
static int32_t clock_new_wall(int64_t v, appnorth_error *err) {
    appnorth_clock *k = NULL;
    int32_t rc = appnorth_clock_new_manual(v, &k, err);
    appnorth_clock_free(k);
    return rc;
}
static int32_t clock_advance(int64_t v, appnorth_error *err) { return appnorth_clock_advance(clock_, v, err); }
static int32_t clock_set_wall(int64_t v, appnorth_error *err) { return appnorth_clock_set_wall(clock_, v, err); }
static int32_t cache_ttl(int64_t v, appnorth_error *err) {
    appnorth_cache *c = NULL;
    int32_t rc = appnorth_cache_new(memory, (int32_t)v, clock_, &c, err);
    if (c) {
        /* A read and a store at whatever time the clock stands. */
        char *json = NULL;
        CHECK_STATUS(appnorth_cache_store_boards(c, "s", "[]", err), APPNORTH_OK, *err);
        CHECK_STATUS(appnorth_cache_boards(c, "s", &json, err), APPNORTH_OK, *err);
        appnorth_string_free(json);
    }
    appnorth_cache_free(c);
    return rc;
}
static int32_t flush_interval(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_flush_policy(events_options, (int32_t)v, 20, err);
}
static int32_t batch_threshold(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_flush_policy(events_options, 30000, (int32_t)v, err);
}
static int32_t max_events(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_limits(events_options, (int32_t)v, 5 << 20, 64 << 10, err);
}
static int32_t max_bytes(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_limits(events_options, 10000, v, 64 << 10, err);
}
static int32_t max_event_bytes(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_limits(events_options, 10000, 5 << 20, (int32_t)v, err);
}
static int32_t retry_base(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_retry(events_options, (int32_t)v, 3, 120000, 5, err);
}
static int32_t retry_count(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_retry(events_options, 1000, (int32_t)v, 120000, 5, err);
}
static int32_t retry_after_cap(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_retry(events_options, 1000, 3, (int32_t)v, 5, err);
}
static int32_t breaker(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_retry(events_options, 1000, 3, 120000, (int32_t)v, err);
}
static int32_t events_jitter(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_retry_jitter(events_options, (int32_t)v, err);
}
static int32_t session_idle(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_session_policy(events_options, (int32_t)v, 0, err);
}
static int32_t session_max(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_session_policy(events_options, 0, (int32_t)v, err);
}
static int32_t require_consent(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_require_consent(events_options, (int32_t)v, err);
}
static int32_t remote_settings(int64_t v, appnorth_error *err) {
    return appnorth_events_options_set_remote_settings(events_options, (int32_t)v, err);
}
static int32_t events_close(int64_t v, appnorth_error *err) {
    appnorth_events *e = NULL;
    CHECK_STATUS(appnorth_events_new(events_options, &e, err), APPNORTH_OK, *err);
    int32_t rc = appnorth_events_close(e, (int32_t)v, err);
    appnorth_events_free(e);
    return rc;
}
/* appnorth_shutdown is for good and process-wide: each value is tried in a
 * forked child, whose exit status is the call's status. */
static int32_t shutdown_in_child(int64_t v, appnorth_error *err) {
    (void)err;
    pid_t pid = fork();
    if (pid == 0) _exit(appnorth_shutdown((int32_t)v, NULL));
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1002;
    return WEXITSTATUS(status);
}
/* A hold is resumed at once (a negative timeout held nothing: the resume
 * is then a no-op). */
static int32_t hold_and_resume(int64_t v, appnorth_error *err) {
    int32_t rc = appnorth_callbacks_hold((int32_t)v, err);
    appnorth_callbacks_resume();
    return rc;
}
static int32_t events_flush(int64_t v, appnorth_error *err) { return appnorth_events_flush(events, (int32_t)v, err); }
static int32_t events_pending(int64_t v, appnorth_error *err) {
    char *out = NULL;
    int32_t rc = appnorth_events_pending(events, (int32_t)v, &out, err);
    appnorth_string_free(out);
    return rc;
}
static void ignore_completion(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op;
    (void)status;
    (void)err;
    (void)json;
    (void)user;
}
/* In range, the flush starts (its wait ends when the cycle does, or when
 * the events handle is freed at the end). */
static int32_t events_flush_async(int64_t v, appnorth_error *err) {
    return appnorth_events_flush_async(events, (int32_t)v, ignore_completion, NULL, NULL, err);
}
/* Every id is valid input: OK for one in flight (the flushes above), else APPNORTH_E_NOT_FOUND. */
static int32_t op_cancel(int64_t v, appnorth_error *err) { return appnorth_op_cancel((uint64_t)v, err); }
static int32_t events_flush_sent(int64_t v, appnorth_error *err) {
    int64_t sent = -1;
    int32_t rc = appnorth_events_flush_sent(events, (int32_t)v, &sent, err);
    return sent < 0 ? -1002 : rc; /* out_sent is set on every path */
}
static int32_t network_type(int64_t v, appnorth_error *err) {
    return appnorth_events_set_network_type(events, (int32_t)v, err);
}
static int32_t consent(int64_t v, appnorth_error *err) { return appnorth_events_set_consent(events, (int32_t)v, err); }
static int32_t config_ttl(int64_t v, appnorth_error *err) {
    return appnorth_config_options_set_ttl_seconds(config_options, (int32_t)v, err);
}
static int32_t poll_interval(int64_t v, appnorth_error *err) {
    return appnorth_config_options_set_poll_interval_ms(config_options, (int32_t)v, err);
}
static int32_t backoff_base(int64_t v, appnorth_error *err) {
    return appnorth_config_options_set_reconnect_backoff_ms(config_options, (int32_t)v, 0, err);
}
static int32_t backoff_max(int64_t v, appnorth_error *err) {
    return appnorth_config_options_set_reconnect_backoff_ms(config_options, 0, (int32_t)v, err);
}
static int32_t config_jitter(int64_t v, appnorth_error *err) {
    return appnorth_config_options_set_reconnect_jitter(config_options, (int32_t)v, err);
}
static int32_t config_log_level(int64_t v, appnorth_error *err) {
    return appnorth_config_options_set_logger(config_options, quiet_log, (int32_t)v, NULL, err);
}
static int32_t get_int_default(int64_t v, appnorth_error *err) {
    int64_t out = 0;
    int32_t rc = appnorth_config_get_int(config, "absent", v, &out, err);
    return rc == APPNORTH_OK && out != v ? -1001 : rc;
}
static int32_t get_bool_default(int64_t v, appnorth_error *err) {
    int32_t out = 0;
    int32_t rc = appnorth_config_get_bool(config, "absent", (int32_t)v, &out, err);
    return rc == APPNORTH_OK && out != (int32_t)v ? -1001 : rc;
}
static int32_t remove_listener(int64_t v, appnorth_error *err) { return appnorth_config_remove_listener(config, v, err); }
static int32_t remove_status_listener(int64_t v, appnorth_error *err) {
    return appnorth_config_remove_status_listener(config, v, err);
}

enum param_type { T_INT32, T_INT64, T_SIZE };

typedef struct {
    const char *function;
    const char *parameter;
    enum param_type type;
    range_call call;
    int64_t lo, hi;          /* the documented valid range, inclusive */
    int32_t in_range;        /* the status a value in range gives */
    int32_t in_range_alt;    /* another acceptable one (e.g. a timeout), or 0 */
    int32_t below, above;    /* the status below lo and above hi */
    int64_t probe_max;       /* values in range above this are not called (0: all) */
    int zero_ok;             /* 0 is valid too (it selects the default) */
} range_row;

#define OK APPNORTH_OK
#define INV APPNORTH_E_INVALID_ARGUMENT
#define BIG APPNORTH_E_TOO_LARGE
#define I32 INT32_MIN, INT32_MAX
#define I64 INT64_MIN, INT64_MAX

/* The table. Keep one row per (function, parameter) of the header. */
static const range_row rows[] = {
    {"appnorth_status_str", "code", T_INT32, status_str, I32, OK, 0, INV, INV, 0, 0},
    {"appnorth_client_options_set_timeouts", "api_request_ms", T_INT32, api_timeout, 1, 600000, OK, 0, INV, INV, 0, 0},
    {"appnorth_client_options_set_timeouts", "resource_download_ms", T_INT32, download_timeout, 1, 600000, OK, 0, INV, INV, 0, 0},
    {"appnorth_client_options_set_logger", "min_level", T_INT32, client_log_level, 0, 3, OK, 0, INV, INV, 0, 0},
    {"appnorth_client_set_log_level", "min_level", T_INT32, client_live_log_level, 0, 3, OK, 0, INV, INV, 0, 0},
    {"appnorth_storage_set_logger", "min_level", T_INT32, storage_log_level, 0, 3, OK, 0, INV, INV, 0, 0},
    /* Below 27 bytes there is no room for the BEGIN CERTIFICATE line. */
    {"appnorth_client_options_set_ca_pem", "length", T_SIZE, ca_pem_length, 27, APPNORTH_MAX_CA_PEM_BYTES, OK, 0, INV, BIG, 0, 0},
    {"appnorth_client_options_set_proxy", "ignore_environment", T_INT32, proxy_ignore_environment, 0, 1, OK, 0, INV, INV, 0, 0},
    {"appnorth_client_options_set_compression", "enabled", T_INT32, compression_enabled, 0, 1, OK, 0, INV, INV, 0, 0},
    {"appnorth_client_options_set_dispatch_mode", "enabled", T_INT32, dispatch_mode_enabled, 0, 1, OK, 0, INV, INV, 0, 0},
    {"appnorth_dispatch", "max_callbacks", T_INT32, dispatch_max_callbacks, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_feedback_add_screenshot", "length", T_SIZE, screenshot_length, 1, APPNORTH_MAX_SCREENSHOT_BYTES, OK, 0, INV, BIG, 0, 0},
    /* In-range lengths above 64 KiB would copy up to 1 GiB: not called. */
    {"appnorth_buffer_set", "length", T_SIZE, buffer_set_length, 0, APPNORTH_MAX_BUFFER_BYTES, OK, 0, INV, BIG, 65536, 0},
    {"appnorth_queue_new", "max_entries", T_INT32, queue_max_entries, 0, 10000, OK, 0, INV, INV, 0, 0},
    {"appnorth_clock_new_manual", "wall_ms", T_INT64, clock_new_wall, I64, OK, 0, INV, INV, 0, 0},
    {"appnorth_clock_advance", "ms", T_INT64, clock_advance, 0, INT64_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_clock_set_wall", "wall_ms", T_INT64, clock_set_wall, I64, OK, 0, INV, INV, 0, 0},
    {"appnorth_cache_new", "ttl_seconds", T_INT32, cache_ttl, 0, 31536000, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_flush_policy", "flush_interval_ms", T_INT32, flush_interval, 10, 86400000, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_flush_policy", "batch_threshold", T_INT32, batch_threshold, 1, 10000, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_limits", "max_events", T_INT32, max_events, 1, 10000000, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_limits", "max_bytes", T_INT64, max_bytes, 1024, 1 << 30, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_limits", "max_event_bytes", T_INT32, max_event_bytes, 256, 16 << 20, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_retry", "base_delay_ms", T_INT32, retry_base, 1, 600000, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_retry", "retries", T_INT32, retry_count, 0, 10, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_retry", "retry_after_cap_ms", T_INT32, retry_after_cap, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_retry", "breaker_threshold", T_INT32, breaker, 1, 100, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_require_consent", "require", T_INT32, require_consent, 0, 1, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_retry_jitter", "percent", T_INT32, events_jitter, 0, 100, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_session_policy", "idle_timeout_ms", T_INT32, session_idle, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_session_policy", "max_length_ms", T_INT32, session_max, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_options_set_remote_settings", "follow", T_INT32, remote_settings, 0, 1, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_close", "timeout_ms", T_INT32, events_close, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_shutdown", "timeout_ms", T_INT32, shutdown_in_child, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_callbacks_hold", "timeout_ms", T_INT32, hold_and_resume, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_flush", "timeout_ms", T_INT32, events_flush, 0, INT32_MAX, OK, APPNORTH_E_TIMEOUT, INV, INV, 0, 0},
    {"appnorth_events_pending", "max", T_INT32, events_pending, 1, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_flush_async", "timeout_ms", T_INT32, events_flush_async, 0, INT32_MAX, OK, 0, INV, INV, 0, 0},
    {"appnorth_op_cancel", "op", T_INT64, op_cancel, I64, OK, APPNORTH_E_NOT_FOUND, INV, INV, 0, 0},
    {"appnorth_events_flush_sent", "timeout_ms", T_INT32, events_flush_sent, 0, INT32_MAX, OK, APPNORTH_E_TIMEOUT, INV, INV, 0, 0},
    {"appnorth_events_set_network_type", "network_type", T_INT32, network_type, 0, 3, OK, 0, INV, INV, 0, 0},
    {"appnorth_events_set_consent", "granted", T_INT32, consent, 0, 1, OK, 0, INV, INV, 0, 0},
    {"appnorth_config_options_set_ttl_seconds", "ttl_seconds", T_INT32, config_ttl, 0, 31536000, OK, 0, INV, INV, 0, 0},
    {"appnorth_config_options_set_poll_interval_ms", "poll_interval_ms", T_INT32, poll_interval, 10, 86400000, OK, 0, INV, INV, 0, 1},
    /* With max_ms 0 (60000): base 0 (1000) or 1 to 60000. */
    {"appnorth_config_options_set_reconnect_backoff_ms", "base_ms", T_INT32, backoff_base, 0, 60000, OK, 0, INV, INV, 0, 0},
    {"appnorth_config_options_set_reconnect_jitter", "percent", T_INT32, config_jitter, 0, 100, OK, 0, INV, INV, 0, 0},
    /* With base_ms 0 (1000): max 1000 to 3600000, or 0 (60000). */
    {"appnorth_config_options_set_reconnect_backoff_ms", "max_ms", T_INT32, backoff_max, 1000, 3600000, OK, 0, INV, INV, 0, 1},
    {"appnorth_config_options_set_logger", "min_level", T_INT32, config_log_level, 0, 3, OK, 0, INV, INV, 0, 0},
    {"appnorth_config_get_int", "default_value", T_INT64, get_int_default, I64, OK, 0, INV, INV, 0, 0},
    {"appnorth_config_get_bool", "default_value", T_INT32, get_bool_default, I32, OK, 0, INV, INV, 0, 0},
    /* No listener is registered: every token is unknown. */
    {"appnorth_config_remove_listener", "token", T_INT64, remove_listener, I64, INV, 0, INV, INV, 0, 0},
    {"appnorth_config_remove_status_listener", "token", T_INT64, remove_status_listener, I64, INV, 0, INV, INV, 0, 0},
};

/* Values a value of `type` may hold after a C conversion from v. */
static int64_t convert(enum param_type type, int64_t v) {
    switch (type) {
    case T_INT32: return (int32_t)v;
    case T_INT64: return v;
    case T_SIZE: return v; /* compared as size_t below */
    }
    return v;
}

/* -1 below, 0 in, 1 above the range. */
static int placement(const range_row *r, int64_t v) {
    if (v == 0 && r->zero_ok) return 0;
    if (r->type == T_SIZE) {
        size_t s = (size_t)v;
        if (s < (size_t)r->lo) return -1;
        return s > (size_t)r->hi ? 1 : 0;
    }
    if (v < r->lo) return -1;
    return v > r->hi ? 1 : 0;
}

static int run_row(const range_row *r) {
    /* The common values, then the neighbours of each limit. */
    int64_t values[32];
    int n = 0;
    int64_t common[] = {0, -1, 1, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX, (int64_t)SIZE_MAX,
                        INT64_MAX / 1000 + 1, -(INT64_MAX / 1000 + 1), (int64_t)UINT32_MAX};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) values[n++] = common[i];
    int64_t limits[] = {r->lo, r->hi};
    for (int i = 0; i < 2; i++) {
        if (limits[i] > INT64_MIN) values[n++] = limits[i] - 1;
        values[n++] = limits[i];
        if (limits[i] < INT64_MAX) values[n++] = limits[i] + 1;
    }
    int calls = 0;
    for (int i = 0; i < n; i++) {
        int64_t v = convert(r->type, values[i]);
        int where = placement(r, v);
        if (where == 0 && r->probe_max && (uint64_t)v > (uint64_t)r->probe_max) continue;
        appnorth_error err;
        memset(&err, 0, sizeof err);
        int32_t rc = r->call(v, &err);
        calls++;
        if (where == 0) {
            CHECK(rc == r->in_range || (r->in_range_alt && rc == r->in_range_alt),
                  "%s(%s = %lld) in range gave %d (%s): %s", r->function, r->parameter, (long long)v, rc,
                  appnorth_status_str(rc), err.message);
        } else {
            int32_t want = where < 0 ? r->below : r->above;
            CHECK(rc == want, "%s(%s = %lld) out of range gave %d (%s), want %d: %s", r->function, r->parameter,
                  (long long)v, rc, appnorth_status_str(rc), want, err.message);
        }
    }
    return calls;
}

int main(void) {
    server = test_start("test_ranges", 300);
    if (!server) return 2;
    appnorth_error err;
    dir = make_temp_dir("ranges");
    client = make_client(server, "ranges-app", NULL, NULL);
    client_options = appnorth_client_options_new();
    {
        appnorth_client_options *o = appnorth_client_options_new();
        CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_client_options_set_app_id(o, "ranges-app", &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, 1, &err), APPNORTH_OK, err);
        CHECK_STATUS(appnorth_client_new(o, &dispatch_client, &err), APPNORTH_OK, err);
        appnorth_client_options_free(o);
    }
    screenshot = calloc(APPNORTH_MAX_SCREENSHOT_BYTES + 1, 1);
    ca_pem = calloc(APPNORTH_MAX_CA_PEM_BYTES + 1, 1);
    memcpy(ca_pem, "-----BEGIN CERTIFICATE-----", 27);
    CHECK_STATUS(appnorth_storage_new_memory(&memory, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_clock_new_manual(1700000000000, &clock_, &err), APPNORTH_OK, err);

    events_options = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(events_options, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(events_options, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_new(events_options, &events, &err), APPNORTH_OK, err);

    config_options = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(config_options, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(config_options, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_new(config_options, &config, &err), APPNORTH_OK, err);

    int calls = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) calls += run_row(&rows[i]);
    printf("test_ranges: %zu parameters, %d calls\n", sizeof rows / sizeof rows[0], calls);

    appnorth_config_free(config);
    appnorth_config_options_free(config_options);
    appnorth_events_free(events);
    appnorth_events_options_free(events_options);
    appnorth_clock_free(clock_);
    appnorth_storage_free(memory);
    appnorth_client_options_free(client_options);
    appnorth_client_free(client);
    appnorth_client_free(dispatch_client);
    free(screenshot);
    free(ca_pem);
    remove_tree(dir);
    return check_summary();
}
