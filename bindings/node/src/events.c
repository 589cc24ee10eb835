/* The analytics events queue. track() is synchronous and durable (one
 * journal write() before it returns), like the C call; flush() is a
 * Promise (appnorth_events_flush_async). */
#include "addon.h"

#include <stdlib.h>
#include <string.h>

/* The options object's flush policy, limits and retry settings. */
static bool set_policy(napi_env env, napi_value o, appnorth_events_options *options, appnorth_error *err) {
    int32_t interval = 30000, threshold = 20, max_events = 10000, max_event_bytes = 65536;
    int32_t base_delay = 1000, retries = 3, retry_after_cap = 120000, breaker = 5, jitter = 20;
    int64_t max_bytes = 5242880;
    bool require = false;
    napi_value v = an_prop(env, o, "maxBytes"), c = an_prop(env, o, "requireConsent");
    napi_valuetype t, tc;
    napi_typeof(env, v, &t);
    napi_typeof(env, c, &tc);
    return an_optional_int32(env, o, "flushIntervalMs", 10, 86400000, &interval) &&
           an_optional_int32(env, o, "batchThreshold", 1, 10000, &threshold) &&
           an_optional_int32(env, o, "maxEvents", 1, 10000000, &max_events) &&
           an_optional_int32(env, o, "maxEventBytes", 256, 16777216, &max_event_bytes) &&
           an_optional_int32(env, o, "retryBaseDelayMs", 1, 600000, &base_delay) &&
           an_optional_int32(env, o, "retries", 0, 10, &retries) &&
           an_optional_int32(env, o, "retryAfterCapMs", 0, INT32_MAX, &retry_after_cap) &&
           an_optional_int32(env, o, "breakerThreshold", 1, 100, &breaker) &&
           an_optional_int32(env, o, "retryJitterPercent", 0, 100, &jitter) &&
           (t == napi_undefined || an_int64(env, v, "maxBytes", &max_bytes)) &&
           (tc == napi_undefined || an_bool(env, c, "requireConsent", &require)) &&
           an_ok(env, appnorth_events_options_set_flush_policy(options, interval, threshold, err), err) &&
           an_ok(env, appnorth_events_options_set_limits(options, max_events, max_bytes, max_event_bytes, err), err) &&
           an_ok(env, appnorth_events_options_set_retry(options, base_delay, retries, retry_after_cap, breaker, err),
                 err) &&
           an_ok(env, appnorth_events_options_set_retry_jitter(options, jitter, err), err) &&
           an_ok(env, appnorth_events_options_set_require_consent(options, require ? 1 : 0, err), err);
}

/* The automatic session policy (sessionIdleTimeoutMs, sessionMaxLengthMs)
 * and the clock (a ManualClock, for tests). */
static bool set_session(napi_env env, napi_value o, appnorth_events_options *options, appnorth_error *err) {
    int32_t idle = 1800000, max_length = 86400000;
    napi_value clock_value = an_prop(env, o, "clock");
    napi_valuetype t;
    napi_typeof(env, clock_value, &t);
    an_handle *clock = NULL;
    if (t != napi_undefined && t != napi_null && (clock = an_unwrap(env, clock_value, AN_CLOCK, "clock")) == NULL)
        return false;
    bool ok = an_optional_int32(env, o, "sessionIdleTimeoutMs", 0, INT32_MAX, &idle) &&
              an_optional_int32(env, o, "sessionMaxLengthMs", 0, INT32_MAX, &max_length) &&
              an_ok(env, appnorth_events_options_set_session_policy(options, idle, max_length, err), err);
    if (ok && clock != NULL) ok = an_ok(env, appnorth_events_options_set_clock(options, clock->ptr, err), err);
    return ok;
}

/* The sampling and remote-settings options: sampleRate (0 to 1; the library
 * refuses NaN and anything outside), remoteSettings (follow the config key
 * "appnorth.events"; default true). */
