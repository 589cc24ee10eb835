/* The client: options, its dispatch-mode poll watcher, the plumbing of every
 * non-blocking operation (a Promise settled inside appnorth_dispatch()), and
 * the client's reads. */
#include "addon.h"

#include <stdlib.h>
#include <string.h>

struct an_pending {
    an_env *e;
    an_client *client;
    napi_deferred deferred;
    napi_value promise;  /* valid only in the start call's scope */
    napi_ref client_obj; /* keeps the client (and its struct) alive */
    napi_ref owner_obj;  /* the queue, events or config, or NULL */
};

an_client *an_client_arg(napi_env env, napi_value v) {
    return (an_client *)an_unwrap(env, v, AN_CLIENT, "client");
}

/* ---- the dispatch watcher -------------------------------------------------- */

static void poll_freed(uv_handle_t *handle) {
    an_env *e = handle->data;
    free(handle);
    an_poll_closed(e);
}

/* The eventfd is readable: run every queued callback here, on the JS thread,
 * inside a callback scope (so promise reactions and nextTicks run when it
 * closes, as after any I/O callback). */
static void on_readable(uv_poll_t *poll, int status, int events) {
    (void)status, (void)events;
    an_client *c = poll->data;
    an_env *e = c->h.env;
    if (c->h.ptr == NULL || e->closing || c->h.free_deferred) return;
    napi_env env = e->env;
    napi_handle_scope scope;
    napi_callback_scope callback_scope;
    napi_value resource;
    napi_open_handle_scope(env, &scope);
    napi_create_object(env, &resource);
    napi_open_callback_scope(env, resource, c->async, &callback_scope);
    appnorth_error err;
    int32_t ran = 0;
    e->dispatching++;
    appnorth_dispatch(c->h.ptr, 0, &ran, &err);
    e->dispatching--;
    if (e->dispatching == 0) an_run_deferred(e);
    napi_close_callback_scope(env, callback_scope);
    napi_close_handle_scope(env, scope);
}

/* Only operations in flight keep the loop alive: an idle client, a live
 * config or a logger alone let the process exit. */
static void set_in_flight(an_client *c, int32_t delta) {
    int32_t before = c->in_flight;
    c->in_flight += delta;
    if (c->poll == NULL) return;
    if (before == 0 && c->in_flight > 0) uv_ref((uv_handle_t *)c->poll);
    if (before > 0 && c->in_flight == 0) uv_unref((uv_handle_t *)c->poll);
}

void an_client_release(an_client *c) {
    an_env *e = c->h.env;
    if (c->poll != NULL) {
        uv_poll_stop(c->poll);
        c->poll->data = e;
        e->polls_closing++;
        uv_close((uv_handle_t *)c->poll, poll_freed);
        c->poll = NULL; /* out of the loop before the descriptor goes */
    }
    /* Dispatch mode: runs the completions still queued or in flight here,
     * on this thread (an_on_done settles or, when closing, only frees). */
    appnorth_client_free(c->h.ptr);
    c->h.ptr = NULL;
    if (!e->finalized) {
        if (c->logger != NULL) napi_delete_reference(e->env, c->logger);
        napi_async_destroy(e->env, c->async);
    }
    c->logger = NULL;
}

static void on_log(int32_t level, const char *message, void *user_data) {
    an_client *c = user_data;
    an_env *e = c->h.env;
    if (e->closing || c->logger == NULL) return;
    napi_value argv[2] = {an_i32(e->env, level), an_str(e->env, message)};
    an_call(e->env, c->logger, 2, argv);
}

/* ---- operations ------------------------------------------------------------ */

an_pending *an_pending_new(napi_env env, an_client *client, napi_value client_obj, napi_value owner_obj) {
    an_pending *p = calloc(1, sizeof *p);
    if (p == NULL) {
        napi_throw_error(env, "ERR_MEMORY", "out of memory");
        return NULL;
    }
    p->e = client->h.env;
    p->client = client;
    napi_create_promise(env, &p->deferred, &p->promise);
    napi_create_reference(env, client_obj, 1, &p->client_obj);
    if (owner_obj != NULL) napi_create_reference(env, owner_obj, 1, &p->owner_obj);
    return p;
}

