/* Module state per env, the JS objects that hold library handles, and the
 * env's teardown (a worker ending, or Node freeing the main env). */
#include "addon.h"

#include <stdio.h>
#include <stdlib.h>

/* Marks this addon's handle objects, so that another object (or another
 * addon's) is a TypeError, never a pointer misread. */
static const napi_type_tag handle_tag = {0x6170706e6f727468ULL, 0x6e6f64652d616464ULL};

an_env *an_env_get(napi_env env) {
    an_env *e = NULL;
    napi_get_instance_data(env, (void **)&e);
    return e;
}

static void maybe_free_env(an_env *e) {
    if (e->finalized && e->wrapped == 0 && e->polls_closing == 0) free(e);
}

static void unlink_handle(an_handle *h) {
    an_env *e = h->env;
    if (h->prev != NULL) h->prev->next = h->next;
    else if (e->handles == h) e->handles = h->next;
    if (h->next != NULL) h->next->prev = h->prev;
    h->next = h->prev = NULL;
}

/* The library free of one handle, on the env's JS thread, outside any
 * dispatch. */
static void release(an_handle *h) {
    if (h->ptr == NULL) return;
    switch (h->kind) {
    case AN_CLIENT: an_client_release((an_client *)h); break;
    case AN_CONFIG: an_config_release((an_config *)h); break;
    case AN_STORAGE: appnorth_storage_free(h->ptr); break;
    case AN_QUEUE: appnorth_queue_free(h->ptr); break;
    case AN_CACHE: appnorth_cache_free(h->ptr); break;
    case AN_CLOCK: appnorth_clock_free(h->ptr); break;
    case AN_FEEDBACK: appnorth_feedback_free(h->ptr); break;
    case AN_EVENTS: an_events_release((an_events *)h); break;
    }
    h->ptr = NULL;
    h->free_deferred = false;
    unlink_handle(h);
}

void an_close(an_handle *h) {
    h->closed = true;
    if (h->ptr == NULL) return;
    if (h->env->dispatching > 0) {
        h->free_deferred = true; /* freed by an_run_deferred, outside the callback */
        return;
    }
    release(h);
}

void an_run_deferred(an_env *e) {
    bool again = true;
    while (again) {
        again = false;
        for (an_handle *h = e->handles; h != NULL; h = h->next) {
            if (h->free_deferred) {
                release(h);
                again = true;
                break;
            }
        }
    }
}

static void finalize_handle(napi_env env, void *data, void *hint) {
    (void)env, (void)hint;
    an_handle *h = data;
    an_env *e = h->env;
    /* Collected without close(): nothing can call it any more. A client
     * with operations in flight is never collected (each holds it). */
    if (h->ptr != NULL && !e->finalized) {
        if (e->dispatching > 0) {
            h->free_deferred = true;
            h->closed = true;
            return; /* freed after the dispatch; the struct is leaked, harmless */
        }
        release(h);
    }
    unlink_handle(h);
    e->wrapped--;
    free(h);
    maybe_free_env(e);
}

napi_value an_wrap(napi_env env, an_env *e, an_handle *h) {
    napi_value obj;
    napi_create_object(env, &obj);
    h->env = e;
    h->next = e->handles;
    h->prev = NULL;
    if (e->handles != NULL) e->handles->prev = h;
    e->handles = h;
    e->wrapped++;
    napi_type_tag_object(env, obj, &handle_tag);
    napi_wrap(env, obj, h, finalize_handle, NULL, NULL);
    return obj;
}

static const char *kind_name(an_kind kind) {
    static const char *const names[] = {"", "Client", "Storage", "OfflineQueue", "ReadCache",
                                        "ManualClock", "Feedback", "Events", "Config"};
    return names[kind];
}

/* The handle in `value`, closed or not, or NULL when it is none of ours. */
static an_handle *unwrap_any(napi_env env, napi_value value) {
    bool tagged = false;
    an_handle *h = NULL;
    napi_valuetype t;
    napi_typeof(env, value, &t);
    if (t == napi_object) napi_check_object_type_tag(env, value, &handle_tag, &tagged);
    if (tagged) napi_unwrap(env, value, (void **)&h);
    return h;
}

an_handle *an_unwrap(napi_env env, napi_value value, an_kind kind, const char *what) {
    an_handle *h = unwrap_any(env, value);
    if (h == NULL || h->kind != kind) {
        char message[128];
        snprintf(message, sizeof message, "%s must be an appnorth %s", what, kind_name(kind));
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", message);
        return NULL;
    }
    if (h->closed || h->ptr == NULL) {
        appnorth_error err = {APPNORTH_E_WRONG_STATE, 0, {0}};
        snprintf(err.message, sizeof err.message, "this %s is closed", kind_name(kind));
        an_throw_status(env, APPNORTH_E_WRONG_STATE, &err);
        return NULL;
    }
    return h;
}

/* ---- teardown ------------------------------------------------------------ */