static bool set_sampling(napi_env env, napi_value o, appnorth_events_options *options, appnorth_error *err) {
    double rate = 1.0;
    bool follow = true;
    napi_value r = an_prop(env, o, "sampleRate"), f = an_prop(env, o, "remoteSettings");
    napi_valuetype tr, tf;
    napi_typeof(env, r, &tr);
    napi_typeof(env, f, &tf);
    return (tr == napi_undefined || an_double(env, r, "sampleRate", &rate)) &&
           (tf == napi_undefined || an_bool(env, f, "remoteSettings", &follow)) &&
           an_ok(env, appnorth_events_options_set_sample_rate(options, rate, err), err) &&
           an_ok(env, appnorth_events_options_set_remote_settings(options, follow ? 1 : 0, err), err);
}

void an_events_release(an_events *ev) {
    appnorth_events_free(ev->h.ptr);
    ev->h.ptr = NULL;
    if (ev->before_send != NULL && !ev->h.env->finalized) napi_delete_reference(ev->h.env->env, ev->before_send);
    ev->before_send = NULL;
}

/* The before_send hook: runs inside appnorth_events_track(), which only
 * this env's JS thread calls, so the JS function is called right here. It
 * answers true (keep), null (drop) or a replacement's JSON text; a throw is
 * cleared and fails closed (its message is the reason the library logs). */
static int32_t before_send(void *user_data, const char *event_json, appnorth_buffer *replacement) {
    an_events *ev = user_data;
    napi_env env = ev->h.env->env;
    napi_handle_scope scope;
    if (ev->h.env->closing || ev->before_send == NULL || napi_open_handle_scope(env, &scope) != napi_ok) return -1;
    int32_t rc = -1;
    napi_value fn, recv, arg, result;
    napi_valuetype t = napi_undefined;
    if (napi_get_reference_value(env, ev->before_send, &fn) == napi_ok && napi_get_undefined(env, &recv) == napi_ok &&
        napi_create_string_utf8(env, event_json, NAPI_AUTO_LENGTH, &arg) == napi_ok &&
        napi_call_function(env, recv, fn, 1, &arg, &result) == napi_ok && napi_typeof(env, result, &t) == napi_ok) {
        bool keep = false;
        size_t n = 0;
        if (t == napi_null || t == napi_undefined) rc = APPNORTH_BEFORE_SEND_DROP;
        else if (t == napi_boolean && napi_get_value_bool(env, result, &keep) == napi_ok) rc = keep ? APPNORTH_BEFORE_SEND_KEEP : APPNORTH_BEFORE_SEND_DROP;
        else if (t == napi_string && napi_get_value_string_utf8(env, result, NULL, 0, &n) == napi_ok) {
            char *text = malloc(n + 1);
            if (text != NULL && napi_get_value_string_utf8(env, result, text, n + 1, &n) == napi_ok &&
                appnorth_buffer_set(replacement, text, n, NULL) == APPNORTH_OK)
                rc = APPNORTH_BEFORE_SEND_REPLACE;
            free(text);
        }
    }
    bool pending = false;
    if (napi_is_exception_pending(env, &pending) == napi_ok && pending) {
        napi_value error, message;
        char reason[256] = "the hook threw";
        size_t n = 0;
        if (napi_get_and_clear_last_exception(env, &error) == napi_ok &&
            napi_coerce_to_string(env, error, &message) == napi_ok)
            napi_get_value_string_utf8(env, message, reason, sizeof reason, &n);
        appnorth_buffer_set(replacement, reason, strlen(reason), NULL);
        rc = -1;
    }
    napi_close_handle_scope(env, scope);
    return rc;
}