static void pending_free(an_pending *p) {
    if (!p->e->finalized) {
        napi_delete_reference(p->e->env, p->client_obj);
        if (p->owner_obj != NULL) napi_delete_reference(p->e->env, p->owner_obj);
    }
    free(p);
}

napi_value an_pending_started(napi_env env, an_pending *p, int32_t rc, uint64_t op, const appnorth_error *err) {
    if (p == NULL) return NULL;
    if (rc != APPNORTH_OK) {
        /* Nothing started: the promise was never handed out; settle it
         * quietly and throw (the JS layer's async method rejects). */
        napi_resolve_deferred(env, p->deferred, an_undefined(env));
        pending_free(p);
        an_throw_status(env, rc, err);
        return NULL;
    }
    set_in_flight(p->client, +1);
    napi_value result, id;
    napi_create_array_with_length(env, 2, &result);
    napi_create_bigint_uint64(env, op, &id);
    napi_set_element(env, result, 0, p->promise);
    napi_set_element(env, result, 1, id);
    return result;
}

void an_on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *result_json, void *user_data) {
    (void)op;
    an_pending *p = user_data;
    an_env *e = p->e;
    set_in_flight(p->client, -1);
    if (e->closing) { /* the env is going away: no JS; the deferred goes with it */
        pending_free(p);
        return;
    }
    napi_env env = e->env;
    napi_handle_scope scope;
    napi_open_handle_scope(env, &scope);
    if (status == APPNORTH_OK) {
        napi_resolve_deferred(env, p->deferred, an_str(env, result_json));
    } else {
        napi_value error = an_error_value(env, status, err);
        if (result_json != NULL) napi_set_named_property(env, error, "resultJson", an_str(env, result_json));
        napi_reject_deferred(env, p->deferred, error);
    }
    napi_close_handle_scope(env, scope);
    pending_free(p);
}

bool an_start_args(napi_env env, napi_callback_info info, an_kind owner_kind, const char *const *names, an_start *k) {
    for (int i = 0; i < 4; i++) k->s[i] = NULL;
    k->p = NULL;
    k->id = 0;
    if (!an_get_args(env, info, &k->a)) return false;
    size_t client_arg = owner_kind == AN_CLIENT ? 0 : 1;
    static const char *const what[] = {"", "client", "", "queue", "", "", "", "events", "config"};
    k->owner = an_unwrap(env, k->a.argv[0], owner_kind, what[owner_kind]);
    k->client = k->owner != NULL ? an_client_arg(env, k->a.argv[client_arg]) : NULL;
    if (k->client == NULL) return false;
    k->next = client_arg + 1;
    for (int i = 0; names != NULL && names[i] != NULL; i++, k->next++) {
        bool nullable = names[i][0] == '?';
        if (!an_string(env, k->a.argv[k->next], names[i] + (nullable ? 1 : 0), nullable, &k->s[i])) {
            an_start_abort(k);
            return false;
        }
    }
    return true;
}

void an_start_abort(an_start *k) {
    for (int i = 0; i < 4; i++) an_free_string(k->s[i]), k->s[i] = NULL;
}

bool an_start_op(napi_env env, an_start *k) {
    napi_value client_obj = k->a.argv[k->owner == &k->client->h ? 0 : 1];
    napi_value owner_obj = k->owner == &k->client->h ? NULL : k->a.argv[0];
    k->p = an_pending_new(env, k->client, client_obj, owner_obj);
    if (k->p == NULL) an_start_abort(k);
    return k->p != NULL;
}

napi_value an_start_end(napi_env env, an_start *k, int32_t rc) {
    an_start_abort(k); /* the strings: the library copied what it keeps */
    return an_pending_started(env, k->p, rc, k->id, &k->err);
}

/* ---- the client ------------------------------------------------------------ */

