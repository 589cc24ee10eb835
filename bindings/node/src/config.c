/* Remote config: getters (memory only), refresh() as a Promise, live updates,
 * and one native listener that calls the JS Config's onChange, inside
 * appnorth_dispatch() on the JS thread. */
#include "addon.h"

#include <stdlib.h>

static an_config *config_arg(napi_env env, napi_callback_info info, an_args *a) {
    return an_get_args(env, info, a) ? (an_config *)an_unwrap(env, a->argv[0], AN_CONFIG, "config") : NULL;
}

static bool set_paths(napi_env env, napi_value o, appnorth_config_options *options, appnorth_error *err) {
    char *dir = NULL, *bundled = NULL;
    bool ok = an_string(env, an_prop(env, o, "dataDir"), "dataDir", true, &dir) &&
              an_string(env, an_prop(env, o, "bundledPath"), "bundledPath", true, &bundled);
    if (ok && dir != NULL) ok = an_ok(env, appnorth_config_options_set_data_dir(options, dir, err), err);
    if (ok && bundled != NULL) ok = an_ok(env, appnorth_config_options_set_bundled_path(options, bundled, err), err);
    an_free_string(dir), an_free_string(bundled);
    return ok;
}

static bool set_timing(napi_env env, napi_value o, appnorth_config_options *options, appnorth_error *err) {
    int32_t ttl = -1, poll = 0, base = 0, max = 0, jitter = -1;
    napi_value clock_value = an_prop(env, o, "clock");
    napi_valuetype t;
    napi_typeof(env, clock_value, &t);
    an_handle *clock = NULL;
    if (t != napi_undefined && t != napi_null && (clock = an_unwrap(env, clock_value, AN_CLOCK, "clock")) == NULL)
        return false;
    bool ok = an_optional_int32(env, o, "ttlSeconds", 0, 31536000, &ttl) &&
              an_optional_int32(env, o, "pollIntervalMs", 0, 86400000, &poll) &&
              an_optional_int32(env, o, "reconnectBaseMs", 0, 3600000, &base) &&
              an_optional_int32(env, o, "reconnectMaxMs", 0, 3600000, &max) &&
              an_optional_int32(env, o, "reconnectJitterPercent", 0, 100, &jitter);
    if (ok && ttl >= 0) ok = an_ok(env, appnorth_config_options_set_ttl_seconds(options, ttl, err), err);
    if (ok && clock != NULL) ok = an_ok(env, appnorth_config_options_set_clock(options, clock->ptr, err), err);
    if (ok && poll > 0) ok = an_ok(env, appnorth_config_options_set_poll_interval_ms(options, poll, err), err);
    if (ok && (base > 0 || max > 0))
        ok = an_ok(env, appnorth_config_options_set_reconnect_backoff_ms(options, base, max, err), err);
    if (ok && jitter >= 0) ok = an_ok(env, appnorth_config_options_set_reconnect_jitter(options, jitter, err), err);
    return ok;
}

/* configNew(client, {dataDir, bundledPath, ttlSeconds, clock, pollIntervalMs,
 *                    reconnectBaseMs, reconnectMaxMs, reconnectJitterPercent}) */
static napi_value config_new(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    appnorth_config *config = NULL;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL) return NULL;
    appnorth_config_options *options = appnorth_config_options_new();
    an_config *h = calloc(1, sizeof *h);
    bool ok = options != NULL && h != NULL &&
              an_ok(env, appnorth_config_options_set_client(options, c->h.ptr, &err), &err) &&
              set_paths(env, a.argv[1], options, &err) && set_timing(env, a.argv[1], options, &err) &&
              an_ok(env, appnorth_config_new(options, &config, &err), &err);
    appnorth_config_options_free(options);
    if (!ok) {
        free(h);
        return NULL;
    }
    h->h.kind = AN_CONFIG;
    h->h.ptr = config;
    return an_wrap(env, an_env_get(env), &h->h);
}

void an_config_release(an_config *c) {
    appnorth_config_free(c->h.ptr); /* drops its queued listener calls */
    c->h.ptr = NULL;
    if (c->on_change != NULL && !c->h.env->finalized) napi_delete_reference(c->h.env->env, c->on_change);
    c->on_change = NULL;
    c->token = 0;
    if (c->on_status != NULL && !c->h.env->finalized) napi_delete_reference(c->h.env->env, c->on_status);
    c->on_status = NULL;
    c->status_token = 0;
}

