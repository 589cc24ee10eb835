/*
 * The Node-API addon over include/appnorth.h: shared types and helpers.
 *
 * Threads. Every client is made in dispatch mode, and its
 * appnorth_dispatch_fd() is watched by a uv_poll on the loop of the JS
 * thread that made it (the main thread or a worker's). Completions, log
 * lines and config changes therefore run only inside appnorth_dispatch(),
 * called from that poll's callback: every napi_* call of this addon happens
 * on the JS thread of its env. No thread-safe function, no timer.
 *
 * Lifetimes. Each native handle is wrapped in a plain JS object (napi_wrap,
 * type-tagged). close() frees the library handle at once, unless a dispatch
 * is running on this env (a JS callback called close()): then the free is
 * deferred until appnorth_dispatch() returns, because a library _free called
 * from inside a callback would complete the handle's operations on a library
 * thread. The env's cleanup hook (worker end, env teardown) frees what is
 * left without calling JS.
 */
#ifndef APPNORTH_NODE_ADDON_H
#define APPNORTH_NODE_ADDON_H

/* The Node-API version comes from the command line (scripts/node-package.sh
 * passes -DNAPI_VERSION from package.json's binary.napi_versions): a call
 * newer than it is undeclared, an error under -Werror. */
#ifndef NAPI_VERSION
#error "compile with -DNAPI_VERSION=N (bindings/node/package.json, binary.napi_versions)"
#endif
#include <node_api.h>
#include <uv.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <appnorth.h>

typedef enum {
    AN_CLIENT = 1,
    AN_STORAGE,
    AN_QUEUE,
    AN_CACHE,
    AN_CLOCK,
    AN_FEEDBACK,
    AN_EVENTS,
    AN_CONFIG,
} an_kind;

struct an_env;

/* One library handle wrapped in a JS object. */
typedef struct an_handle {
    an_kind kind;
    struct an_env *env;
    void *ptr;                 /* the library handle; NULL once freed */
    bool closed;               /* close() was called: calls are refused */
    bool free_deferred;        /* freed after the running dispatch returns */
    struct an_handle *next;    /* the env's list of live handles */
    struct an_handle *prev;
} an_handle;

/* A client: the handle, its poll watcher and what its callbacks need. */
typedef struct an_client {
    an_handle h;
    uv_poll_t *poll;           /* heap: freed by its close callback */
    napi_async_context async;  /* the resource dispatch runs callbacks under */
    napi_ref logger;           /* the JS logger, or NULL */
    int32_t in_flight;         /* operations started, not yet completed */
} an_client;

/* A config: the handle and its one native listener, calling onChange. */
typedef struct an_config {
    an_handle h;
    napi_ref on_change;        /* JS function(configJson, changedKeysJson, tier) */
    int64_t token;             /* the listener's token, 0 when none */
    napi_ref on_status;        /* JS function(status object) */
    int64_t status_token;      /* the status listener's token, 0 when none */
} an_config;

/* Per env (main thread or worker): never shared between threads. */
typedef struct an_events {
    an_handle h;
    napi_ref before_send;      /* JS function(eventJson) -> true|null|string, or NULL */
} an_events;

typedef struct an_env {
    napi_env env;
    uv_loop_t *loop;
    napi_ref make_error;       /* JS (status, httpStatus, message) -> Error */
    an_handle *handles;        /* live handles, newest first */
    int32_t dispatching;       /* depth of appnorth_dispatch() on this env */
    bool closing;              /* the env is being torn down: no JS calls */
    bool finalized;            /* the instance data finalizer ran */
    int32_t wrapped;           /* handle structs not yet finalized */
    int32_t polls_closing;     /* uv_close callbacks still due */
    napi_async_cleanup_hook_handle cleanup;
} an_env;

/* ---- env.c: module state and handle objects --------------------------- */
an_env *an_env_get(napi_env env);
/* Wraps `h` (already filled: kind, ptr) in a new JS object, links it. */
napi_value an_wrap(napi_env env, an_env *e, an_handle *h);
/* The live handle of kind `kind` in args[i], or NULL with a TypeError or an
 * APPNORTH_E_WRONG_STATE error thrown. */
an_handle *an_unwrap(napi_env env, napi_value value, an_kind kind, const char *what);
/* Frees the library handle now, or after the running dispatch returns. */
void an_close(an_handle *h);
/* Runs the frees deferred while a dispatch ran. */
void an_run_deferred(an_env *e);
/* A client's uv_poll finished closing (counts down e->polls_closing). */
void an_poll_closed(an_env *e);
/* The property `name` of a JS options object (undefined when absent). */
napi_value an_prop(napi_env env, napi_value obj, const char *name);
/* obj[name] into *out when present (range-checked); absent leaves *out. */
bool an_optional_int32(napi_env env, napi_value obj, const char *name, int32_t lo, int32_t hi, int32_t *out);
void an_client_release(an_client *c); /* client.c: poll, refs, library free */
void an_config_release(an_config *c); /* config.c */
void an_events_release(an_events *ev); /* events.c */