/* eventsNew(client, {dataDir, ...policy, ...session, ...sampling, beforeSend}) */
static napi_value events_new(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *dir = NULL;
    appnorth_events *events = NULL;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !an_string(env, an_prop(env, a.argv[1], "dataDir"), "dataDir", false, &dir)) return NULL;
    appnorth_events_options *options = appnorth_events_options_new();
    an_events *ev = calloc(1, sizeof *ev);
    an_handle *h = ev == NULL ? NULL : &ev->h;
    napi_value hook = an_prop(env, a.argv[1], "beforeSend");
    napi_valuetype hook_type = napi_undefined;
    napi_typeof(env, hook, &hook_type);
    if (hook_type != napi_undefined && hook_type != napi_null && hook_type != napi_function) {
        an_free_string(dir);
        appnorth_events_options_free(options);
        free(ev);
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "beforeSend must be a function");
        return NULL;
    }
    bool ok = options != NULL && h != NULL &&
              (hook_type != napi_function ||
               (napi_create_reference(env, hook, 1, &ev->before_send) == napi_ok &&
                an_ok(env, appnorth_events_options_set_before_send(options, before_send, ev, NULL, &err), &err))) &&
              an_ok(env, appnorth_events_options_set_client(options, c->h.ptr, &err), &err) &&
              an_ok(env, appnorth_events_options_set_data_dir(options, dir, &err), &err) &&
              set_policy(env, a.argv[1], options, &err) && set_session(env, a.argv[1], options, &err) &&
              set_sampling(env, a.argv[1], options, &err) && an_ok(env, appnorth_events_new(options, &events, &err), &err);
    appnorth_events_options_free(options);
    an_free_string(dir);
    if (!ok) {
        if (ev != NULL && ev->before_send != NULL) napi_delete_reference(env, ev->before_send);
        free(ev);
        return NULL;
    }
    h->kind = AN_EVENTS;
    h->ptr = events;
    return an_wrap(env, an_env_get(env), h);
}

static an_handle *events_arg(napi_env env, napi_callback_info info, an_args *a) {
    return an_get_args(env, info, a) ? an_unwrap(env, a->argv[0], AN_EVENTS, "events") : NULL;
}

/* eventsTrack(events, name, propertiesJson|null) -> queued */
static napi_value events_track(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *name = NULL, *properties = NULL;
    int32_t queued = 0;
    an_handle *h = events_arg(env, info, &a);
    bool ok = h != NULL && an_string(env, a.argv[1], "name", false, &name) &&
              an_string(env, a.argv[2], "properties", true, &properties) &&
              an_ok(env, appnorth_events_track(h->ptr, name, properties, &queued, &err), &err);
    an_free_string(name), an_free_string(properties);
    return ok ? an_boolean(env, queued == 1) : NULL;
}

/* eventsFlush(events, client, timeoutMs) -> [promise, op] */
static napi_value events_flush(napi_env env, napi_callback_info info) {
    an_start k;
    int32_t timeout = 0;
    if (!an_start_args(env, info, AN_EVENTS, NULL, &k) ||
        !an_int32(env, k.a.argv[2], "timeoutMs", 0, INT32_MAX, &timeout) || !an_start_op(env, &k))
        return NULL;
    return an_start_end(env, &k, appnorth_events_flush_async(k.owner->ptr, timeout, AN_TAIL(k)));
}

/* eventsSimple(events, which): the calls with no argument and no result. */
static napi_value events_simple(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t which = 0;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_int32(env, a.argv[1], "which", 0, 2, &which)) return NULL;
    int32_t rc = which == 0   ? appnorth_events_start_session(h->ptr, &err)
                 : which == 1 ? appnorth_events_foreground(h->ptr, &err)
                              : appnorth_events_reset(h->ptr, &err);
    return an_ok(env, rc, &err) ? an_undefined(env) : NULL;
}

static napi_value events_set_network_type(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t type = 0;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL ||
        !an_int32(env, a.argv[1], "networkType", APPNORTH_NETWORK_UNKNOWN, APPNORTH_NETWORK_EXPENSIVE_CELLULAR,
                  &type) ||
        !an_ok(env, appnorth_events_set_network_type(h->ptr, type, &err), &err))
        return NULL;
    return an_undefined(env);
}