/* Applies the optional TLS, proxy and compression settings of `o`. */
static bool set_transport(napi_env env, napi_value o, appnorth_client_options *options, appnorth_error *err) {
    char *s = NULL;
    bool ok = true, flag;
    napi_value v = an_prop(env, o, "caFile");
    if (ok && (ok = an_string(env, v, "caFile", true, &s)) && s != NULL)
        ok = an_ok(env, appnorth_client_options_set_ca_file(options, s, err), err);
    an_free_string(s), s = NULL;
    v = an_prop(env, o, "caPem");
    if (ok && (ok = an_string(env, v, "caPem", true, &s)) && s != NULL)
        ok = an_ok(env, appnorth_client_options_set_ca_pem(options, s, strlen(s), err), err);
    an_free_string(s), s = NULL;
    v = an_prop(env, o, "pinnedPublicKeys");
    if (ok && (ok = an_string(env, v, "pinnedPublicKeys", true, &s)) && s != NULL)
        ok = an_ok(env, appnorth_client_options_set_pinned_public_keys(options, s, err), err);
    an_free_string(s), s = NULL;
    v = an_prop(env, o, "proxy");
    if (ok && (ok = an_string(env, v, "proxy", true, &s)) && s != NULL)
        ok = an_ok(env, appnorth_client_options_set_proxy(options, s, 0, err), err);
    an_free_string(s), s = NULL;
    v = an_prop(env, o, "compression");
    napi_valuetype t;
    napi_typeof(env, v, &t);
    if (ok && t != napi_undefined && (ok = an_bool(env, v, "compression", &flag)))
        ok = an_ok(env, appnorth_client_options_set_compression(options, flag ? 1 : 0, err), err);
    v = an_prop(env, o, "allowCleartextHosts");
    uint32_t count = 0;
    bool is_array = false;
    napi_is_array(env, v, &is_array);
    if (is_array) napi_get_array_length(env, v, &count);
    for (uint32_t i = 0; ok && i < count; i++) {
        napi_value host;
        napi_get_element(env, v, i, &host);
        if ((ok = an_string(env, host, "allowCleartextHosts[i]", false, &s)))
            ok = an_ok(env, appnorth_client_options_allow_cleartext_host(options, s, err), err);
        an_free_string(s), s = NULL;
    }
    return ok;
}

static bool set_identity(napi_env env, napi_value o, appnorth_client_options *options, appnorth_error *err) {
    char *url = NULL, *app = NULL, *email = NULL, *token = NULL;
    int32_t api_ms = 30000, resource_ms = 60000;
    napi_value v;
    napi_valuetype t;
    bool ok = an_string(env, an_prop(env, o, "apiUrl"), "apiUrl", false, &url) &&
              an_string(env, an_prop(env, o, "appId"), "appId", false, &app) &&
              an_string(env, an_prop(env, o, "email"), "email", true, &email) &&
              an_string(env, an_prop(env, o, "token"), "token", true, &token);
    if (ok && (v = an_prop(env, o, "apiTimeoutMs"), napi_typeof(env, v, &t), t != napi_undefined))
        ok = an_int32(env, v, "apiTimeoutMs", 1, 600000, &api_ms);
    if (ok && (v = an_prop(env, o, "resourceTimeoutMs"), napi_typeof(env, v, &t), t != napi_undefined))
        ok = an_int32(env, v, "resourceTimeoutMs", 1, 600000, &resource_ms);
    ok = ok && an_ok(env, appnorth_client_options_set_api_url(options, url, err), err) &&
         an_ok(env, appnorth_client_options_set_app_id(options, app, err), err) &&
         an_ok(env, appnorth_client_options_set_timeouts(options, api_ms, resource_ms, err), err);
    if (ok && (email != NULL || token != NULL))
        ok = an_ok(env, appnorth_client_options_set_credential(options, email, token, err), err);
    an_free_string(url), an_free_string(app), an_free_string(email), an_free_string(token);
    return ok;
}

static bool start_polling(an_client *c, appnorth_error *err) {
    int32_t fd = -1;
    if (appnorth_dispatch_fd(c->h.ptr, &fd, err) != APPNORTH_OK) return false;
    c->poll = malloc(sizeof *c->poll);
    if (c->poll == NULL || uv_poll_init(c->h.env->loop, c->poll, fd) != 0) {
        free(c->poll);
        c->poll = NULL;
        err->code = APPNORTH_E_INTERNAL;
        strcpy(err->message, "uv_poll_init failed on the dispatch descriptor");
        return false;
    }
    c->poll->data = c;
    uv_poll_start(c->poll, UV_READABLE, on_readable);
    uv_unref((uv_handle_t *)c->poll);
    return true;
}