static void on_change(const char *config_json, const char *changed_keys_json, int32_t tier, void *user_data) {
    an_config *c = user_data;
    an_env *e = c->h.env;
    if (e->closing || c->on_change == NULL) return;
    napi_value argv[3] = {an_str(e->env, config_json), an_str(e->env, changed_keys_json), an_i32(e->env, tier)};
    an_call(e->env, c->on_change, 3, argv);
}

/* configListen(config, fn|null): one native listener calling fn, or none. */
static napi_value config_listen(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    napi_value fn;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_function(env, a.argv[1], "onChange", true, &fn)) return NULL;
    if (c->token != 0) {
        if (!an_ok(env, appnorth_config_remove_listener(c->h.ptr, c->token, &err), &err)) return NULL;
        c->token = 0;
        napi_delete_reference(env, c->on_change);
        c->on_change = NULL;
    }
    if (fn == NULL) return an_undefined(env);
    napi_create_reference(env, fn, 1, &c->on_change);
    if (!an_ok(env, appnorth_config_add_listener(c->h.ptr, on_change, c, &c->token, &err), &err)) {
        napi_delete_reference(env, c->on_change);
        c->on_change = NULL;
        c->token = 0;
        return NULL;
    }
    return an_undefined(env);
}

/* A status as {state, sinceMs, lastErrorMs, lastError: {status, httpStatus, message} | null}. */
static napi_value status_object(napi_env env, const appnorth_data_source_status *s) {
    napi_value result, error;
    napi_create_object(env, &result);
    napi_set_named_property(env, result, "state", an_i32(env, s->state));
    napi_set_named_property(env, result, "sinceMs", an_i64(env, s->since_ms));
    napi_set_named_property(env, result, "lastErrorMs", an_i64(env, s->last_error_ms));
    if (s->last_error.code == APPNORTH_OK) {
        napi_get_null(env, &error);
    } else {
        napi_create_object(env, &error);
        napi_set_named_property(env, error, "status", an_i32(env, s->last_error.code));
        napi_set_named_property(env, error, "httpStatus", an_i32(env, s->last_error.http_status));
        napi_set_named_property(env, error, "message", an_str(env, s->last_error.message));
    }
    napi_set_named_property(env, result, "lastError", error);
    return result;
}

static void on_status(const appnorth_data_source_status *status, void *user_data) {
    an_config *c = user_data;
    an_env *e = c->h.env;
    if (e->closing || c->on_status == NULL) return;
    napi_value argv[1] = {status_object(e->env, status)};
    an_call(e->env, c->on_status, 1, argv);
}

/* configStatusListen(config, fn|null): one native status listener calling fn, or none. */
static napi_value config_status_listen(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    napi_value fn;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_function(env, a.argv[1], "onStatus", true, &fn)) return NULL;
    if (c->status_token != 0) {
        if (!an_ok(env, appnorth_config_remove_status_listener(c->h.ptr, c->status_token, &err), &err)) return NULL;
        c->status_token = 0;
        napi_delete_reference(env, c->on_status);
        c->on_status = NULL;
    }
    if (fn == NULL) return an_undefined(env);
    napi_create_reference(env, fn, 1, &c->on_status);
    if (!an_ok(env, appnorth_config_add_status_listener(c->h.ptr, on_status, c, &c->status_token, &err), &err)) {
        napi_delete_reference(env, c->on_status);
        c->on_status = NULL;
        c->status_token = 0;
        return NULL;
    }
    return an_undefined(env);
}

/* configStatus(config) -> the status object. */
static napi_value config_status(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    appnorth_data_source_status status;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_ok(env, appnorth_config_status(c->h.ptr, &status, &err), &err)) return NULL;
    return status_object(env, &status);
}

/* configGet(config, kind, key, default): kind 0 string, 1 int, 2 double,
 * 3 bool, 4 JSON text. */