/* eventsSetConsent(events, granted): blocks for the purge when revoking. */
static napi_value events_set_consent(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    bool granted = false;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_bool(env, a.argv[1], "granted", &granted) ||
        !an_ok(env, appnorth_events_set_consent(h->ptr, granted ? 1 : 0, &err), &err))
        return NULL;
    return an_undefined(env);
}

static napi_value events_consent(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t state = 0;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_ok(env, appnorth_events_consent(h->ptr, &state, &err), &err)) return NULL;
    return an_i32(env, state);
}

/* eventsIdentify(events, userId) / eventsSetPushToken(events, token|null) */
static napi_value events_set_identity(napi_env env, napi_callback_info info, bool push) {
    an_args a;
    appnorth_error err;
    char *value = NULL;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_string(env, a.argv[1], push ? "token" : "userId", push, &value)) return NULL;
    int32_t rc = push ? appnorth_events_set_push_token(h->ptr, value, &err)
                      : appnorth_events_identify(h->ptr, value, &err);
    an_free_string(value);
    return an_ok(env, rc, &err) ? an_undefined(env) : NULL;
}

static napi_value events_identify(napi_env env, napi_callback_info info) {
    return events_set_identity(env, info, false);
}
static napi_value events_set_push_token(napi_env env, napi_callback_info info) {
    return events_set_identity(env, info, true);
}

/* eventsRegister(events, json, once) / eventsUnregister(events, key): super properties. */
static napi_value events_register(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *json = NULL;
    bool once = false;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_string(env, a.argv[1], "properties", false, &json)) return NULL;
    bool ok = an_bool(env, a.argv[2], "once", &once) &&
              an_ok(env, once ? appnorth_events_register_once(h->ptr, json, &err)
                              : appnorth_events_register(h->ptr, json, &err), &err);
    an_free_string(json);
    return ok ? an_undefined(env) : NULL;
}

static napi_value events_unregister(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *key = NULL;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_string(env, a.argv[1], "key", false, &key)) return NULL;
    bool ok = an_ok(env, appnorth_events_unregister(h->ptr, key, &err), &err);
    an_free_string(key);
    return ok ? an_undefined(env) : NULL;
}

/* eventsText(events, which): 0 anonymous id, 1 stats JSON, 2 session id,
 * 3 super properties JSON. */
static napi_value events_text(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t which = 0;
    char *text = NULL;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_int32(env, a.argv[1], "which", 0, 3, &which)) return NULL;
    int32_t rc = which == 0   ? appnorth_events_anonymous_id(h->ptr, &text, &err)
                 : which == 1 ? appnorth_events_stats(h->ptr, &text, &err)
                 : which == 2 ? appnorth_events_session_id(h->ptr, &text, &err)
                              : appnorth_events_super_properties(h->ptr, &text, &err);
    return an_ok(env, rc, &err) ? an_take(env, text) : NULL;
}

/* eventsPending(events, max) -> the pending events' JSON array text. */
static napi_value events_pending(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t max = 0;
    char *text = NULL;
    an_handle *h = events_arg(env, info, &a);
    if (h == NULL || !an_int32(env, a.argv[1], "max", 1, INT32_MAX, &max)) return NULL;
    return an_ok(env, appnorth_events_pending(h->ptr, max, &text, &err), &err) ? an_take(env, text) : NULL;
}

void an_init_events(napi_env env, napi_value exports) {
    static const an_export list[] = {
        {"eventsNew", events_new},
        {"eventsTrack", events_track},
        {"eventsFlush", events_flush},
        {"eventsSimple", events_simple},
        {"eventsSetNetworkType", events_set_network_type},
        {"eventsSetConsent", events_set_consent},
        {"eventsConsent", events_consent},
        {"eventsIdentify", events_identify},
        {"eventsSetPushToken", events_set_push_token},
        {"eventsText", events_text},
        {"eventsPending", events_pending},
        {"eventsRegister", events_register},
        {"eventsUnregister", events_unregister},
        {NULL, NULL},
    };
    an_export_all(env, exports, list);
}