/* clientNew({apiUrl, appId, email, token, apiTimeoutMs, resourceTimeoutMs,
 *            logger, logLevel, caFile, caPem, pinnedPublicKeys, proxy,
 *            compression, allowCleartextHosts}) */
static napi_value client_new(napi_env env, napi_callback_info info) {
    an_args a;
    napi_value logger;
    int32_t level = APPNORTH_LOG_INFO;
    napi_valuetype t;
    if (!an_get_args(env, info, &a) || !an_function(env, an_prop(env, a.argv[0], "logger"), "logger", true, &logger))
        return NULL;
    napi_value lv = an_prop(env, a.argv[0], "logLevel");
    napi_typeof(env, lv, &t);
    if (t != napi_undefined && !an_int32(env, lv, "logLevel", APPNORTH_LOG_DEBUG, APPNORTH_LOG_ERROR, &level))
        return NULL;
    an_client *c = calloc(1, sizeof *c);
    appnorth_client_options *options = appnorth_client_options_new();
    appnorth_error err;
    bool ok = c != NULL && options != NULL && set_identity(env, a.argv[0], options, &err) &&
              set_transport(env, a.argv[0], options, &err) &&
              an_ok(env, appnorth_client_options_set_dispatch_mode(options, 1, &err), &err);
    if (ok && logger != NULL)
        ok = an_ok(env, appnorth_client_options_set_logger(options, on_log, level, c, &err), &err);
    appnorth_client *client = NULL;
    ok = ok && an_ok(env, appnorth_client_new(options, &client, &err), &err);
    appnorth_client_options_free(options);
    if (!ok) {
        free(c);
        return NULL;
    }
    c->h.kind = AN_CLIENT;
    c->h.ptr = client;
    if (logger != NULL) napi_create_reference(env, logger, 1, &c->logger);
    napi_value obj = an_wrap(env, an_env_get(env), &c->h);
    napi_async_init(env, obj, an_str(env, "appnorth:dispatch"), &c->async);
    if (!start_polling(c, &err)) {
        an_close(&c->h);
        an_throw_status(env, err.code, &err);
        return NULL;
    }
    return obj;
}

static napi_value client_cancel(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !an_ok(env, appnorth_client_cancel(c->h.ptr, &err), &err)) return NULL;
    return an_undefined(env);
}

static napi_value client_scope(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *scope = NULL;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !an_ok(env, appnorth_client_scope(c->h.ptr, &scope, &err), &err)) return NULL;
    return an_take(env, scope);
}

static napi_value client_set_log_level(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t level;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !an_int32(env, a.argv[1], "level", APPNORTH_LOG_DEBUG, APPNORTH_LOG_ERROR, &level) ||
        !an_ok(env, appnorth_client_set_log_level(c->h.ptr, level, &err), &err))
        return NULL;
    return an_undefined(env);
}

static napi_value client_in_flight(napi_env env, napi_callback_info info) {
    an_args a;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    return c != NULL ? an_i32(env, c->in_flight) : NULL;
}

/* ---- reads ----------------------------------------------------------------- */

static napi_value list_boards(napi_env env, napi_callback_info info) {
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, NULL, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_list_boards_async(k.client->h.ptr, AN_TAIL(k)));
}

/* listIdeas(client, queryJson|null) */
static napi_value list_ideas(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"?query", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_list_ideas_async(k.client->h.ptr, k.s[0], AN_TAIL(k)));
}

/* listComments(client, ideaId) */
static napi_value list_comments(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"ideaId", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_list_comments_async(k.client->h.ptr, k.s[0], AN_TAIL(k)));
}

static napi_value list_chat_messages(napi_env env, napi_callback_info info) {
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, NULL, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_list_chat_messages_async(k.client->h.ptr, AN_TAIL(k)));
}

void an_init_client(napi_env env, napi_value exports) {
    static const an_export list[] = {
        {"clientNew", client_new},
        {"clientCancel", client_cancel},
        {"clientScope", client_scope},
        {"clientSetLogLevel", client_set_log_level},
        {"clientInFlight", client_in_flight},
        {"listBoards", list_boards},
        {"listIdeas", list_ideas},
        {"listComments", list_comments},
        {"listChatMessages", list_chat_messages},
        {NULL, NULL},
    };
    an_export_all(env, exports, list);
}