static napi_value config_get(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t kind = 0, rc = APPNORTH_OK;
    char *key = NULL, *fallback = NULL, *text = NULL;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_int32(env, a.argv[1], "kind", 0, 4, &kind) || !an_string(env, a.argv[2], "key", false, &key))
        return NULL;
    napi_value result = NULL;
    if (kind == 0 || kind == 4) {
        if (an_string(env, a.argv[3], "defaultValue", true, &fallback)) {
            rc = kind == 0 ? appnorth_config_get_string(c->h.ptr, key, fallback, &text, &err)
                           : appnorth_config_get_json(c->h.ptr, key, fallback, &text, &err);
            if (an_ok(env, rc, &err)) result = an_take(env, text);
        }
    } else if (kind == 1) {
        int64_t fallback_int = 0, value = 0;
        if (an_int64(env, a.argv[3], "defaultValue", &fallback_int) &&
            an_ok(env, appnorth_config_get_int(c->h.ptr, key, fallback_int, &value, &err), &err))
            napi_create_bigint_int64(env, value, &result);
    } else if (kind == 2) {
        double fallback_double = 0, value = 0;
        if (an_double(env, a.argv[3], "defaultValue", &fallback_double) &&
            an_ok(env, appnorth_config_get_double(c->h.ptr, key, fallback_double, &value, &err), &err))
            result = an_f64(env, value);
    } else {
        bool fallback_bool = false;
        int32_t value = 0;
        if (an_bool(env, a.argv[3], "defaultValue", &fallback_bool) &&
            an_ok(env, appnorth_config_get_bool(c->h.ptr, key, fallback_bool ? 1 : 0, &value, &err), &err))
            result = an_boolean(env, value != 0);
    }
    an_free_string(key), an_free_string(fallback);
    return result;
}

static napi_value config_snapshot(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *json = NULL;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_ok(env, appnorth_config_snapshot(c->h.ptr, &json, &err), &err)) return NULL;
    return an_take(env, json);
}

/* configSource(config) -> [tier, fetchedMs] */
static napi_value config_source(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t tier = 0;
    int64_t fetched = 0;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_ok(env, appnorth_config_source(c->h.ptr, &tier, &fetched, &err), &err)) return NULL;
    napi_value result;
    napi_create_array_with_length(env, 2, &result);
    napi_set_element(env, result, 0, an_i32(env, tier));
    napi_set_element(env, result, 1, an_i64(env, fetched));
    return result;
}

/* configRefresh(config, client) -> [promise, op] */
static napi_value config_refresh(napi_env env, napi_callback_info info) {
    an_start k;
    if (!an_start_args(env, info, AN_CONFIG, NULL, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_config_refresh_async(k.owner->ptr, AN_TAIL(k)));
}

/* configLive(config, on): start or stop live updates. */
static napi_value config_live(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    bool on = false;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_bool(env, a.argv[1], "on", &on)) return NULL;
    int32_t rc = on ? appnorth_config_start_live(c->h.ptr, &err) : appnorth_config_stop_live(c->h.ptr, &err);
    return an_ok(env, rc, &err) ? an_undefined(env) : NULL;
}

/* configLastFetchStatus(config) -> {status, httpStatus, message, timeMs} */
static napi_value config_last_fetch_status(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err, status;
    int64_t time_ms = 0;
    an_config *c = config_arg(env, info, &a);
    if (c == NULL || !an_ok(env, appnorth_config_last_fetch_status(c->h.ptr, &status, &time_ms, &err), &err))
        return NULL;
    napi_value result;
    napi_create_object(env, &result);
    napi_set_named_property(env, result, "status", an_i32(env, status.code));
    napi_set_named_property(env, result, "httpStatus", an_i32(env, status.http_status));
    napi_set_named_property(env, result, "message", an_str(env, status.message));
    napi_set_named_property(env, result, "timeMs", an_i64(env, time_ms));
    return result;
}

void an_init_config(napi_env env, napi_value exports) {
    static const an_export list[] = {
        {"configNew", config_new},
        {"configListen", config_listen},
        {"configGet", config_get},
        {"configSnapshot", config_snapshot},
        {"configSource", config_source},
        {"configRefresh", config_refresh},
        {"configLive", config_live},
        {"configLastFetchStatus", config_last_fetch_status},
        {"configStatus", config_status},
        {"configStatusListen", config_status_listen},
        {NULL, NULL},
    };
    an_export_all(env, exports, list);
}