/* ---- args.c: arguments, results and errors ---------------------------- */
#define AN_MAX_ARGS 8
/* The largest string taken from JS: 32 MiB (the library's own limits are
 * lower; this keeps a copy from being unbounded). */
#define AN_MAX_STRING_BYTES (32u * 1024u * 1024u)

typedef struct an_args {
    size_t argc;
    napi_value argv[AN_MAX_ARGS];
    napi_value self;
} an_args;

bool an_get_args(napi_env env, napi_callback_info info, an_args *a);
/* A JS string as a NUL-terminated UTF-8 copy (free with an_free_string);
 * `nullable` lets undefined and null through as NULL. Throws TypeError for
 * another type or a NUL inside, RangeError over AN_MAX_STRING_BYTES. */
bool an_string(napi_env env, napi_value v, const char *name, bool nullable, char **out);
void an_free_string(char *s);
bool an_int32(napi_env env, napi_value v, const char *name, int32_t lo, int32_t hi, int32_t *out);
bool an_int64(napi_env env, napi_value v, const char *name, int64_t *out);
bool an_double(napi_env env, napi_value v, const char *name, double *out);
bool an_bool(napi_env env, napi_value v, const char *name, bool *out);
bool an_function(napi_env env, napi_value v, const char *name, bool nullable, napi_value *out);
bool an_bytes(napi_env env, napi_value v, const char *name, void **data, size_t *length);

/* Throws (or returns, for rejecting) the JS error for a failed call. */
napi_value an_error_value(napi_env env, int32_t status, const appnorth_error *err);
void an_throw_status(napi_env env, int32_t status, const appnorth_error *err);
/* rc OK: returns true; else throws and returns false. */
bool an_ok(napi_env env, int32_t rc, const appnorth_error *err);

napi_value an_undefined(napi_env env);
napi_value an_str(napi_env env, const char *s);       /* NULL -> null */
napi_value an_take(napi_env env, char *s);            /* an_str, then appnorth_string_free */
napi_value an_i32(napi_env env, int32_t v);
napi_value an_i64(napi_env env, int64_t v);
napi_value an_f64(napi_env env, double v);
napi_value an_boolean(napi_env env, bool v);
/* Calls fn(args) on the JS thread; a throw becomes an uncaught exception. */
void an_call(napi_env env, napi_ref fn, size_t argc, const napi_value *argv);

/* ---- client.c: the async operation plumbing, shared by every module -- */
typedef struct an_pending an_pending;
/* Before an _async start: a pending operation on `client` (the client whose
 * dispatcher completes it; `client_obj` is its JS object), holding
 * `owner_obj` too (the queue, events or config it runs on; may be the
 * client). Both stay alive until the completion. */
an_pending *an_pending_new(napi_env env, an_client *client, napi_value client_obj, napi_value owner_obj);
/* After the start: on OK returns [promise, op]; else throws and frees p. */
napi_value an_pending_started(napi_env env, an_pending *p, int32_t rc, uint64_t op,
                              const appnorth_error *err);
void an_on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *result_json,
                void *user_data);
an_client *an_client_arg(napi_env env, napi_value v);

/* One non-blocking start, in three steps: an_start_args reads argv[0] (the
 * client itself when owner_kind is AN_CLIENT; else the queue, events or
 * config, with the client in argv[1]) and then the strings `names` (a name
 * starting with '?' may be null or undefined); the caller reads any other
 * argument (an_start_abort on failure); an_start_op makes the pending
 * operation; the _async call gets AN_TAIL(k) and its status goes to
 * an_start_end, which returns [promise, op] or throws. */
typedef struct an_start {
    an_args a;
    an_handle *owner;   /* argv[0]: the client's handle, or the queue/events/config */
    an_client *client;
    size_t next;        /* the first argument after the strings */
    char *s[4];
    an_pending *p;
    uint64_t id;
    appnorth_error err;
} an_start;
#define AN_TAIL(k) an_on_done, (k).p, &(k).id, &(k).err
bool an_start_args(napi_env env, napi_callback_info info, an_kind owner_kind, const char *const *names, an_start *k);
void an_start_abort(an_start *k);
bool an_start_op(napi_env env, an_start *k);
napi_value an_start_end(napi_env env, an_start *k, int32_t rc);

typedef struct an_export {
    const char *name;
    napi_callback fn;
} an_export;

void an_export_all(napi_env env, napi_value exports, const an_export *list);
void an_init_client(napi_env env, napi_value exports);
void an_init_writes(napi_env env, napi_value exports);
void an_init_offline(napi_env env, napi_value exports);
void an_init_events(napi_env env, napi_value exports);
void an_init_config(napi_env env, napi_value exports);

#endif