/* The env goes away (a worker ends, or Node frees the main env): free every
 * library handle, the configs and events first and the clients last, with
 * no JS call (their completions only free their records now). The clients'
 * uv_poll handles close asynchronously; the hook ends when the last did. */
static void teardown(napi_async_cleanup_hook_handle handle, void *arg) {
    an_env *e = arg;
    e->closing = true;
    e->cleanup = handle;
    e->polls_closing++; /* held until every release below was started */
    for (int pass = 0; pass < 2; pass++) {
        for (an_handle *h = e->handles, *next; h != NULL; h = next) {
            next = h->next;
            if ((h->kind == AN_CLIENT) == (pass == 1)) {
                h->closed = true;
                release(h);
            }
        }
    }
    an_poll_closed(e);
}

void an_poll_closed(an_env *e) {
    if (--e->polls_closing > 0) return;
    if (e->closing && e->cleanup != NULL) {
        napi_async_cleanup_hook_handle handle = e->cleanup;
        e->cleanup = NULL;
        napi_remove_async_cleanup_hook(handle);
    }
    maybe_free_env(e);
}

static void finalize_env(napi_env env, void *data, void *hint) {
    (void)env, (void)hint;
    an_env *e = data;
    e->finalized = true;
    if (e->make_error != NULL) {
        napi_delete_reference(env, e->make_error);
        e->make_error = NULL;
    }
    maybe_free_env(e);
}

/* setup({makeError}): the JS factory for library errors. */
static napi_value setup(napi_env env, napi_callback_info info) {
    an_args a;
    napi_value fn;
    if (!an_get_args(env, info, &a) || !an_function(env, a.argv[0], "makeError", false, &fn)) return NULL;
    an_env *e = an_env_get(env);
    if (e->make_error != NULL) napi_delete_reference(env, e->make_error);
    napi_create_reference(env, fn, 1, &e->make_error);
    return an_undefined(env);
}

/* close(handle): frees any handle's library object (again: a no-op). */
static napi_value close_handle(napi_env env, napi_callback_info info) {
    an_args a;
    if (!an_get_args(env, info, &a)) return NULL;
    an_handle *h = unwrap_any(env, a.argv[0]);
    if (h == NULL) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "close() needs an appnorth handle");
        return NULL;
    }
    an_close(h);
    return an_undefined(env);
}

/* shutdown(timeoutMs): appnorth_shutdown, for process.on('exit'). */
static napi_value library_shutdown(napi_env env, napi_callback_info info) {
    an_args a;
    int32_t timeout = 0;
    appnorth_error err;
    if (!an_get_args(env, info, &a) || !an_int32(env, a.argv[0], "timeoutMs", 0, INT32_MAX, &timeout) ||
        !an_ok(env, appnorth_shutdown(timeout, &err), &err))
        return NULL;
    return an_undefined(env);
}

static napi_value version(napi_env env, napi_callback_info info) {
    (void)info;
    return an_str(env, appnorth_version()); /* static: never freed */
}

static napi_value status_str(napi_env env, napi_callback_info info) {
    an_args a;
    int32_t code;
    if (!an_get_args(env, info, &a) || !an_int32(env, a.argv[0], "code", INT32_MIN, INT32_MAX, &code)) return NULL;
    return an_str(env, appnorth_status_str(code));
}

static napi_value op_cancel(napi_env env, napi_callback_info info) {
    an_args a;
    bool lossless = true;
    uint64_t op = 0;
    if (!an_get_args(env, info, &a)) return NULL;
    if (napi_get_value_bigint_uint64(env, a.argv[0], &op, &lossless) != napi_ok || !lossless) {
        napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "op must be an operation id (a bigint)");
        return NULL;
    }
    appnorth_error err;
    int32_t rc = appnorth_op_cancel(op, &err);
    if (rc == APPNORTH_E_NOT_FOUND) return an_boolean(env, false); /* already completing: harmless */
    return an_ok(env, rc, &err) ? an_boolean(env, true) : NULL;
}

NAPI_MODULE_INIT() {
    an_env *e = calloc(1, sizeof *e);
    if (e == NULL) {
        napi_throw_error(env, "ERR_MEMORY", "out of memory");
        return NULL;
    }
    e->env = env;
    napi_get_uv_event_loop(env, &e->loop);
    napi_set_instance_data(env, e, finalize_env, NULL);
    napi_add_async_cleanup_hook(env, teardown, e, NULL);
    static const an_export list[] = {
        {"setup", setup}, {"close", close_handle}, {"version", version}, {"statusStr", status_str}, {"opCancel", op_cancel},
        {"shutdown", library_shutdown}, {NULL, NULL}};
    an_export_all(env, exports, list);
    napi_value n;
    napi_create_int32(env, appnorth_version_number(), &n);
    napi_set_named_property(env, exports, "versionNumber", n);
    an_init_client(env, exports);
    an_init_writes(env, exports);
    an_init_offline(env, exports);
    an_init_events(env, exports);
    an_init_config(env, exports);
    return exports;
}
