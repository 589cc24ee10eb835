/*
 * appnorth.h - the public C interface of libappnorth.
 *
 * libappnorth is an offline-first client SDK core: community reads and
 * writes against the AppNorth API, an offline write queue, a TTL read cache,
 * remote config and an analytics event queue. This header is the manual:
 * every function says what it does, what each argument may be, who owns
 * what it returns, and which thread it may block or call back on.
 *
 * Conventions (they hold for every function unless its comment says
 * otherwise):
 *
 *  - Status. Functions return an int32_t status: APPNORTH_OK (0) or one of
 *    the APPNORTH_E_* codes below. appnorth_status_str() names a code.
 *  - Errors. The last parameter, `appnorth_error *err`, is optional (NULL is
 *    fine). When given, it is always written: on success its code is 0 and
 *    its message empty; on failure it holds the code, the HTTP status if a
 *    server answered, and a human-readable message. The library never keeps
 *    a hidden "last error".
 *  - Handles are opaque, made by appnorth_X_new() and released by
 *    appnorth_X_free(). Passing NULL to a _free function does nothing.
 *  - Freeing while other threads use a handle. Each handle counts the calls
 *    in flight on it (an atomic increment and decrement per call). Its _free
 *    function refuses new calls at once (they return APPNORTH_E_WRONG_STATE,
 *    "being freed"), stops the handle's own threads, waits for the calls in
 *    progress on other threads to return, then frees: after it returns no
 *    call on the handle runs and none of its callbacks does. Called from
 *    inside a library callback (or one of the handle's own calls), it does
 *    not wait, since that call or the callback's thread may be what the
 *    others wait for: it returns at once and the handle is freed when its
 *    last call returns. A call made after _free has returned uses freed
 *    memory, as with any freed pointer: the host must stop using the
 *    handle once it calls _free (a host that cannot order that, such as
 *    the Python binding, counts its own callers before calling _free).
 *  - Pointers. A pointer argument is required (NULL is
 *    APPNORTH_E_INVALID_ARGUMENT) unless its comment says it may be NULL,
 *    is optional, or what NULL means. `err` is always optional, an
 *    `idempotency_key` may be NULL (the library makes one), and `user_data`
 *    is never read: it is passed back to the callbacks unchanged.
 *  - Strings. Input strings are NUL-terminated UTF-8, borrowed for the
 *    call; the library copies what it keeps. Strings the library returns
 *    through `char **out_*` parameters belong to the caller and must be
 *    released with appnorth_string_free(): that is the only way to free
 *    them (never the host's free(), nor a marshaller's that calls it).
 *    On failure the out-parameter is set to NULL. A `const char *` return
 *    value (appnorth_version(), appnorth_status_str()) is static: never
 *    free it.
 *  - JSON crosses the boundary as UTF-8 text. Invalid JSON, invalid UTF-8,
 *    NULL where a value is required and oversize values are refused with a
 *    status and a message; nothing is stored or sent.
 *  - Threads. Every handle may be used from several threads at once unless
 *    its comment says otherwise ("Not thread-safe"). Calls that talk to the
 *    network block the calling thread for at most the client's request
 *    timeout. A call that may wait (for the network, a library thread or a
 *    timeout) says so in its comment ("Blocks", "waits for"); a host with
 *    an interpreter lock releases it around those (Ruby's `blocking: true`).
 *    Calls that do not say so return without waiting on any of these; they
 *    may still do local disk work in the data directory.
 *  - Hosts. docs/hosts.md says, per host language (C, C++, Python, Swift,
 *    Go, Rust, C#, Java, LuaJIT, Ruby, Node.js), how these rules map onto its FFI:
 *    marshalling, callbacks against a garbage collector, encodings,
 *    interpreter locks, threads and exit. dist/share/appnorth/ ships
 *    appnorth.api.json, this header as data (every function's types,
 *    nullability, ownership, thread and blocking, read from these
 *    comments), and appnorth.cdef, a cdef that LuaJIT's ffi.cdef and
 *    Python's cffi accept as is.
 *  - fork(). A child forked from a process that uses the library, even one
 *    whose threads are busy tracking and uploading (pre-fork servers:
 *    gunicorn --preload, Celery prefork, Python multiprocessing with fork),
 *    may make new handles and use them normally, on the same data directory
 *    too. Handles made before fork() do not survive into the child: every
 *    call on one there returns APPNORTH_E_WRONG_STATE, and its _free
 *    function does nothing (the parent still owns it; its memory is
 *    reclaimed when the child exits). A child that only exits or execs is
 *    safe as well. How: pthread_atfork handlers, installed with the first
 *    handle, hold the library's locks and SQLite's global mutexes across
 *    fork(), so the child never inherits one locked; fork() may therefore
 *    wait for library calls in progress (microseconds; at most 10 s, after
 *    which it goes ahead). Call fork() from any thread, but not from inside
 *    a library callback. A runtime that library threads enter through
 *    callbacks holds them across its own fork: appnorth_callbacks_hold()
 *    (the Python binding does, in os.register_at_fork).
 *  - Unloading. The library is never unmapped once loaded: it is linked
 *    with -z nodelete and pins itself when the first handle is made, so a
 *    host's dlclose() (Ruby's and LuaJIT's teardown do it on their own)
 *    leaves its threads running safely. Exiting with live handles is safe
 *    too; in the default mode a host runtime whose teardown waits for the
 *    threads that called it back (Mono), or whose callbacks need a lock the
 *    exiting thread holds (Ruby, Python), must free its handles first,
 *    without holding that lock (docs/threading.md), or call
 *    appnorth_shutdown() from its exit hook, which stops every library
 *    thread that runs host code and every host callback, whatever is left
 *    open. Dispatch mode (below) never runs host code on a library thread,
 *    so it needs none of this.
 *  - Several processes and handles on one data directory (worker pools,
 *    a CLI beside a daemon). Opening a fresh directory from several
 *    processes at once is race-free. Queues and caches on SQLite storage
 *    may share one stored name across handles and processes: every change
 *    is one SQLite write transaction, so no acknowledged write is lost.
 *    Events handles may share a directory: each event reaches the server
 *    once. All processes share one anonymous id. Memory and host callback
 *    storages have one owner each; one remote config per data directory
 *    and App ID in a process. Details: docs/multiple-processes.md.
 */
#ifndef APPNORTH_H
#define APPNORTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks every exported function. A host may define it before including
 * this header (for instance empty, for an FFI generator). On Windows the
 * library's own build defines APPNORTH_BUILDING_LIBRARY to export; every
 * other includer imports. */
#ifndef APPNORTH_API
#  if defined(_WIN32)
#    if defined(APPNORTH_BUILDING_LIBRARY)
#      define APPNORTH_API __declspec(dllexport)
#    else
#      define APPNORTH_API __declspec(dllimport)
#    endif
#  elif defined(__GNUC__) || defined(__clang__)
#    define APPNORTH_API __attribute__((visibility("default")))
#  else
#    define APPNORTH_API
#  endif
#endif

/* Marks a function that a later major version may remove: compilers warn
 * at each use, naming the replacement (docs/abi-policy.md). Deprecated
 * functions keep working until that major version. */
#ifndef APPNORTH_DEPRECATED
#  if defined(__GNUC__) || defined(__clang__)
#    define APPNORTH_DEPRECATED(message) __attribute__((deprecated(message)))
#  elif defined(_MSC_VER)
#    define APPNORTH_DEPRECATED(message) __declspec(deprecated(message))
#  else
#    define APPNORTH_DEPRECATED(message)
#  endif
#endif

/* ------------------------------------------------------------------------
 * Version
 * --------------------------------------------------------------------- */

#define APPNORTH_VERSION_MAJOR 0
#define APPNORTH_VERSION_MINOR 4
#define APPNORTH_VERSION_PATCH 0
#define APPNORTH_VERSION_STRING "0.4.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for compile-time comparisons. */
#define APPNORTH_VERSION_NUMBER 400

/**
 * The library's version string, "MAJOR.MINOR.PATCH", as built.
 * Compare with APPNORTH_VERSION_STRING to detect a header/library mismatch.
 * Returns a static string: do not free it. Thread-safe.
 */
APPNORTH_API const char *appnorth_version(void);

/**
 * The library's version as MAJOR * 10000 + MINOR * 100 + PATCH.
 * Thread-safe.
 */
APPNORTH_API int32_t appnorth_version_number(void);

/* ------------------------------------------------------------------------
 * Status codes and errors
 *
 * Numeric arguments: every integer, size and clock argument states its
 * valid range where it is declared. Any value of the argument's type may
 * be passed: one outside the range returns APPNORTH_E_INVALID_ARGUMENT (a
 * size over its limit, including (size_t)-1, APPNORTH_E_TOO_LARGE) and
 * changes nothing. No value, and no value read back from a server, a data
 * directory or a clock, makes the library crash.
 * --------------------------------------------------------------------- */

/*
 * Every enumeration below has an int32_t typedef that names what a value
 * means (appnorth_status, appnorth_log_level, appnorth_read_source,
 * appnorth_network_type, appnorth_consent, appnorth_config_tier,
 * appnorth_config_state); functions
 * take and return plain int32_t, the same type. Each enum also holds a
 * *_INT32_MIN_ member (= INT32_MIN) so that compilers and FFI generators (bindgen,
 * cffi) give its constants a signed 32-bit type, equal to int32_t, rather
 * than unsigned int. Those members are never valid values.
 */

/** A status code: APPNORTH_OK or an APPNORTH_E_* value. */
typedef int32_t appnorth_status;

enum {
    APPNORTH_OK = 0,
    /** A required argument was NULL, empty or out of range. */
    APPNORTH_E_INVALID_ARGUMENT = 1,
    /** Text that must be JSON did not parse, or had the wrong shape. */
    APPNORTH_E_INVALID_JSON = 2,
    /** A string was not valid UTF-8. */
    APPNORTH_E_INVALID_UTF8 = 3,
    /** A value was larger than the library or the server accepts. */
    APPNORTH_E_TOO_LARGE = 4,
    /** No HTTP response: connection refused or dropped, DNS, TLS, timeout. */
    APPNORTH_E_NETWORK = 5,
    /** The server refused the request's content (HTTP 400 or 422). */
    APPNORTH_E_VALIDATION = 6,
    /** The credential was missing or refused (HTTP 401 or 403). */
    APPNORTH_E_AUTHENTICATION = 7,
    /** The addressed object does not exist (HTTP 404). */
    APPNORTH_E_NOT_FOUND = 8,
    /** The request conflicts with stored state (HTTP 409), for instance an
     *  idempotency key reused with a different payload. */
    APPNORTH_E_CONFLICT = 9,
    /** The server failed (HTTP 5xx). */
    APPNORTH_E_SERVER = 10,
    /** Any other unexpected HTTP status; see appnorth_error.http_status. */
    APPNORTH_E_HTTP = 11,
    /** The local store (SQLite, files, host storage callbacks) failed. */
    APPNORTH_E_STORAGE = 12,
    /** The offline queue is at its entry limit; nothing was added. */
    APPNORTH_E_QUEUE_FULL = 13,
    /** The call is not allowed in the handle's current state. */
    APPNORTH_E_WRONG_STATE = 14,
    /** A bug or an impossible condition inside the library. */
    APPNORTH_E_INTERNAL = 15,
    /** The operation did not finish within the time the caller allowed. */
    APPNORTH_E_TIMEOUT = 16,
    /** appnorth_client_cancel() ended the call while it was in flight. */
    APPNORTH_E_CANCELLED = 17,
    APPNORTH_STATUS_INT32_MIN_ = INT32_MIN
};

/**
 * The name of a status code, for instance "network error". code: any value.
 * Returns a static string for every value, including unknown ones: it never
 * allocates and never returns NULL. Thread-safe.
 */
APPNORTH_API const char *appnorth_status_str(int32_t code);

/** Size of appnorth_error.message, including its terminating NUL. */
#define APPNORTH_ERROR_MESSAGE_SIZE 256

/**
 * Detail about a failed call. The host owns the struct (usually on its
 * stack); the library only writes into it. The message is NUL-terminated
 * UTF-8, truncated to fit. It never contains credentials, tokens or
 * identity values.
 */
typedef struct appnorth_error {
    int32_t code;        /* an APPNORTH_* status; 0 after a successful call */
    int32_t http_status; /* the server's HTTP status, or 0 if none */
    char message[APPNORTH_ERROR_MESSAGE_SIZE];
} appnorth_error;

/**
 * Release a string returned by the library. NULL is a no-op.
 * Thread-safe.
 */
APPNORTH_API void appnorth_string_free(char *str);

/* ------------------------------------------------------------------------
 * Process exit
 * --------------------------------------------------------------------- */

/**
 * Stop the library for good, for a runtime's exit hook (Ruby's at_exit,
 * Mono's AppDomain.ProcessExit, a Java shutdown hook, Node's
 * process.on('exit'), Python's atexit), before the runtime tears down the
 * trampolines the library would call. Process-wide; every handle counts.
 *
 * After it returns:
 *  - no host callback of any handle is ever called again: loggers,
 *    listeners, completions, storage and secure-store callbacks and their
 *    release functions, read callbacks. The completions of operations still
 *    in flight are never called (their user_data is never handed back);
 *  - no library thread runs: the threads of every live events queue
 *    (uploader) and remote config (stream, polls) have been stopped and
 *    joined, without a flush (queued events stay on disk for the next
 *    run); every client's transfers in flight are cancelled and dispatch
 *    mode's queues closed; the process's transfer thread and operation
 *    workers have ended;
 *  - every other call returns APPNORTH_E_WRONG_STATE ("the library was
 *    shut down"), and every _free function returns at once and frees
 *    nothing: each handle is safe to leak, and to free.
 * timeout_ms: 0 to INT32_MAX, how long to wait for host callbacks already
 * running on other threads (a logger on the uploader, a completion on the
 * transfer thread) to return and for the library's threads to end.
 * Returns APPNORTH_OK; APPNORTH_E_TIMEOUT when a host callback was still
 * running, or a library thread had not ended, at the deadline (no host
 * callback starts any more, but that one may still be on its way out); APPNORTH_E_INVALID_ARGUMENT for a negative timeout;
 * APPNORTH_E_WRONG_STATE when called from inside a library callback (it
 * would wait for itself), and then nothing is stopped. Calling it again
 * returns APPNORTH_OK at once. Not reversible: a process that needs the
 * library again must restart.
 * Thread-safe, any thread. Blocks: waits for the stopped threads to end (an
 * upload in progress is aborted within about a second) and for host
 * callbacks in flight, up to timeout_ms; a host with an interpreter lock
 * releases it around this call (Ruby's `blocking: true`; ctypes does).
 */
APPNORTH_API int32_t appnorth_shutdown(int32_t timeout_ms, appnorth_error *err);

/* ------------------------------------------------------------------------
 * fork()
 * --------------------------------------------------------------------- */

/**
 * Hold every host callback across a fork(), for a runtime's before-fork
 * hook (Python's os.register_at_fork(before=...), which the Python binding
 * installs). Process-wide; pairs with appnorth_callbacks_resume().
 *
 * Why: a runtime entered from a foreign thread may be inside its own entry
 * code at the moment another thread forks, holding a lock that the child
 * then needs. CPython before 3.11.10 and 3.12.1 (gh-112275) does exactly
 * that: a ctypes callback on a library thread makes its Python thread
 * state under the runtime's thread-state lock, without the GIL, and a
 * child forked meanwhile hangs in PyOS_AfterFork_Child. Measured here with
 * CPython 3.11.7 and completions on the transfer thread: 22 children of
 * 9,000 forks hung without the hold, none with it (docs/architecture.md,
 * "fork()").
 *
 * After it returns, until appnorth_callbacks_resume():
 *  - no host callback starts on another thread: a library thread about to
 *    call one (a completion, a listener, a logger, a storage callback)
 *    waits at that point, holding no lock of the library; nothing is
 *    dropped, and it runs after the resume. Callbacks on the calling thread
 *    (appnorth_dispatch(), say) still run;
 *  - no host callback runs on another thread (APPNORTH_OK), or one still
 *    did at the deadline (APPNORTH_E_TIMEOUT; the hold is in place all the
 *    same, and must be resumed).
 * The library's own fork handlers (pthread_atfork) quiesce its locks as
 * before; this call is only for the runtime's sake. A C host needs neither.
 *
 * timeout_ms: 0 to INT32_MAX, how long to wait for callbacks already
 * running on other threads to return (they may need the runtime's lock:
 * release it around this call, as ctypes does).
 * Returns APPNORTH_OK, APPNORTH_E_TIMEOUT, APPNORTH_E_INVALID_ARGUMENT
 * (negative timeout; nothing is held) or APPNORTH_E_WRONG_STATE when 65,536
 * holds are in place without a resume (a host that never resumes; nothing
 * more is held). After appnorth_shutdown() no
 * callback starts, so it returns APPNORTH_OK once any on their way out
 * have returned.
 * Thread-safe, any thread, also inside a library callback (which it does
 * not count). Holds nest: each needs its resume. Blocks:
 * waits up to timeout_ms for host callbacks running on other threads.
 */
APPNORTH_API int32_t appnorth_callbacks_hold(int32_t timeout_ms, appnorth_error *err);

/**
 * End one appnorth_callbacks_hold(), for the runtime's after-fork hooks:
 * call it in the parent and in the child. Held callbacks go on. A call
 * without a hold in place does nothing. In the child, the library thread
 * that waited does not exist: the child's handles start their own.
 * Thread-safe, any thread; never blocks.
 */
APPNORTH_API void appnorth_callbacks_resume(void);

/* ------------------------------------------------------------------------
 * Logging
 * --------------------------------------------------------------------- */

/** A log level: APPNORTH_LOG_*. */
typedef int32_t appnorth_log_level;

enum {
    APPNORTH_LOG_DEBUG = 0,
    APPNORTH_LOG_INFO = 1,
    APPNORTH_LOG_WARNING = 2,
    APPNORTH_LOG_ERROR = 3,
    APPNORTH_LOG_INT32_MIN_ = INT32_MIN
};

/**
 * A log sink. `message` is UTF-8 and valid only during the call. Log lines
 * never contain credentials, tokens or identity values.
 * THREAD, default mode: any thread, including library background threads
 * (the events uploader, the config stream, the threads running the _async
 * calls), never while the library holds
 * an internal lock. Dispatch mode (appnorth_client_options_set_dispatch_mode):
 * only inside appnorth_dispatch(), on the thread calling it; never on a
 * library thread, and never inside the call that logged. It must not free
 * the handle whose options installed it, except from inside a dispatch.
 */
typedef void (*appnorth_log_fn)(int32_t level, const char *message, void *user_data);

/*
 * APPNORTH_DEBUG=1 in the environment (read once, when the library first
 * logs) lowers every logger to APPNORTH_LOG_DEBUG, and sends the lines of a
 * handle that has no log callback to stderr ("appnorth DEBUG: ..."). DEBUG
 * lines trace each HTTP request (method, path, status, duration, bytes),
 * each event batch (size, outcome), retries, circuit breaker changes,
 * config tier changes and stream connects; never headers, bodies, tokens
 * or identity values.
 */

/* ------------------------------------------------------------------------
 * Client: the community API
 * --------------------------------------------------------------------- */

/** Options for appnorth_client_new(). Not thread-safe: build it on one
 *  thread, then hand it to appnorth_client_new(), which copies it. */
typedef struct appnorth_client_options appnorth_client_options;

/** A connection to one AppNorth API for one App ID and one identity. */
typedef struct appnorth_client appnorth_client;

/**
 * Create client options with the defaults: no API URL, no App ID, no
 * credential (anonymous), API request timeout 30000 ms, resource download
 * timeout 60000 ms, no log callback.
 * Returns NULL only if memory is exhausted. Free with
 * appnorth_client_options_free().
 */
APPNORTH_API appnorth_client_options *appnorth_client_options_new(void);

/** Release options. NULL is a no-op. */
APPNORTH_API void appnorth_client_options_free(appnorth_client_options *options);

/** The longest API URL accepted, in bytes. */
#define APPNORTH_MAX_URL_BYTES 2048

/**
 * Set the API's base URL, for instance "https://api.appnorth.example" or
 * "http://127.0.0.1:8080". Scheme must be http or https; a trailing slash
 * is removed. At most APPNORTH_MAX_URL_BYTES bytes. Required.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL or a malformed URL,
 * APPNORTH_E_INVALID_UTF8 for bad text, APPNORTH_E_TOO_LARGE for a longer
 * URL.
 */
APPNORTH_API int32_t appnorth_client_options_set_api_url(appnorth_client_options *options,
                                                         const char *api_url,
                                                         appnorth_error *err);

/**
 * Set the App ID: 1 to 128 characters of A-Z a-z 0-9 . _ -, other than "."
 * and "..". Required.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL or a malformed id.
 */
APPNORTH_API int32_t appnorth_client_options_set_app_id(appnorth_client_options *options,
                                                        const char *app_id,
                                                        appnorth_error *err);

/**
 * Set the user's credential: an email (the identity; lowercased for account
 * scoping) and its API token. email, token: both NULL clears the credential
 * (anonymous).
 * One NULL and not the other is APPNORTH_E_INVALID_ARGUMENT. The token is
 * kept in memory only: it is never written to disk or to a log. A
 * credential on an http:// API URL whose host is not loopback makes
 * appnorth_client_new() return APPNORTH_E_INVALID_ARGUMENT, unless the host
 * was allowed with appnorth_client_options_allow_cleartext_host().
 */
APPNORTH_API int32_t appnorth_client_options_set_credential(appnorth_client_options *options,
                                                            const char *email,
                                                            const char *token,
                                                            appnorth_error *err);

/**
 * Allow the credential to go in clear text (http://) to `host`, by name.
 * By default appnorth_client_new() refuses a credential on an http:// API
 * URL unless its host is loopback (localhost, *.localhost, 127.0.0.0/8,
 * [::1]): a bearer token must not cross a network unencrypted (RFC 6750
 * 5.3). A host allowed here is accepted, and appnorth_client_new() logs a
 * warning saying the credential goes in clear text. `host` is a bare name
 * or address ("staging.internal", "10.0.0.5", "::1"), compared without
 * case; at most 16 per options. Call it once per host.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL, an empty host, one with a
 * scheme, port, path or other characters, or a 17th host;
 * APPNORTH_E_TOO_LARGE over 253 bytes.
 */
APPNORTH_API int32_t appnorth_client_options_allow_cleartext_host(appnorth_client_options *options,
                                                                  const char *host,
                                                                  appnorth_error *err);

/**
 * Set the timeouts in milliseconds: `api_request_ms` for API calls (default
 * 30000) and `resource_download_ms` for resource downloads such as config
 * documents (default 60000). Each must be 1 to 600000.
 */
APPNORTH_API int32_t appnorth_client_options_set_timeouts(appnorth_client_options *options,
                                                          int32_t api_request_ms,
                                                          int32_t resource_download_ms,
                                                          appnorth_error *err);

/**
 * Route the client's log lines to `fn` for levels >= `min_level`
 * (APPNORTH_LOG_DEBUG to APPNORTH_LOG_ERROR, checked when `fn` is not
 * NULL). NULL `fn` turns logging off (the default). `user_data` is passed back unchanged.
 * Handles made with the client (an events queue, a remote config) keep
 * using this logger after appnorth_client_free(): keep `fn` and
 * `user_data` valid until the client and every handle made with it are
 * freed.
 */
APPNORTH_API int32_t appnorth_client_options_set_logger(appnorth_client_options *options,
                                                        appnorth_log_fn fn,
                                                        int32_t min_level,
                                                        void *user_data,
                                                        appnorth_error *err);

/* Trust and proxy. Every handle made with the client (its events queue,
 * remote config and config stream) uses them. A TLS failure they cause
 * (an untrusted or expired certificate, a wrong host name, a pin that does
 * not match) is APPNORTH_E_NETWORK with curl's reason in the message.
 *
 * Protocol: over https the client offers HTTP/2 and HTTP/1.1 in ALPN and
 * uses what the server picks (HTTP/2 when libcurl was built with nghttp2);
 * plain http is always HTTP/1.1. Each request's DEBUG log line names the
 * protocol used ("... in 3 ms over HTTP/2 (sent ...)"). Connections are kept
 * alive between requests; the config stream keeps one of its own, because
 * libcurl lets only one thread use a connection at a time (the stream and
 * the uploads run on different threads, so they do not share one HTTP/2
 * connection). TLS 1.2 is the lowest version negotiated, whatever OpenSSL's
 * configuration (OPENSSL_CONF) allows. See docs/tls-and-proxies.md. */

/**
 * Verify servers against the PEM CA bundle in the file at `path` instead of
 * the system store: it replaces every default trust source (libcurl's
 * built-in CA bundle and CA directory). The file is read at each new
 * connection. path: NULL clears it.
 * Returns APPNORTH_E_INVALID_ARGUMENT for an empty path, APPNORTH_E_TOO_LARGE
 * over 4096 bytes, APPNORTH_E_INVALID_UTF8 for bad text.
 */
APPNORTH_API int32_t appnorth_client_options_set_ca_file(appnorth_client_options *options,
                                                         const char *path,
                                                         appnorth_error *err);

/** The largest in-memory CA bundle accepted, in bytes (4 MiB). */
#define APPNORTH_MAX_CA_PEM_BYTES 4194304

/**
 * Verify servers against a PEM CA bundle held in memory (`length` bytes,
 * copied; no NUL needed; it must hold a "-----BEGIN CERTIFICATE-----" line,
 * so at least 27 bytes), which replaces every default trust source, as
 * with appnorth_client_options_set_ca_file(), and takes precedence over it.
 * NULL `pem` with `length` 0 clears it.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL with a length or for text
 * without a BEGIN CERTIFICATE block, APPNORTH_E_TOO_LARGE above
 * APPNORTH_MAX_CA_PEM_BYTES (including (size_t)-1).
 */
APPNORTH_API int32_t appnorth_client_options_set_ca_pem(appnorth_client_options *options,
                                                        const void *pem, size_t length,
                                                        appnorth_error *err);

/**
 * Pin the server's public key: one or more "sha256//<base64 SHA-256 of the
 * DER public key>" joined by ";" (at most 64). A connection whose key
 * matches none fails. pins: NULL clears them.
 * Returns APPNORTH_E_INVALID_ARGUMENT for a malformed pin,
 * APPNORTH_E_TOO_LARGE over 4096 bytes.
 */
APPNORTH_API int32_t appnorth_client_options_set_pinned_public_keys(appnorth_client_options *options,
                                                                    const char *pins,
                                                                    appnorth_error *err);

/**
 * Choose the proxy. `proxy_url` (for instance "http://proxy.example:3128";
 * NULL for none) is used for every request. curl's standard proxy
 * environment variables (http_proxy, https_proxy, all_proxy, no_proxy) are
 * honoured by default; `ignore_environment` 1 turns them off, 0 keeps them.
 * Returns APPNORTH_E_INVALID_ARGUMENT for an empty URL, one with spaces or
 * non-ASCII bytes, or `ignore_environment` not 0 or 1; APPNORTH_E_TOO_LARGE
 * over 4096 bytes.
 */
APPNORTH_API int32_t appnorth_client_options_set_proxy(appnorth_client_options *options,
                                                       const char *proxy_url,
                                                       int32_t ignore_environment,
                                                       appnorth_error *err);

/** Write bodies this size or larger go gzip-compressed (1 KiB); event
 *  batches always do. See appnorth_client_options_set_compression(). */
#define APPNORTH_GZIP_WRITE_THRESHOLD_BYTES 1024

/**
 * Turn gzip request bodies on (1, the default) or off (0). When on, every
 * event batch, and every write body of APPNORTH_GZIP_WRITE_THRESHOLD_BYTES
 * or more, is sent with "Content-Encoding: gzip" (docs/protocol.md). A
 * server that answers 415 to a gzip body gets the same request again
 * uncompressed (same idempotency key), and the client sends everything
 * uncompressed from then on, until it is freed. Responses are always
 * accepted gzip-encoded, whatever this says.
 * Returns APPNORTH_E_INVALID_ARGUMENT for `enabled` other than 0 or 1.
 */
APPNORTH_API int32_t appnorth_client_options_set_compression(appnorth_client_options *options,
                                                             int32_t enabled,
                                                             appnorth_error *err);

/**
 * Create a client from options (copied; the options may be freed after).
 * No network traffic happens here.
 * options, out_client: required. On success *out_client is a new handle to
 * free with appnorth_client_free(); on failure it is set to NULL.
 * Returns APPNORTH_E_INVALID_ARGUMENT when the API URL or App ID is missing.
 * Thread-safe: the client may be shared by several threads.
 */
APPNORTH_API int32_t appnorth_client_new(const appnorth_client_options *options,
                                         appnorth_client **out_client,
                                         appnorth_error *err);

/**
 * Free a client. NULL is a no-op. Calls in progress on other threads
 * (network calls included, for at most their timeout) are waited for; see
 * "Freeing while other threads use a handle" above.
 */
APPNORTH_API void appnorth_client_free(appnorth_client *client);

/**
 * Change the minimum level of the client's log callback, for the client and
 * every handle made with it that logs through it (an events queue, a config
 * without a logger of its own), at once and for calls already running.
 * Lines below the level cost nothing: they are not even formatted.
 * client: required. min_level: APPNORTH_LOG_DEBUG to APPNORTH_LOG_ERROR
 * (APPNORTH_E_INVALID_ARGUMENT otherwise). No effect without a callback.
 * Thread-safe; never blocks.
 */
APPNORTH_API int32_t appnorth_client_set_log_level(appnorth_client *client, int32_t min_level,
                                                   appnorth_error *err);

/**
 * Cancel every request in flight on this client at the moment of the call:
 * each returns APPNORTH_E_CANCELLED at once (within a few milliseconds).
 * This covers the client's reads and writes, offline queue submits and
 * flushes, and config fetches and event uploads that use this client.
 * Calls started after it behave normally: there is nothing to reset.
 * An appnorth_events_flush() waiting on an events queue made with this
 * client (and the flush part of appnorth_events_close()) returns
 * APPNORTH_E_CANCELLED too; the upload in flight is cancelled and its
 * events stay queued for the next cycle. A config stream in progress on
 * this client is dropped and reconnects as after a network failure.
 * A cancelled offline queue submit is queued like a network failure (it
 * returns OK with *out_submitted = 0; its idempotency key makes a replay
 * harmless if the server did receive it). A cancelled queue flush stops and
 * returns APPNORTH_E_CANCELLED; the entry in flight stays queued and
 * nothing is lost or sent twice under another key.
 * client: required. Thread-safe: callable from any thread while other
 * threads are inside calls on the client; never blocks. Not
 * async-signal-safe (it takes a lock): from a signal handler, set a flag
 * and call it from a thread.
 */
APPNORTH_API int32_t appnorth_client_cancel(appnorth_client *client, appnorth_error *err);

/**
 * The client's account scope: "<api url>|<app id>|<lowercased email or
 * anonymous>". This is what offline queue entries and cache keys are matched
 * on. *out_scope: caller frees with appnorth_string_free(). Thread-safe.
 */
APPNORTH_API int32_t appnorth_client_scope(appnorth_client *client,
                                           char **out_scope,
                                           appnorth_error *err);

/**
 * List the app's boards.
 * *out_json receives the server's response object, for instance
 * {"boards":[{"id":"b_1","name":"Features",...}]}; the caller frees it with
 * appnorth_string_free().
 * Returns APPNORTH_E_NETWORK when no response arrived, the HTTP mapping
 * (APPNORTH_E_AUTHENTICATION, APPNORTH_E_SERVER, ...) for error responses,
 * APPNORTH_E_INVALID_JSON when the server's body is not a JSON object.
 * Thread-safe. Blocks for at most the API request timeout.
 */
APPNORTH_API int32_t appnorth_client_list_boards(appnorth_client *client,
                                                 char **out_json,
                                                 appnorth_error *err);

/**
 * List ideas, one page at a time.
 * query_json: NULL for no filters, or a JSON object with any of
 *   "board"  (string, board id),
 *   "q"      (string, case-insensitive search in title and body),
 *   "status" (string: open, planned, in_progress, done, declined),
 *   "cursor" (string, the previous page's "next_cursor"),
 *   "limit"  (integer, 1 to 100; the server's default is 20).
 * Unknown keys or wrong types are APPNORTH_E_INVALID_JSON, an unknown
 * status or a limit out of range APPNORTH_E_INVALID_ARGUMENT, before any
 * request is made.
 * *out_json receives {"ideas":[...],"next_cursor":"..." or null}; the caller
 * frees it with appnorth_string_free().
 * Thread-safe. Blocks for at most the API request timeout.
 */
APPNORTH_API int32_t appnorth_client_list_ideas(appnorth_client *client,
                                                const char *query_json,
                                                char **out_json,
                                                appnorth_error *err);

/* ------------------------------------------------------------------------
 * Dispatch mode: every callback on the host's thread
 *
 * By default the library calls the host back on whichever thread has
 * something to say: log lines and config listeners on its own background
 * threads (the events uploader, the config stream). Hosts that cannot take
 * a callback on a foreign thread (game loops, LuaJIT, Mono, Ruby, event
 * loops) turn on dispatch mode for a client. Then no host callback ever
 * runs on a library thread: the library queues what it would have called
 * and the host runs it with appnorth_dispatch(), on a thread of its own
 * choosing, once per frame or when appnorth_dispatch_fd() is readable.
 * docs/threading.md compares the modes and says which suits which host.
 *
 * In dispatch mode, these run only inside appnorth_dispatch(), on the
 * thread that calls it, one at a time, in the order they were queued:
 *  - the client's log callback (appnorth_client_options_set_logger), for
 *    lines of the client and of every handle made with it (events queue,
 *    config), and a config's own log callback
 *    (appnorth_config_options_set_logger) when its client is in dispatch
 *    mode. Log lines from a call the host makes are queued too, so a line
 *    never runs inside a call. At most APPNORTH_DISPATCH_LOG_LIMIT lines,
 *    and at most 1 MiB of their text, wait; later ones are dropped and
 *    counted, and the next dispatch runs one warning line saying how many.
 *    A server's error message reaches a line (or an appnorth_error) as an
 *    excerpt of at most 512 characters, escaped.
 *  - config listeners (appnorth_config_add_listener) of a config made with
 *    the client, for changes from any thread, appnorth_config_refresh()
 *    included. Changes that arrive before a dispatch are coalesced into
 *    one call: the latest config and tier, and the union of the changed
 *    keys, so no change is lost.
 *  - completions of the non-blocking calls (never dropped).
 * Callbacks the library must call synchronously keep running on the thread
 * that called into the library, in both modes: storage load/save
 * (appnorth_storage_new_callbacks), secure-store get/set
 * (appnorth_events_options_set_secure_store), a storage's log callback
 * and the cached-then-fresh appnorth_read_fn. None of them ever runs on a
 * library thread.
 *
 * Removal and freeing with callbacks queued:
 *  - After appnorth_config_remove_listener() returns, that listener is
 *    never called, queued change or not (a call running in a dispatch on
 *    another thread is waited for, as in the default mode).
 *  - appnorth_config_free() drops the config's queued listener calls; its
 *    queued log lines still run (they only use the log callback).
 *  - appnorth_events_free()/_close(): its queued log lines still run.
 *  - appnorth_client_free() closes the dispatcher and its descriptor:
 *    queued log lines and listener calls are dropped (never run), and so
 *    are later ones of the handles made with the client; queued
 *    completions are never dropped: they run on the thread calling
 *    appnorth_client_free(), before it returns. Free the client last, and
 *    take the descriptor out of your poll set before.
 *  - A callback may free any handle, the client included; the dispatch
 *    then runs no log line or listener call after that callback, only the
 *    completions still queued (free from inside a callback returns at
 *    once, and the dispatch runs them before it returns).
 * --------------------------------------------------------------------- */

/** Log lines that may wait for appnorth_dispatch() (and at most 1 MiB of
 *  text); later ones are dropped and counted. */
#define APPNORTH_DISPATCH_LOG_LIMIT 1000

/**
 * Turn dispatch mode on (1) or off (0, the default) for clients made from
 * these options. enabled: 0 or 1 (APPNORTH_E_INVALID_ARGUMENT otherwise).
 * appnorth_client_new() then makes the client's eventfd (it fails with
 * APPNORTH_E_INTERNAL if the process has no descriptor left).
 */
APPNORTH_API int32_t appnorth_client_options_set_dispatch_mode(appnorth_client_options *options,
                                                               int32_t enabled,
                                                               appnorth_error *err);

/**
 * Run the callbacks queued for a dispatch-mode client on the calling
 * thread, one at a time, in order, with no library lock held.
 * client: required. max_callbacks: 0 runs every callback queued when the
 * call began (not those queued while it runs, so a callback that makes
 * more work cannot keep it going); 1 to INT32_MAX runs at most that many;
 * negative is APPNORTH_E_INVALID_ARGUMENT. out_ran: optional; set to the
 * number of host callbacks that ran (0 on failure).
 * Returns APPNORTH_E_WRONG_STATE for a client not in dispatch mode.
 * A call from inside a callback, or while another thread is dispatching
 * this client, runs nothing and returns APPNORTH_OK with *out_ran = 0.
 * Cost: with nothing pending, one atomic load (no lock, no system call):
 * call it every frame. Thread-safe; never blocks, except inside the host's
 * own callbacks.
 */
APPNORTH_API int32_t appnorth_dispatch(appnorth_client *client, int32_t max_callbacks,
                                       int32_t *out_ran, appnorth_error *err);

/**
 * The descriptor of a dispatch-mode client: an eventfd that is readable
 * while a callback is queued, for poll()/epoll/select, asyncio's
 * loop.add_reader(), libuv's uv_poll or a GLib source. When it is readable,
 * call appnorth_dispatch(); it stops being readable once nothing is queued.
 * The library owns it: do not read, write or close it. It is valid until
 * appnorth_client_free() returns (close-on-exec; a forked child must not
 * use it). client, out_fd: required (*out_fd is -1 on failure).
 * Returns APPNORTH_E_WRONG_STATE for a client not in dispatch mode.
 * Thread-safe; never blocks.
 */
APPNORTH_API int32_t appnorth_dispatch_fd(appnorth_client *client, int32_t *out_fd,
                                          appnorth_error *err);

/* ------------------------------------------------------------------------
 * Client: community writes
 *
 * Every write carries an Idempotency-Key: the caller's (1 to 255 printable
 * ASCII characters, 0x20 to 0x7E, not starting or ending with a space) or,
 * when NULL, a random one the library makes. The
 * server applies a key once per app and identity and replays its first
 * answer; a key reused with a different payload is APPNORTH_E_CONFLICT.
 * Content is checked before anything is sent: an empty or whitespace-only
 * text is APPNORTH_E_VALIDATION, invalid UTF-8 APPNORTH_E_INVALID_UTF8,
 * oversize text or screenshots APPNORTH_E_TOO_LARGE.
 * On success *out_json receives the server's answer (for instance
 * {"comment":{...}}), freed with appnorth_string_free(); out_json may be
 * NULL when the answer is not wanted.
 * Thread-safe. Each call blocks for at most the API request timeout.
 * These calls never queue anything: see appnorth_queue_* for writes that
 * survive being offline.
 * --------------------------------------------------------------------- */

/** Limits checked before sending or queueing (characters are Unicode
 *  scalars). The feedback setters refuse oversize values at once with
 *  APPNORTH_E_TOO_LARGE, so nothing oversize is ever queued. */
#define APPNORTH_MAX_TITLE_CHARS 200
#define APPNORTH_MAX_TEXT_CHARS 10000
#define APPNORTH_MAX_FEEDBACK_TEXT_CHARS 20000
#define APPNORTH_MAX_DIAGNOSTICS_BYTES (256 * 1024)
#define APPNORTH_MAX_SCREENSHOTS 5
/* 2 MiB, written as a plain literal so that FFI generators keep it. */
#define APPNORTH_MAX_SCREENSHOT_BYTES 2097152

/** Submit an idea to a board. board_id, title: required; body: may be NULL
 *  (empty). */
APPNORTH_API int32_t appnorth_client_submit_idea(appnorth_client *client, const char *board_id,
                                                 const char *title, const char *body,
                                                 const char *idempotency_key, char **out_json,
                                                 appnorth_error *err);

/** Comment on an idea. idea_id, body: required. An unknown idea is
 *  APPNORTH_E_NOT_FOUND. */
APPNORTH_API int32_t appnorth_client_submit_comment(appnorth_client *client, const char *idea_id,
                                                    const char *body, const char *idempotency_key,
                                                    char **out_json, appnorth_error *err);

/** Feedback built with appnorth_feedback_new() and its setters. Not
 *  thread-safe: build it on one thread. */
typedef struct appnorth_feedback appnorth_feedback;

/** Send feedback (report text, diagnostics, screenshots). The feedback
 *  object is only read; the caller still frees it. */
APPNORTH_API int32_t appnorth_client_submit_feedback(appnorth_client *client,
                                                     const appnorth_feedback *feedback,
                                                     const char *idempotency_key, char **out_json,
                                                     appnorth_error *err);

/** Vote for an idea. A second vote by the same identity is
 *  APPNORTH_E_CONFLICT. Votes are never queued. */
APPNORTH_API int32_t appnorth_client_vote(appnorth_client *client, const char *idea_id,
                                          const char *idempotency_key, char **out_json,
                                          appnorth_error *err);

/** Send a chat message (1 to 4000 characters). Chat messages are never
 *  queued and never cached. */
APPNORTH_API int32_t appnorth_client_send_chat_message(appnorth_client *client, const char *body,
                                                       const char *idempotency_key, char **out_json,
                                                       appnorth_error *err);

/** List this identity's chat messages: {"messages":[...]}. */
APPNORTH_API int32_t appnorth_client_list_chat_messages(appnorth_client *client, char **out_json,
                                                        appnorth_error *err);

/** List an idea's comments: {"comments":[...]}. */
APPNORTH_API int32_t appnorth_client_list_comments(appnorth_client *client, const char *idea_id,
                                                   char **out_json, appnorth_error *err);

/* ------------------------------------------------------------------------
 * Non-blocking operations
 *
 * Every network call has a form ending in _async that returns at once. It
 * takes the blocking call's arguments (checked the same way, before
 * anything is sent), then `on_done`, `user_data`, `out_op` and `err`:
 *
 *  - It returns APPNORTH_OK when the operation started; *out_op (optional)
 *    receives its id. on_done is then called exactly once, with the status,
 *    error and result the blocking call would have given. Any other status
 *    means nothing started (bad input, a handle being freed, no thread to
 *    run it) and on_done is never called; *out_op is set to 0.
 *  - on_done: required (APPNORTH_E_INVALID_ARGUMENT when NULL).
 *    user_data: anything; the host keeps it valid until on_done has run.
 *  - Thread. In dispatch mode (appnorth_client_options_set_dispatch_mode;
 *    the mode of the operation's client, or of the client the queue
 *    call, config or events handle uses) on_done runs only inside
 *    appnorth_dispatch() on that client, on the thread calling it (the
 *    descriptor of appnorth_dispatch_fd() is readable while one is
 *    queued); completions are never dropped. Otherwise on_done runs on a
 *    library thread, possibly before the start call returns: client reads
 *    and writes complete on the process's one
 *    transfer thread, which serves every such operation of every client
 *    (keep on_done short; it may call any appnorth_ function, start more
 *    operations, cancel others, or free the handle). Queue submits and
 *    flushes and config refreshes complete on one of at most 8 worker
 *    threads (on the transfer thread when cancelled, or timed out, before
 *    a worker took them); events flushes on the transfer thread. No library lock is
 *    held while it runs.
 *  - Cost. No thread per operation: client reads and writes all run on the
 *    transfer thread through libcurl's multi interface. A start to a host
 *    that already answered this process writes its request on the calling
 *    thread before returning (a non-blocking socket write under an internal
 *    lock the transfer thread holds only for short turns; no host callback
 *    runs there); a first request to a host (name lookup, connect, TLS
 *    set-up) starts on the transfer thread. At most 8
 *    connections per host (further requests wait their turn, their timeout
 *    running); the calls of several steps (queue, config) share the 8
 *    workers, at most 2 for one client at a time, so a client whose server
 *    never answers does not hold up another's (an events flush holds none:
 *    the transfer thread watches its deadline). One that waits for a
 *    worker ends at once at a cancel or a free, and with APPNORTH_E_TIMEOUT
 *    (nothing sent) once its client's request timeout (the API one for the
 *    queue, the resource download one for config) has passed since its
 *    start. At most 4096
 *    operations may be in flight per handle: one more is
 *    APPNORTH_E_WRONG_STATE. In all, non-blocking calls add at most 9
 *    library threads to the process (the transfer thread and the
 *    workers), however many are in flight; they
 *    end, joined by the freeing thread, when the last handle that started
 *    a non-blocking call is freed (a later call starts them again).
 *  - Cancel. appnorth_op_cancel() ends one operation (on_done gets
 *    APPNORTH_E_CANCELLED); the others go on. appnorth_client_cancel() also
 *    ends the client's operations in flight.
 *  - Free. appnorth_X_free() of a handle an operation uses (its client,
 *    and the queue, config or events handle) cancels the handle's
 *    operations in flight and waits until each one's on_done has run (with
 *    APPNORTH_E_CANCELLED, or its real outcome if it was already finishing)
 *    before it returns; nothing of them runs afterwards. A start racing
 *    that free on another thread either returns APPNORTH_E_WRONG_STATE
 *    ("being freed"; on_done is never called) or starts and is one of
 *    those operations. In dispatch mode
 *    appnorth_client_free() runs the queued completions itself, on the
 *    thread calling it. Called from inside
 *    a library callback (on_done, a logger, a listener), it does not wait:
 *    their on_done calls follow, on a library thread, after it returned
 *    (the library keeps what they need alive).
 * --------------------------------------------------------------------- */

/**
 * The completion of one operation started by an _async function.
 * op: its id (as written to *out_op). status: APPNORTH_OK or the error.
 * err: never NULL; borrowed for the duration of the call (err->code ==
 * status, err->http_status and err->message as the blocking call's).
 * result_json: borrowed, valid only until the callback returns (copy it to
 * keep it); the blocking call's result on success (what it would have
 * returned in *out_json), NULL on failure unless the function says
 * otherwise. user_data: the start call's.
 * It runs inside appnorth_dispatch() on the dispatching thread in dispatch
 * mode, on a library thread otherwise (see "Non-blocking operations"
 * above for which one), possibly before the start call returns.
 */
typedef void (*appnorth_completion_fn)(uint64_t op, int32_t status, const appnorth_error *err,
                                       const char *result_json, void *user_data);

/**
 * Cancel one operation in flight: its transfer or wait ends at once and its
 * on_done is called with APPNORTH_E_CANCELLED (or with its real outcome if
 * it was already completing). Other operations, on the same client too, go
 * on. A cancelled queue submit is queued, as after a network failure (its
 * result is {"submitted":false}); a cancelled queue flush keeps the entry
 * in flight and the rest. op: an id from *out_op.
 * Returns APPNORTH_OK when the operation was in flight, APPNORTH_E_NOT_FOUND
 * when none with that id is (its on_done has begun or run, or it never
 * existed: harmless).
 * Thread-safe, from any thread (on_done included); never blocks. Not
 * async-signal-safe.
 */
APPNORTH_API int32_t appnorth_op_cancel(uint64_t op, appnorth_error *err);

/** appnorth_client_list_boards() without blocking; the result as its *out_json.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_list_boards_async(appnorth_client *client, appnorth_completion_fn on_done,
                                                       void *user_data, uint64_t *out_op, appnorth_error *err);

/** appnorth_client_list_ideas() without blocking. query_json: NULL for no
 *  filters, else checked before the start returns (nothing starts if it is
 *  refused).
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_list_ideas_async(appnorth_client *client, const char *query_json,
                                                      appnorth_completion_fn on_done, void *user_data,
                                                      uint64_t *out_op, appnorth_error *err);

/** appnorth_client_list_comments() without blocking. idea_id: required.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_list_comments_async(appnorth_client *client, const char *idea_id,
                                                         appnorth_completion_fn on_done, void *user_data,
                                                         uint64_t *out_op, appnorth_error *err);

/** appnorth_client_list_chat_messages() without blocking.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_list_chat_messages_async(appnorth_client *client,
                                                              appnorth_completion_fn on_done, void *user_data,
                                                              uint64_t *out_op, appnorth_error *err);

/** appnorth_client_submit_idea() without blocking; content and key are
 *  checked before the start returns. Result: the server's answer.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_submit_idea_async(appnorth_client *client, const char *board_id,
                                                       const char *title, const char *body,
                                                       const char *idempotency_key, appnorth_completion_fn on_done,
                                                       void *user_data, uint64_t *out_op, appnorth_error *err);

/** appnorth_client_submit_comment() without blocking.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_submit_comment_async(appnorth_client *client, const char *idea_id,
                                                          const char *body, const char *idempotency_key,
                                                          appnorth_completion_fn on_done, void *user_data,
                                                          uint64_t *out_op, appnorth_error *err);

/** appnorth_client_submit_feedback() without blocking. The feedback is
 *  copied before the start returns: free it whenever you like.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_submit_feedback_async(appnorth_client *client,
                                                           const appnorth_feedback *feedback,
                                                           const char *idempotency_key,
                                                           appnorth_completion_fn on_done, void *user_data,
                                                           uint64_t *out_op, appnorth_error *err);

/** appnorth_client_vote() without blocking.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_vote_async(appnorth_client *client, const char *idea_id,
                                                const char *idempotency_key, appnorth_completion_fn on_done,
                                                void *user_data, uint64_t *out_op, appnorth_error *err);

/** appnorth_client_send_chat_message() without blocking.
 * Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_client_send_chat_message_async(appnorth_client *client, const char *body,
                                                             const char *idempotency_key,
                                                             appnorth_completion_fn on_done, void *user_data,
                                                             uint64_t *out_op, appnorth_error *err);

/* ------------------------------------------------------------------------
 * Feedback builder
 * --------------------------------------------------------------------- */

/** A new, empty feedback object. Returns NULL only if memory is exhausted.
 *  Not thread-safe: build it on one thread. Free with
 *  appnorth_feedback_free(). */
APPNORTH_API appnorth_feedback *appnorth_feedback_new(void);

/** Release a feedback object. NULL is a no-op. */
APPNORTH_API void appnorth_feedback_free(appnorth_feedback *feedback);

/** Set the report text (required, 1 to APPNORTH_MAX_FEEDBACK_TEXT_CHARS
 *  characters). A longer text is APPNORTH_E_TOO_LARGE and leaves the
 *  previous text in place; an empty one is refused when submitted. */
APPNORTH_API int32_t appnorth_feedback_set_text(appnorth_feedback *feedback, const char *text,
                                                appnorth_error *err);

/** Set diagnostics: a JSON object of at most APPNORTH_MAX_DIAGNOSTICS_BYTES
 *  bytes, sent exactly as given (the text is validated, not reformatted;
 *  the escape \u0000 is allowed). diagnostics_json: NULL clears them. A larger text is
 *  APPNORTH_E_TOO_LARGE, invalid JSON APPNORTH_E_INVALID_JSON; either
 *  leaves the previous diagnostics in place. */
APPNORTH_API int32_t appnorth_feedback_set_diagnostics(appnorth_feedback *feedback,
                                                       const char *diagnostics_json,
                                                       appnorth_error *err);

/** Attach a screenshot: `length` bytes (1 to APPNORTH_MAX_SCREENSHOT_BYTES)
 *  copied from `bytes`, with content type "image/png" or "image/jpeg". At
 *  most APPNORTH_MAX_SCREENSHOTS. A larger length (SIZE_MAX included) or a
 *  sixth screenshot is APPNORTH_E_TOO_LARGE, 0 APPNORTH_E_INVALID_ARGUMENT;
 *  nothing is read from `bytes` then. */
APPNORTH_API int32_t appnorth_feedback_add_screenshot(appnorth_feedback *feedback, const void *bytes,
                                                      size_t length, const char *content_type,
                                                      appnorth_error *err);

/* ------------------------------------------------------------------------
 * Storage for the offline queue and the read cache
 *
 * Both keep their whole state as one versioned blob in a storage. Give the
 * queue and the cache separate storages: their formats differ, and a
 * storage already used by one is refused by the other
 * (APPNORTH_E_WRONG_STATE). Queue contents can include report text,
 * diagnostics, screenshots and an identity scope, never a credential token.
 * --------------------------------------------------------------------- */

typedef struct appnorth_storage appnorth_storage;

/** A byte buffer the library owns, filled by a host load callback. */
typedef struct appnorth_buffer appnorth_buffer;

/** The largest blob a load callback may hand over: 1 GiB. */
#define APPNORTH_MAX_BUFFER_BYTES 1073741824

/** Copy `length` bytes into a buffer the library passed to a load
 *  callback. Only valid inside that callback. length: 0 (an empty blob) to
 *  APPNORTH_MAX_BUFFER_BYTES; more, including a (size_t)-1 from a failed
 *  read(), gives APPNORTH_E_TOO_LARGE and copies nothing. `bytes` must hold
 *  `length` readable bytes (may be NULL when length is 0). */
APPNORTH_API int32_t appnorth_buffer_set(appnorth_buffer *buffer, const void *bytes, size_t length,
                                         appnorth_error *err);

/**
 * Host storage callbacks.
 * load: put the stored blob into `out` with appnorth_buffer_set(), or leave
 *   it untouched when nothing is stored. Return 0 on success, non-zero on
 *   failure (reported as APPNORTH_E_STORAGE).
 * save: store `length` bytes, replacing what was stored; `bytes` NULL means
 *   erase. Return 0 on success.
 * release: optional; called once with user_data when the storage is freed.
 * THREAD, both modes: the thread that called the queue or cache function
 * (never a library thread, never deferred to appnorth_dispatch()), never
 * while the library holds a data lock. release: the thread that frees the
 * last handle using the storage. They must not change the queue or
 * cache that is using them: submit, flush, discard, store and clear called
 * from inside fail with APPNORTH_E_WRONG_STATE instead of deadlocking
 * (reads such as appnorth_queue_pending_count() are allowed).
 */
typedef int32_t (*appnorth_storage_load_fn)(void *user_data, appnorth_buffer *out);
typedef int32_t (*appnorth_storage_save_fn)(void *user_data, const void *bytes, size_t length);
typedef void (*appnorth_release_fn)(void *user_data);

/**
 * Storage in the SQLite database of a data directory (created 0700 if
 * needed; the database file is 0600). `name` (1 to 64 characters of
 * A-Z a-z 0-9 . _ -) separates several storages in one folder, for
 * instance "queue" and "cache". Thread-safe.
 * A data directory must be a real directory (not a symbolic link) that
 * belongs to the process's effective uid and that no other user can write
 * to; anything else makes the call that opens it return APPNORTH_E_STORAGE
 * with a message starting "unsafe data directory" (one of ours that others
 * can only read is made 0700). A file in it that is a link or belongs to
 * another user is never followed or adopted (docs/security.md).
 */
APPNORTH_API int32_t appnorth_storage_new_sqlite(const char *data_dir, const char *name,
                                                 appnorth_storage **out_storage, appnorth_error *err);

/** Storage in memory only: lost when freed. Thread-safe. */
APPNORTH_API int32_t appnorth_storage_new_memory(appnorth_storage **out_storage, appnorth_error *err);

/** Storage through host callbacks. load and save: required; release:
 *  optional. The storage keeps load, save, release and user_data valid
 *  until its release runs (or, without one, until the last queue or cache
 *  using the storage is freed, see appnorth_storage_free()): keep them
 *  alive that long. */
APPNORTH_API int32_t appnorth_storage_new_callbacks(appnorth_storage_load_fn load,
                                                   appnorth_storage_save_fn save,
                                                   appnorth_release_fn release, void *user_data,
                                                   appnorth_storage **out_storage,
                                                   appnorth_error *err);

/**
 * Route the log lines of the queue or cache opened on this storage
 * afterwards to `fn`, for levels >= `min_level` (APPNORTH_LOG_DEBUG to
 * APPNORTH_LOG_ERROR, checked when `fn` is not NULL). They have no client
 * logger of their own; what they log is stored state found damaged and
 * dropped: a warning naming how many entries (and their ids or kinds,
 * never their content), once per finding. NULL `fn` turns it off (the
 * default). A queue or cache already open keeps the logger it was opened
 * with. `fn` runs on the thread that called the queue or cache, never
 * while the library holds a lock; keep `fn` and `user_data` valid until
 * the queues and caches opened on the storage are freed. Thread-safe.
 */
APPNORTH_API int32_t appnorth_storage_set_logger(appnorth_storage *storage, appnorth_log_fn fn,
                                                 int32_t min_level, void *user_data, appnorth_error *err);

/** Free a storage. The queue or cache using it keeps its own reference, so
 *  this may be called right after creating them; a callback storage's
 *  release function runs when the last of them lets go. NULL is a no-op. */
APPNORTH_API void appnorth_storage_free(appnorth_storage *storage);

/**
 * Erase what the storage holds (for logout). Queues on SQLite storage read
 * the stored entries, so they see it empty at once. A queue or cache on
 * memory or host storage, and a cache on any storage, keeps the entries it
 * loaded in memory (a memory or host storage's queue or cache may also
 * write them back): discard them with appnorth_queue_discard() or
 * appnorth_cache_clear(), or free those handles first.
 */
APPNORTH_API int32_t appnorth_storage_erase(appnorth_storage *storage, appnorth_error *err);

/* ------------------------------------------------------------------------
 * Offline write queue
 *
 * Retain one queue for the account session. The submit calls try the
 * request at once: *out_submitted is 1 when the server accepted it, 0 when
 * a network failure (APPNORTH_E_NETWORK, no HTTP answer) made the library
 * store it for a later appnorth_queue_flush(); the call then returns
 * APPNORTH_OK. Every other failure (validation, authentication, not found,
 * HTTP server errors, ...) is returned and nothing is stored. Votes and
 * chat messages are not queue operations.
 *
 * Each entry records its scope (API URL, App ID, lowercased credential
 * email or "anonymous") and its idempotency key; a flush replays only the
 * entries of the flushing client's scope, with their original keys, so an
 * old account's write is never sent as a new user. Entries survive a
 * restart when the storage is persistent. The queue does not watch
 * connectivity: call flush after reconnecting or returning to the
 * foreground.
 *
 * Thread-safe. Calls on one queue are serialised; a flush blocks other
 * calls on that queue only while it updates storage, not while it waits
 * for the network.
 *
 * Several queues on one stored queue. On SQLite storage
 * (appnorth_storage_new_sqlite) several queue handles, in one process or
 * in several processes (a worker pool), may use the same data directory
 * and name at once: every change is a read-modify-write of the stored
 * queue in one SQLite write transaction, and counts and listings read the
 * stored queue, so no acknowledged write is lost to another writer. Two
 * queues flushing the same scope at once may both send an entry; its
 * idempotency key makes the server apply it once. Memory storage and
 * host callback storage have one owner: one queue per storage, refused
 * for a second queue or cache in this process (APPNORTH_E_WRONG_STATE),
 * and host callbacks must not be shared by two processes.
 *
 * Poison entries. An entry the server refuses for good (a comment on an
 * idea deleted since) stays pending and stops every flush of its scope
 * with its error, as the rule above says. appnorth_queue_flush_v2() names
 * that entry, appnorth_queue_entries() shows each entry's attempts and
 * last error, and appnorth_queue_discard_entry() removes it alone, so the
 * valid writes behind it go out on the next flush.
 * --------------------------------------------------------------------- */

typedef struct appnorth_queue appnorth_queue;

/** The default entry limit. */
#define APPNORTH_QUEUE_DEFAULT_LIMIT 50

/**
 * Open a queue on a storage and load its entries. max_entries: 0 for the
 * default (50), else 1 to 10000. The queue keeps a reference to the
 * storage. Returns APPNORTH_E_STORAGE if the stored blob cannot be read
 * (nothing is overwritten), APPNORTH_E_WRONG_STATE if the storage is used
 * by a cache. In a blob it can read, a damaged entry (a missing field, a
 * body that is not a JSON object, a path outside the API) is dropped, as it
 * could never be sent; a damaged creation time is clamped.
 */
APPNORTH_API int32_t appnorth_queue_new(appnorth_storage *storage, int32_t max_entries,
                                        appnorth_queue **out_queue, appnorth_error *err);

/** Free a queue. Its stored entries stay in the storage. NULL is a no-op. */
APPNORTH_API void appnorth_queue_free(appnorth_queue *queue);

/** Submit an idea, or queue it on a network failure. Arguments as for
 *  appnorth_client_submit_idea() (body: may be NULL). A full queue returns
 *  APPNORTH_E_QUEUE_FULL (only when the write had to be queued). Blocks
 *  for at most the API request timeout. */
APPNORTH_API int32_t appnorth_queue_submit_idea(appnorth_queue *queue, appnorth_client *client,
                                                const char *board_id, const char *title,
                                                const char *body, const char *idempotency_key,
                                                int32_t *out_submitted, appnorth_error *err);

/** Submit a comment, or queue it on a network failure. Blocks for at most
 *  the API request timeout. */
APPNORTH_API int32_t appnorth_queue_submit_comment(appnorth_queue *queue, appnorth_client *client,
                                                   const char *idea_id, const char *body,
                                                   const char *idempotency_key,
                                                   int32_t *out_submitted, appnorth_error *err);

/** Submit feedback, or queue it on a network failure. The feedback is
 *  copied. Blocks for at most the API request timeout. */
APPNORTH_API int32_t appnorth_queue_submit_feedback(appnorth_queue *queue, appnorth_client *client,
                                                    const appnorth_feedback *feedback,
                                                    const char *idempotency_key,
                                                    int32_t *out_submitted, appnorth_error *err);

/**
 * Replay this client's scope's entries in order, with their original keys.
 * A network failure stops the flush and keeps the rest (returns
 * APPNORTH_OK); any other error stops it, is returned, and leaves the
 * failing entry pending. out_sent (optional): how many were sent, also
 * when an error is returned. A
 * completed flush does not prove the queue is empty: see
 * appnorth_queue_pending_count(). Blocks for up to one request timeout per
 * entry.
 */
APPNORTH_API int32_t appnorth_queue_flush(appnorth_queue *queue, appnorth_client *client,
                                          int32_t *out_sent, appnorth_error *err);

/**
 * appnorth_queue_flush(), also naming the entry that stopped the flush.
 * out_sent (optional) and the blocking are as for appnorth_queue_flush():
 * blocks for up to one request timeout per entry.
 * out_failed_entry_id (optional): set to the id of the entry whose error
 * is returned (freed with appnorth_string_free()), or NULL when the call
 * returns APPNORTH_OK (flushed, or stopped by a network failure) or fails
 * before trying an entry. That entry stays pending; inspect it with
 * appnorth_queue_entries() and discard it with
 * appnorth_queue_discard_entry() if it can never succeed.
 */
APPNORTH_API int32_t appnorth_queue_flush_v2(appnorth_queue *queue, appnorth_client *client,
                                             int32_t *out_sent, char **out_failed_entry_id,
                                             appnorth_error *err);

/**
 * Non-blocking queue submits (see "Non-blocking operations"): the blocking
 * call's checks before the start returns, then the send, and the queueing
 * on a network failure or a cancel, on a library worker thread. Result:
 * {"submitted":true} when sent now, {"submitted":false} when queued. A
 * full queue completes with APPNORTH_E_QUEUE_FULL. The feedback is copied
 * before the start returns. A queue on callback storage
 * (appnorth_storage_new_callbacks) refuses these and
 * appnorth_queue_flush_async() with APPNORTH_E_WRONG_STATE: its callbacks
 * run only on threads that call into the library.
 * Returns at once; on_done and user_data are kept until on_done has run.
 */
APPNORTH_API int32_t appnorth_queue_submit_idea_async(appnorth_queue *queue, appnorth_client *client,
                                                      const char *board_id, const char *title, const char *body,
                                                      const char *idempotency_key, appnorth_completion_fn on_done,
                                                      void *user_data, uint64_t *out_op, appnorth_error *err);
/** Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_queue_submit_comment_async(appnorth_queue *queue, appnorth_client *client,
                                                         const char *idea_id, const char *body,
                                                         const char *idempotency_key, appnorth_completion_fn on_done,
                                                         void *user_data, uint64_t *out_op, appnorth_error *err);
/** Returns at once; on_done and user_data are kept until on_done has run. */
APPNORTH_API int32_t appnorth_queue_submit_feedback_async(appnorth_queue *queue, appnorth_client *client,
                                                          const appnorth_feedback *feedback,
                                                          const char *idempotency_key, appnorth_completion_fn on_done,
                                                          void *user_data, uint64_t *out_op, appnorth_error *err);

/**
 * appnorth_queue_flush_v2() without blocking, on a library worker thread.
 * Result, on success and on failure alike:
 * {"sent":N,"failed_entry_id":"..." or null}. A cancel stops the flush
 * with APPNORTH_E_CANCELLED; the entry in flight stays queued.
 * Returns at once; on_done and user_data are kept until on_done has run.
 */
APPNORTH_API int32_t appnorth_queue_flush_async(appnorth_queue *queue, appnorth_client *client,
                                                appnorth_completion_fn on_done, void *user_data,
                                                uint64_t *out_op, appnorth_error *err);

/** How many entries are pending, over all scopes. */
APPNORTH_API int32_t appnorth_queue_pending_count(appnorth_queue *queue, int32_t *out_count,
                                                  appnorth_error *err);

/** The pending entries as a JSON array, oldest first, over all scopes:
 *  [{"id","scope","kind","idempotency_key","created_ms","attempts",
 *  "last_error"}] (no payloads). attempts: how many sends were tried and
 *  failed, the one at submit included; last_error: the last failure's
 *  message, or null. *out_json: freed with appnorth_string_free(). */
APPNORTH_API int32_t appnorth_queue_entries(appnorth_queue *queue, char **out_json,
                                            appnorth_error *err);

/** Discard entries, for logout: those of `scope` (a value from
 *  appnorth_client_scope()), or every entry when scope is NULL. Storage is
 *  updated. out_discarded (optional): how many. */
APPNORTH_API int32_t appnorth_queue_discard(appnorth_queue *queue, const char *scope,
                                            int32_t *out_discarded, appnorth_error *err);

/** Discard one entry by its id (from appnorth_queue_entries() or
 *  appnorth_queue_flush_v2()); storage is updated. entry_id: required.
 *  out_discarded (optional): 1, or 0 when no pending entry has that id
 *  (already sent or discarded, perhaps by another process): still
 *  APPNORTH_OK. */
APPNORTH_API int32_t appnorth_queue_discard_entry(appnorth_queue *queue, const char *entry_id,
                                                  int32_t *out_discarded, appnorth_error *err);

/* ------------------------------------------------------------------------
 * Clocks
 * --------------------------------------------------------------------- */

/** A clock that moves only when told to: for tests and for hosts that
 *  drive time themselves. Thread-safe. */
typedef struct appnorth_clock appnorth_clock;

/** A manual clock starting at `wall_ms` milliseconds since the epoch (any
 *  value). Stored rows stamped outside 0 to 253402300799999 (the year
 *  9999) read back as damaged and are dropped. */
APPNORTH_API int32_t appnorth_clock_new_manual(int64_t wall_ms, appnorth_clock **out_clock,
                                               appnorth_error *err);

/** Free a clock. Handles using it keep their own reference. NULL is a
 *  no-op. */
APPNORTH_API void appnorth_clock_free(appnorth_clock *clock);

/** Move the clock forward by `ms` (0 to INT64_MAX; negative:
 *  APPNORTH_E_INVALID_ARGUMENT): both monotonic and wall time. Each stops
 *  at its largest value instead of wrapping; entries then read as expired. */
APPNORTH_API int32_t appnorth_clock_advance(appnorth_clock *clock, int64_t ms, appnorth_error *err);

/** Set the wall time only (any value), as a user changing the system clock
 *  would. Monotonic time, which TTLs use within a process, does not move. */
APPNORTH_API int32_t appnorth_clock_set_wall(appnorth_clock *clock, int64_t wall_ms,
                                             appnorth_error *err);

/* ------------------------------------------------------------------------
 * Read cache
 *
 * Caches board arrays and idea arrays (never pagination cursors, chat
 * messages or private report threads) for a TTL, 300 s by default. An
 * expired entry reads as absent: there is no stale fallback. Keys are the
 * client's scope (server, app, account) plus every idea filter and the
 * search query. Thread-safe.
 * --------------------------------------------------------------------- */

typedef struct appnorth_cache appnorth_cache;

#define APPNORTH_CACHE_DEFAULT_TTL_SECONDS 300

/**
 * Open a cache on a storage (see above). ttl_seconds: 0 for the default
 * (300), else 1 to 31536000. clock: NULL for the system clock. Age is
 * measured on the monotonic clock within a process and on the wall clock
 * across restarts; an entry whose wall time lies in the future counts as
 * expired.
 */
APPNORTH_API int32_t appnorth_cache_new(appnorth_storage *storage, int32_t ttl_seconds,
                                        appnorth_clock *clock, appnorth_cache **out_cache,
                                        appnorth_error *err);

/** Free a cache. Its stored entries stay in the storage. NULL is a no-op. */
APPNORTH_API void appnorth_cache_free(appnorth_cache *cache);

/** Store boards for a scope. boards_json: the array, or the list response
 *  object {"boards":[...]}. */
APPNORTH_API int32_t appnorth_cache_store_boards(appnorth_cache *cache, const char *scope,
                                                 const char *boards_json, appnorth_error *err);

/** Store ideas for a scope and query (query_json: NULL for none, as for
 *  appnorth_client_list_ideas();
 *  a query with a cursor is refused: only first pages are cached).
 *  ideas_json: the array, or the list response object. */
APPNORTH_API int32_t appnorth_cache_store_ideas(appnorth_cache *cache, const char *scope,
                                                const char *query_json, const char *ideas_json,
                                                appnorth_error *err);

/** The fresh boards array for a scope in *out_json, or NULL when absent or
 *  expired (still APPNORTH_OK). */
APPNORTH_API int32_t appnorth_cache_boards(appnorth_cache *cache, const char *scope, char **out_json,
                                           appnorth_error *err);

/** The fresh ideas array for a scope and query (query_json: NULL for
 *  none), or NULL. */
APPNORTH_API int32_t appnorth_cache_ideas(appnorth_cache *cache, const char *scope,
                                          const char *query_json, char **out_json,
                                          appnorth_error *err);

/** Remove a scope's boards and ideas. */
APPNORTH_API int32_t appnorth_cache_clear(appnorth_cache *cache, const char *scope,
                                          appnorth_error *err);

/* ------------------------------------------------------------------------
 * Cached-then-fresh reads (the counterpart of the seed's AppNorthView)
 * --------------------------------------------------------------------- */

/** Where a cached-then-fresh read's data came from: APPNORTH_SOURCE_*. */
typedef int32_t appnorth_read_source;

enum {
    /** The data came from the cache (fresh within its TTL). */
    APPNORTH_SOURCE_CACHE = 1,
    /** The data came from the network and is now cached. */
    APPNORTH_SOURCE_NETWORK = 2,
    APPNORTH_SOURCE_INT32_MIN_ = INT32_MIN
};

/** Receives a JSON array of boards or ideas. `json` is valid only during
 *  the call. THREAD, both modes: the thread that called appnorth_read_*,
 *  before that call returns (never a library thread, never deferred to
 *  appnorth_dispatch()). */
typedef void (*appnorth_read_fn)(int32_t source, const char *json, void *user_data);

/**
 * Deliver fresh cached boards at once (source APPNORTH_SOURCE_CACHE, only
 * if the cache holds a fresh entry), then load them from the network, store
 * them, and deliver them again (APPNORTH_SOURCE_NETWORK). Both deliveries
 * happen before the call returns, on the calling thread; run it on a worker
 * thread to keep a UI responsive: it blocks for at most the API request
 * timeout. If the network load fails, the call
 * returns its error; cached data, when there was some, has already been
 * delivered.
 */
APPNORTH_API int32_t appnorth_read_boards(appnorth_cache *cache, appnorth_client *client,
                                          appnorth_read_fn fn, void *user_data,
                                          appnorth_error *err);

/** The same for ideas and a query (query_json: NULL for none; no cursor).
 *  fn runs before the call returns, on the calling thread, and is not kept
 *  after it. Blocks for at most the API request timeout. */
APPNORTH_API int32_t appnorth_read_ideas(appnorth_cache *cache, appnorth_client *client,
                                         const char *query_json, appnorth_read_fn fn,
                                         void *user_data, appnorth_error *err);

/* ------------------------------------------------------------------------
 * Analytics events
 *
 * appnorth_events_track() appends the event to this process's journal file
 * in the data directory (one write() of a checksummed record) before it
 * returns: it survives the host being killed right after, as a SQLite
 * commit in WAL mode with synchronous=NORMAL does (not necessarily a power
 * cut: docs/events.md, "Durability"). The library thread moves journaled
 * events into the data directory's SQLite database; journals that a killed
 * process left are imported by the next handle opened on the directory.
 * One library thread, started by appnorth_events_new() and stopped
 * by appnorth_events_close()/appnorth_events_free(), uploads the queue:
 * every 30 s, as soon as 20 events wait, or when appnorth_events_flush()
 * asks; batches hold 100 events on Wi-Fi, 50 on cellular, 20 on expensive
 * cellular or an unknown network. Only that thread uploads, so two flushes
 * never send the same event at once.
 *
 * Responses: 2xx removes the batch; 408, 429 (honouring Retry-After, in
 * seconds or as an HTTP date, capped), 5xx and network errors keep it and
 * retry 3 times after 1 s, 2 s and 4 s (with jitter), then wait for the
 * next cycle; 413 splits the batch in halves and drops a single event that
 * is still too large; any other 4xx discards the batch, except that a 400
 * or 422 listing rejected event ids drops only those (counted as
 * client_error) and sends the rest at once (docs/protocol.md). Every failed
 * flush counts once toward the circuit breaker (a batch's first attempt and
 * its retries, or a discarded batch); 5 in a row pause uploads until
 * appnorth_events_start_session() or appnorth_events_foreground(). One
 * delivered batch resets the count.
 *
 * At most 10,000 events and 5 MB are kept; past either, the oldest are
 * dropped and counted. The 5 MB are the files' (database, WAL, journals:
 * within 5 MiB and 5 %), so the events themselves get about 4.5 MiB of
 * SQLite pages (docs/events.md, "Disk usage"). Each event carries a UUIDv7 id (the server
 * deduplicates on it), a timestamp, the anonymous id, the user id if set,
 * and the session id. Properties are sent exactly as the host wrote them.
 *
 * Consent: before any choice, events are queued (unless the
 * require_consent option is set: then nothing is stored until consent is
 * granted). Revoking drops new events silently and purges the queue.
 * The choice is persisted.
 *
 * Identity values (anonymous id, user id, push token) live in a secure
 * store: by default `identity.json` (0600) in the data directory (0700), or
 * the host's callbacks. They never appear in logs or error messages.
 *
 * Thread-safe. Log lines go to the logger of the client given in the
 * options, from any thread.
 * --------------------------------------------------------------------- */

/** Options for appnorth_events_new(). Not thread-safe: build it on one
 *  thread, then hand it to appnorth_events_new(), which copies it. */
typedef struct appnorth_events_options appnorth_events_options;

/** An analytics event queue and its upload thread. */
typedef struct appnorth_events appnorth_events;

/** A network type, for batch sizing: APPNORTH_NETWORK_*. */
typedef int32_t appnorth_network_type;

enum {
    APPNORTH_NETWORK_UNKNOWN = 0,
    APPNORTH_NETWORK_WIFI = 1,
    APPNORTH_NETWORK_CELLULAR = 2,
    APPNORTH_NETWORK_EXPENSIVE_CELLULAR = 3,
    APPNORTH_NETWORK_INT32_MIN_ = INT32_MIN
};

/** A consent state: APPNORTH_CONSENT_*. */
typedef int32_t appnorth_consent;

enum {
    APPNORTH_CONSENT_UNKNOWN = -1,
    APPNORTH_CONSENT_REVOKED = 0,
    APPNORTH_CONSENT_GRANTED = 1,
    APPNORTH_CONSENT_INT32_MIN_ = INT32_MIN
};

/**
 * Host secure storage for identity values. `key` is one of "anonymous_id",
 * "user_id", "push_token".
 * get: put the value's UTF-8 bytes into `out` with appnorth_buffer_set(), or
 *   leave it untouched when there is none; return 0, non-zero on failure.
 * set: store `value` (NUL-terminated UTF-8), or delete the key when value
 *   is NULL; return 0, non-zero on failure.
 * THREAD, both modes: the thread that called the events function
 * (appnorth_events_new(), _identify(), _reset(), _set_push_token(),
 * _push_token()); never a library thread (the upload thread reads the
 * values cached in memory) and never deferred to appnorth_dispatch().
 */
typedef int32_t (*appnorth_secure_get_fn)(void *user_data, const char *key, appnorth_buffer *out);
typedef int32_t (*appnorth_secure_set_fn)(void *user_data, const char *key, const char *value);

/* What a before_send hook returns (see appnorth_before_send_fn): keep the
 * event as it is, drop it, or store the replacement it gave. Plain macros,
 * not an enum: the 0.3 ABI's types stay exactly as they were. */
#define APPNORTH_BEFORE_SEND_KEEP 0
#define APPNORTH_BEFORE_SEND_DROP 1
#define APPNORTH_BEFORE_SEND_REPLACE 2

/**
 * A filter hook (appnorth_events_options_set_before_send()). event_json: the
 * whole event as it would be stored and sent ({"id","name","timestamp",
 * "anonymous_id","user_id","session_id","properties"}, the super properties
 * merged in), NUL-terminated UTF-8, valid during the call only.
 * Return APPNORTH_BEFORE_SEND_KEEP to store it as it is,
 * APPNORTH_BEFORE_SEND_DROP to drop it, or APPNORTH_BEFORE_SEND_REPLACE after
 * putting a whole event's JSON object in `replacement` with
 * appnorth_buffer_set() (the library copies the bytes; the host keeps its
 * own). It fails closed: any other value (a failure; the text put in
 * `replacement`, if any, is logged as the reason), and a replacement that is
 * not a valid event (not a JSON object, over max_event_bytes, nested more
 * than 33 deep, without a string "name", with "id" changed, a "timestamp"
 * out of range, or "properties" not an object), drop the event. Every event
 * the hook drops or fails on is counted in the stats' dropped.filtered;
 * failures are logged once per burst (until an event passes again).
 * THREAD, both modes: the thread that called appnorth_events_track(), inside
 * that call, after consent was checked and before anything is written
 * (never a library thread, never deferred to appnorth_dispatch()); no
 * library lock is held, so it may call the library.
 */
typedef int32_t (*appnorth_before_send_fn)(void *user_data, const char *event_json, appnorth_buffer *replacement);

/** Options with the seed's defaults. Not thread-safe. Free with
 *  appnorth_events_options_free(). */
APPNORTH_API appnorth_events_options *appnorth_events_options_new(void);

/** Release events options. NULL is a no-op. */
APPNORTH_API void appnorth_events_options_free(appnorth_events_options *options);

/** Required: the client whose API URL, App ID, credential and logger
 *  uploads use. The events handle keeps its own reference. */
APPNORTH_API int32_t appnorth_events_options_set_client(appnorth_events_options *options,
                                                        appnorth_client *client,
                                                        appnorth_error *err);

/** Required: the data directory (created 0700 if needed), checked by
 *  appnorth_events_new() as appnorth_storage_new_sqlite() says. */
APPNORTH_API int32_t appnorth_events_options_set_data_dir(appnorth_events_options *options,
                                                          const char *data_dir, appnorth_error *err);

/** flush_interval_ms: automatic flush period (default 30000; 10 to
 *  86400000). batch_threshold: queued events that start a flush at once
 *  (default 20; 1 to 10000). */
APPNORTH_API int32_t appnorth_events_options_set_flush_policy(appnorth_events_options *options,
                                                              int32_t flush_interval_ms,
                                                              int32_t batch_threshold,
                                                              appnorth_error *err);

/** Queue limits: max_events (default 10000; 1 to 10000000), max_bytes
 *  (default 5242880; 1024 to 1073741824): the bytes of the queue's files,
 *  of which the events get nine tenths, each counted at the database pages
 *  it takes (about 12.3 KB for a 10 KB event; stats' "queued_bytes"), the
 *  rest being the WAL's and a draining journal's; max_event_bytes, the
 *  largest single event accepted by track (default 65536; 256 to 16777216). */
APPNORTH_API int32_t appnorth_events_options_set_limits(appnorth_events_options *options,
                                                        int32_t max_events, int64_t max_bytes,
                                                        int32_t max_event_bytes, appnorth_error *err);

/** Retry policy: base_delay_ms (default 1000: retries after 1, 2 and 4 s;
 *  1 to 600000), retries (default 3; 0 to 10), retry_after_cap_ms, the
 *  longest wait a server's Retry-After may impose (default 120000; 0 to
 *  INT32_MAX: any larger or malformed header waits this long at most),
 *  breaker_threshold (default 5; 1 to 100). Tests shorten the delays with
 *  it. */
APPNORTH_API int32_t appnorth_events_options_set_retry(appnorth_events_options *options,
                                                       int32_t base_delay_ms, int32_t retries,
                                                       int32_t retry_after_cap_ms,
                                                       int32_t breaker_threshold, appnorth_error *err);

/**
 * How much random jitter the upload retry delays get: each retry waits its
 * nominal delay (1 s, 2 s, 4 s by default, see
 * appnorth_events_options_set_retry()) plus or minus up to `percent` % of
 * it. Default 20. 0 to 100; anything else: APPNORTH_E_INVALID_ARGUMENT.
 * Jitter keeps a fleet of installs that failed together (a server outage)
 * from retrying in step and hitting the recovering server at the same
 * moment (docs/outages-and-fleets.md measures it on 500 installs). A fleet
 * operator may widen it; 0 makes every retry wait exactly its nominal
 * delay, which only tests and benchmarks want. Not thread-safe, like every
 * options setter.
 */
APPNORTH_API int32_t appnorth_events_options_set_retry_jitter(appnorth_events_options *options,
                                                              int32_t percent, appnorth_error *err);

/** 1: store nothing until consent is granted. 0 (default): queue events
 *  until consent is revoked. Any other value: APPNORTH_E_INVALID_ARGUMENT. */
APPNORTH_API int32_t appnorth_events_options_set_require_consent(appnorth_events_options *options,
                                                                 int32_t require, appnorth_error *err);

/**
 * The share of installs that track events, from 0.0 (none) to 1.0 (all,
 * the default). The decision is per install, not per event: the
 * anonymous id (kept in the secure store, unchanged by reset) places the
 * install at a fixed point in [0, 1), and it tracks every event while
 * that point is below the rate, none otherwise. So a user's sessions and
 * funnels stay whole, and across a fleet the share of installs tracking
 * is the rate. A sampled-out install's track() returns APPNORTH_OK with
 * *out_queued 0 and counts the event in stats' dropped.sampled, before
 * anything else is done for it. The config key "appnorth.events"
 * (appnorth_events_options_set_remote_settings()) may override it.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NaN or a value outside 0 to 1.
 * Not thread-safe, like every options setter.
 */
APPNORTH_API int32_t appnorth_events_options_set_sample_rate(appnorth_events_options *options,
                                                             double sample_rate, appnorth_error *err);

/**
 * Whether the events handle follows the reserved config key
 * "appnorth.events" of the configs made with its client (1, the default)
 * or only its options (0: the host opts out). Any other value:
 * APPNORTH_E_INVALID_ARGUMENT.
 *
 * The key holds an object, every field optional:
 *   {"enabled": true|false, "sample_rate": 0..1,
 *    "blocked_events": ["name", ...], "flush_interval_ms": 10..86400000,
 *    "batch_threshold": 1..10000}
 * A field that is present overrides the option of the same name; one that
 * is absent (or the whole key) leaves the option in force. The handle
 * applies the key of whichever tier the config holds (bundled, cached or
 * remote) as soon as the config opens or changes: no host code is needed,
 * and offline the cached tier keeps the last value the server sent. Open
 * the config before the events handle, so that the first track() and the
 * first upload already follow it. With several configs on one client, the
 * latest change wins.
 *   enabled false: track() drops every event (APPNORTH_OK, *out_queued 0,
 *     stats' dropped.disabled) and nothing is uploaded; events already
 *     queued stay queued (within the queue limits) and go once it is true
 *     again; appnorth_events_flush() returns APPNORTH_E_WRONG_STATE.
 *   sample_rate: as appnorth_events_options_set_sample_rate()
 *     (dropped.sampled).
 *   blocked_events: at most 1000 names; track() drops those events
 *     (dropped.blocked).
 * These drops happen before anything else is done for the event (before
 * consent is checked), and are not errors.
 * A field of the wrong type or out of range is refused: it keeps its last
 * good value (the option's, if it never had one), the others apply, and
 * one warning names what was refused. stats' "settings" shows what is in
 * force. Thread: the config's listener threads apply it (its background
 * thread, or the thread of appnorth_config_new() or _refresh()), before
 * its listeners are called, in dispatch mode too.
 */
APPNORTH_API int32_t appnorth_events_options_set_remote_settings(appnorth_events_options *options,
                                                                 int32_t follow, appnorth_error *err);

/** Keep identity values in the host's secure storage instead of the 0600
 *  file. get, set: required; release: optional, called once with user_data
 *  when the events handle is freed. The events handle made from these
 *  options keeps get, set, release and user_data valid until that release
 *  call (or, without one, until appnorth_events_free() returns). */
APPNORTH_API int32_t appnorth_events_options_set_secure_store(appnorth_events_options *options,
                                                              appnorth_secure_get_fn get,
                                                              appnorth_secure_set_fn set,
                                                              appnorth_release_fn release,
                                                              void *user_data, appnorth_error *err);

/**
 * Automatic sessions: a new session id after idle_timeout_ms without an
 * event (default 1800000, 30 min) and once a session is max_length_ms old
 * (default 86400000, 24 h); 0 turns that rotation off (both 0: the session
 * only changes with appnorth_events_start_session()). Each 0 to INT32_MAX;
 * else APPNORTH_E_INVALID_ARGUMENT and the options are unchanged.
 *
 * A rotation happens when an event is made, never on a timer: the event
 * appnorth_events_track() makes after the gap (by its own timestamp, the
 * options' clock) carries the new id, and so do the events after it. A
 * session starts when the handle opens, at appnorth_events_start_session()
 * (both counts restart then), and at such a rotation. A wall clock set back
 * never ends a session. appnorth_events_foreground() does not start one: an
 * app back after the idle timeout gets a new session with its next event.
 * Each handle has its own session. Not thread-safe, like every options
 * setter.
 */
APPNORTH_API int32_t appnorth_events_options_set_session_policy(appnorth_events_options *options,
                                                                int32_t idle_timeout_ms,
                                                                int32_t max_length_ms, appnorth_error *err);

/** Set the filter hook every event goes through before it is stored (see
 *  appnorth_before_send_fn); fn NULL removes it. user_data is passed to fn.
 *  release: optional, called once with user_data when neither these options
 *  nor an events handle made from them uses the hook any more. The options
 *  and the events handle made from them keep fn, release and user_data
 *  valid until that release call (or, without one, until
 *  appnorth_events_options_free() and appnorth_events_free() have both
 *  returned). With no hook, appnorth_events_track() runs no hook code. Not
 *  thread-safe, like every options setter. */
APPNORTH_API int32_t appnorth_events_options_set_before_send(appnorth_events_options *options,
                                                             appnorth_before_send_fn fn, void *user_data,
                                                             appnorth_release_fn release, appnorth_error *err);

/** The clock event timestamps, session rotation and the upload timers read:
 *  an appnorth_clock_new_manual() clock for tests; NULL (the default) for
 *  the system clock. The events handle keeps its own reference. With a
 *  manual clock the automatic flush timer only fires when the clock is
 *  advanced; appnorth_events_flush() works as ever. Not thread-safe. */
APPNORTH_API int32_t appnorth_events_options_set_clock(appnorth_events_options *options,
                                                       appnorth_clock *clock, appnorth_error *err);

/** Open the event queue and start its upload thread. */
APPNORTH_API int32_t appnorth_events_new(const appnorth_events_options *options,
                                         appnorth_events **out_events, appnorth_error *err);

/**
 * Stop the upload thread without flushing (queued events stay on disk;
 * an upload in progress is aborted within about a second) and free the
 * handle. NULL is a no-op. Calls in progress on other threads (a flush
 * ends when the thread stops) are waited for. Do not call it from a log
 * callback.
 */
APPNORTH_API void appnorth_events_free(appnorth_events *events);

/**
 * Flush for up to timeout_ms (0: no flush; 0 to INT32_MAX), then stop the
 * upload thread.
 * Later calls on the handle return APPNORTH_E_WRONG_STATE; free it with
 * appnorth_events_free().
 */
APPNORTH_API int32_t appnorth_events_close(appnorth_events *events, int32_t timeout_ms,
                                           appnorth_error *err);

/**
 * Queue an event. name: 1 to 256 characters. properties_json: NULL or a
 * JSON object of at most max_event_bytes bytes (default 65536, at most
 * 16 MiB; see appnorth_events_options_set_limits), stored and sent exactly
 * as given; the escape \u0000 is allowed, a raw control byte is not. When
 * consent is revoked (or not yet given with require_consent) the event is
 * dropped silently: the call returns APPNORTH_OK and *out_queued (optional)
 * is 0. So is an event dropped by the settings in force (events switched
 * off, this install sampled out, its name blocked: see
 * appnorth_events_options_set_remote_settings()), checked first, at the
 * cost of one atomic load while none applies.
 * Returns APPNORTH_E_TOO_LARGE for properties or a whole event over
 * max_event_bytes (checked before the text is parsed), and
 * APPNORTH_E_INVALID_JSON for text that is not a JSON object or that nests
 * objects and arrays more than 32 deep (the properties object counted).
 * Cost: one write() to the journal file; no SQLite, no network.
 */
APPNORTH_API int32_t appnorth_events_track(appnorth_events *events, const char *name,
                                           const char *properties_json, int32_t *out_queued,
                                           appnorth_error *err);

/**
 * Upload everything now and wait up to timeout_ms (0 to INT32_MAX; 0 only
 * asks, and returns APPNORTH_E_TIMEOUT unless it was already done). Returns the error that
 * ended the upload (network, server, validation...), APPNORTH_E_WRONG_STATE
 * while the circuit breaker pauses uploads, APPNORTH_E_TIMEOUT, or
 * APPNORTH_E_CANCELLED when appnorth_client_cancel() on the events' client
 * ended the wait (the events stay queued). When the queue ends empty, the
 * space its files took goes back to the file system just after this
 * returns, on the events' upload thread (appnorth_events_close() waits
 * for it).
 */
APPNORTH_API int32_t appnorth_events_flush(appnorth_events *events, int32_t timeout_ms,
                                           appnorth_error *err);

/**
 * appnorth_events_flush() that also tells how many events the server
 * accepted while it waited: *out_sent (optional) is set on success and on
 * failure alike (the events delivered before the error or the timeout).
 * timeout_ms: 0 to INT32_MAX, as for appnorth_events_flush(), with the same
 * statuses. Thread-safe; blocks up to timeout_ms.
 */
APPNORTH_API int32_t appnorth_events_flush_sent(appnorth_events *events, int32_t timeout_ms,
                                                int64_t *out_sent, appnorth_error *err);

/**
 * appnorth_events_flush() without blocking (see "Non-blocking
 * operations"): the handle's upload thread uploads, and the operation ends
 * when its cycle does or after timeout_ms (0 to INT32_MAX), with the same
 * statuses. No thread waits meanwhile: the transfer thread watches the
 * deadline and the cancel, and on_done (default mode) runs on it. Result,
 * on success and on failure alike: {"sent":N}, the events the server
 * accepted meanwhile. A cancel ends it with APPNORTH_E_CANCELLED within a
 * few milliseconds (the events stay queued; the upload thread goes on).
 * Returns at once; on_done and user_data are kept until on_done has run.
 */
APPNORTH_API int32_t appnorth_events_flush_async(appnorth_events *events, int32_t timeout_ms,
                                                 appnorth_completion_fn on_done, void *user_data,
                                                 uint64_t *out_op, appnorth_error *err);

/** Set the network type (APPNORTH_NETWORK_UNKNOWN to
 *  APPNORTH_NETWORK_EXPENSIVE_CELLULAR), which sets the batch size. */
APPNORTH_API int32_t appnorth_events_set_network_type(appnorth_events *events, int32_t network_type,
                                                      appnorth_error *err);

/** A new app session: new session id; uploads resume if paused. The
 *  automatic rotation's idle and maximum-length counts restart now. */
APPNORTH_API int32_t appnorth_events_start_session(appnorth_events *events, appnorth_error *err);

/** The session id the next event carries (unless that event starts a new
 *  session: see appnorth_events_options_set_session_policy()). *out_id:
 *  32 hex characters, freed with appnorth_string_free(). Thread-safe. */
APPNORTH_API int32_t appnorth_events_session_id(appnorth_events *events, char **out_id,
                                                appnorth_error *err);

/** The app came to the foreground: uploads resume and a flush starts. */
APPNORTH_API int32_t appnorth_events_foreground(appnorth_events *events, appnorth_error *err);

/** Grant (1) or revoke (0) analytics consent; persisted. Revoking purges
 *  the queue; once it returns, no event tracked before it is stored or
 *  sent: the upload in progress is cancelled and never retried, and a
 *  track() racing the call on another thread is waited for and purged.
 *  Any other value (a stray 7 is a host bug, not a grant):
 *  APPNORTH_E_INVALID_ARGUMENT, and consent is unchanged. A stored consent
 *  row that is neither is dropped (logged) and consent is unknown again.
 *
 *  The change reaches every other events handle on the same data
 *  directory, in this process or another, which acts on it as if it had
 *  made it (docs/events.md, "Consent across processes"). After a revocation
 *  returns: no handle sends an event upload any more (the call waits, up
 *  to 10 s, for uploads other handles had already begun to be answered;
 *  they are let finish, since their events had left); a track() that
 *  starts in any handle returns dropped (out_queued 0); events other
 *  handles had journaled, or tracked while the call ran, are purged,
 *  never uploaded, even after a later grant. A grant lets every handle's
 *  next track() queue again. Thread-safe. Blocks for the racing inserts,
 *  the purge and (revoking) the other handles' uploads in progress. */
APPNORTH_API int32_t appnorth_events_set_consent(appnorth_events *events, int32_t granted,
                                                 appnorth_error *err);

/** The consent state: APPNORTH_CONSENT_UNKNOWN, _REVOKED or _GRANTED. */
APPNORTH_API int32_t appnorth_events_consent(appnorth_events *events, int32_t *out_state,
                                             appnorth_error *err);

/** Set the user id (1 to 256 bytes), kept in the secure store. */
APPNORTH_API int32_t appnorth_events_identify(appnorth_events *events, const char *user_id,
                                              appnorth_error *err);

/** Clear the user id and the super properties (logout). The anonymous id
 *  stays. */
APPNORTH_API int32_t appnorth_events_reset(appnorth_events *events, appnorth_error *err);

/** Set the push token, kept in the secure store. token: NULL clears it. */
APPNORTH_API int32_t appnorth_events_set_push_token(appnorth_events *events, const char *token,
                                                    appnorth_error *err);

/**
 * Super properties: save the members of properties_json (a JSON object) in
 * the data directory (super_properties.json, 0600), to be added to the
 * properties of every event that any events handle on that directory, in
 * this process or another, makes from its next appnorth_events_track() on.
 * A key already registered gets the new value. A property passed to
 * appnorth_events_track() wins over a super property of the same key; the
 * values keep their spelling. They survive a restart;
 * appnorth_events_reset() clears them. They count toward max_event_bytes:
 * an event that would exceed it with them is refused by track() with
 * APPNORTH_E_TOO_LARGE.
 * Refused, nothing saved: APPNORTH_E_INVALID_JSON (not a JSON object, or
 * nested more than 32 deep), APPNORTH_E_INVALID_UTF8,
 * APPNORTH_E_TOO_LARGE (the registered set would exceed half of
 * max_event_bytes), APPNORTH_E_INVALID_ARGUMENT (NULL, or a reserved key:
 * id, name, timestamp, anonymous_id, user_id, session_id, properties).
 * Thread-safe. Blocks for a file write and fsync, and for another
 * process's change in progress. track() reads no file: it merges from
 * memory and reads the file again once after each change (a counter in
 * the directory's shared consent.watch mapping tells it; docs/events.md,
 * "Super properties").
 */
APPNORTH_API int32_t appnorth_events_register(appnorth_events *events, const char *properties_json,
                                              appnorth_error *err);

/** appnorth_events_register(), except that a key already registered keeps
 *  its value. Same refusals; thread-safe. */
APPNORTH_API int32_t appnorth_events_register_once(appnorth_events *events, const char *properties_json,
                                                   appnorth_error *err);

/** Remove one super property (key: UTF-8; a key not registered is no
 *  error). Thread-safe; blocks for a file write. */
APPNORTH_API int32_t appnorth_events_unregister(appnorth_events *events, const char *key,
                                                appnorth_error *err);

/** The registered super properties as a JSON object ("{}" for none).
 *  *out_json: freed with appnorth_string_free(). Thread-safe. */
APPNORTH_API int32_t appnorth_events_super_properties(appnorth_events *events, char **out_json,
                                                      appnorth_error *err);

/** The anonymous id, made on first use and persisted. *out_id: freed with
 *  appnorth_string_free(). */
APPNORTH_API int32_t appnorth_events_anonymous_id(appnorth_events *events, char **out_id,
                                                  appnorth_error *err);

/**
 * Queue statistics as JSON: {"queued","queued_bytes","journals","disk_bytes",
 * "dropped":{"queue_limit","client_error","payload_too_large","consent",
 * "damaged","sampled","blocked","disabled","filtered"},"breaker":{"open",
 * "consecutive_failures","threshold"},"last_error":{...}|null,
 * "last_flush_ms"|null,"last_attempt_ms"|null,"network_type","batch_size",
 * "consent","settings":{"enabled","sample_rate","sampled_in",
 * "blocked_events","flush_interval_ms","batch_threshold","remote"}}.
 * "settings" are those in force: the options, with the config key
 * "appnorth.events" over them ("remote": whether it sets any field; see
 * appnorth_events_options_set_remote_settings()). "queued"/"queued_bytes" count the
 * whole data directory (queued_bytes: what the queued events take in the
 * files, each at its database pages, the figure the byte limit trims by) (every handle's and process's journals too, which
 * the limits apply to); "journals" is the number of journal files there and
 * "disk_bytes" the bytes of the database, its WAL and the journals. Drop
 * counts cover this handle's lifetime (the drops of every handle add up to
 * tracked minus delivered).
 */
APPNORTH_API int32_t appnorth_events_stats(appnorth_events *events, char **out_json,
                                           appnorth_error *err);

/**
 * The queued events, oldest first, as the server would receive them: a JSON
 * array of the event objects of a batch body (the elements of
 * {"events":[...]}, byte for byte: properties as the host wrote them), for
 * a host's own tests, which can assert what they tracked without a server
 * (after Glean's testGetValue). "[]" when nothing is queued.
 * max: 1 to INT32_MAX, the most events returned (the oldest ones); the
 * queue's limits bound the answer anyway (at most its byte limit).
 * *out_json (required): the caller frees it with appnorth_string_free().
 * What is included: every event this handle tracked and still holds (the
 * call first imports this handle's journal into the data directory's
 * database, on the calling thread, under the queue's limits, as the
 * library thread would), and the events of other handles and processes on
 * the same data directory that are in the database: their own library
 * thread imports them at each upload cycle and at close, and the next open
 * imports those a process left when it ended; events still in another live
 * process's journal are not included. Events of a batch being uploaded are
 * included until the server has acknowledged them. Sends nothing.
 * Returns APPNORTH_E_INVALID_ARGUMENT for max < 1 or a NULL out_json;
 * APPNORTH_E_WRONG_STATE after appnorth_events_close(); APPNORTH_E_STORAGE
 * when the data directory cannot be read.
 * Thread-safe. Does local disk work in the data directory (the import and
 * the read), never the network.
 */
APPNORTH_API int32_t appnorth_events_pending(appnorth_events *events, int32_t max, char **out_json,
                                             appnorth_error *err);

/* ------------------------------------------------------------------------
 * Remote config
 *
 * A config is one JSON object of top-level keys, resolved over tiers,
 * highest first:
 *   APPNORTH_CONFIG_TIER_REMOTE   received from the server by this handle
 *                                 (a fetch, a poll, a 304 confirming the
 *                                 cached copy, or the live stream);
 *   APPNORTH_CONFIG_TIER_CACHED   persisted in the data directory by an
 *                                 earlier fetch, with its ETag and fetch
 *                                 time, loaded at appnorth_config_new();
 *   APPNORTH_CONFIG_TIER_BUNDLED  the host's bundled JSON file (the seed's
 *                                 appdna-config.json);
 *   APPNORTH_CONFIG_TIER_DEFAULT  nothing: every getter returns the
 *                                 caller's default.
 * The effective config is the whole document of the highest tier
 * available; tiers are not merged key by key.
 *
 * TTL and stale-while-revalidate. The fetched config is fresh for the TTL
 * (3600 s by default). Once it is older, the next read starts a background
 * fetch (a conditional GET with If-None-Match) and keeps returning the
 * stale value until a new one arrives; a 304 only refreshes the fetch
 * time. The bundled and default tiers count as expired, so the first read
 * also starts a fetch. After a failed background fetch the next one waits
 * for the reconnect backoff. While the live stream is connected the config
 * counts as fresh. Age is measured on the monotonic clock within a process
 * (a wall clock set back never makes a stale config look fresh); a cached
 * copy's age at open comes from the wall clock, and a fetch time in the
 * future counts as expired.
 *
 * Live updates. appnorth_config_start_live() opens the server's
 * Server-Sent Events stream on the config's background thread; each new
 * version is applied as it arrives. After an error the stream reconnects
 * with exponential backoff and jitter (1 s, 2 s, 4 s, ... up to 60 s by
 * default, each shortened by a random share of up to half), sending
 * Last-Event-ID. While it is down the config is polled every poll interval
 * (60 s by default; at once when the server answered the stream with an
 * error status). appnorth_config_stop_live() ends all of it, for hosts
 * going to the background.
 *
 * Reads are served from memory: no getter touches the disk or the network
 * on the calling thread, and none blocks on a fetch. Keys are top-level
 * keys, matched exactly ("a.b" is the key "a.b", not a path); read nested
 * values with appnorth_config_get_json(). A missing key, or a value of
 * another type, gives the caller's default and APPNORTH_OK.
 *
 * Numbers and text keep the spelling they were served or bundled with:
 * snapshots, appnorth_config_get_json() and listener documents reproduce
 * 9.99 as 9.99.
 *
 * Bad data. A bundled path that cannot be read, or whose content is not a
 * JSON object, is reported by appnorth_config_options_set_bundled_path()
 * and then left out: the config falls back to the cached tier or the
 * getters' defaults. An invalid remote payload keeps the
 * last good config; its error is available from
 * appnorth_config_last_fetch_status(). An unreadable cached copy (not
 * JSON, another format, a fetch time outside 0 to 253402300799999) is
 * deleted, logged, and the config resolves without it.
 *
 * The cache is one row per App ID in the data directory's database: use
 * one data directory per API environment. One config per data directory
 * and App ID may be open in a process at a time.
 * --------------------------------------------------------------------- */

/** The tier the effective config came from: APPNORTH_CONFIG_TIER_*. */
typedef int32_t appnorth_config_tier;

enum {
    APPNORTH_CONFIG_TIER_DEFAULT = 0,
    APPNORTH_CONFIG_TIER_BUNDLED = 1,
    APPNORTH_CONFIG_TIER_CACHED = 2,
    APPNORTH_CONFIG_TIER_REMOTE = 3,
    APPNORTH_CONFIG_TIER_INT32_MIN_ = INT32_MIN
};

#define APPNORTH_CONFIG_DEFAULT_TTL_SECONDS 3600
#define APPNORTH_CONFIG_DEFAULT_POLL_INTERVAL_MS 60000
#define APPNORTH_CONFIG_DEFAULT_BACKOFF_BASE_MS 1000
#define APPNORTH_CONFIG_DEFAULT_BACKOFF_MAX_MS 60000
/** The longest line or event a live config stream may send, in bytes. */
#define APPNORTH_CONFIG_MAX_STREAM_EVENT_BYTES (16 * 1024 * 1024)

/** Options for appnorth_config_new(). Not thread-safe: build it on one
 *  thread, then hand it to appnorth_config_new(), which copies it. */
typedef struct appnorth_config_options appnorth_config_options;

/** Remote config for one client's API and App ID. */
typedef struct appnorth_config appnorth_config;

/**
 * Create config options with the defaults: no client (required), no data
 * directory (nothing persisted: no cached tier), no bundled file, TTL
 * APPNORTH_CONFIG_DEFAULT_TTL_SECONDS, the system clock, poll interval
 * APPNORTH_CONFIG_DEFAULT_POLL_INTERVAL_MS, reconnect backoff from
 * APPNORTH_CONFIG_DEFAULT_BACKOFF_BASE_MS to ..._MAX_MS, and the client's
 * logger. Returns NULL only if memory is exhausted. Free with
 * appnorth_config_options_free().
 */
APPNORTH_API appnorth_config_options *appnorth_config_options_new(void);

/** Release options. NULL is a no-op. */
APPNORTH_API void appnorth_config_options_free(appnorth_config_options *options);

/**
 * Set the client whose API URL, App ID, credential and timeouts the config
 * uses. Required. The options, and then the config, keep a reference: the
 * host may free its client handle at any time afterwards.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL.
 */
APPNORTH_API int32_t appnorth_config_options_set_client(appnorth_config_options *options,
                                                        appnorth_client *client,
                                                        appnorth_error *err);

/**
 * Set the data directory that holds the cached tier (created 0700 if
 * needed; its database file is 0600). data_dir: NULL for none (the
 * default).
 * The directory is only checked by appnorth_config_new(), as
 * appnorth_storage_new_sqlite() says.
 */
APPNORTH_API int32_t appnorth_config_options_set_data_dir(appnorth_config_options *options,
                                                          const char *data_dir,
                                                          appnorth_error *err);

/**
 * Set the bundled config file: a UTF-8 JSON object of at most 16 MiB. path:
 * NULL for none (the default). The file is read and checked now, so a bad file is
 * reported at once: APPNORTH_E_STORAGE when it cannot be read,
 * APPNORTH_E_INVALID_JSON when it is not a JSON object,
 * APPNORTH_E_TOO_LARGE past 16 MiB, each message naming the file. On
 * failure no bundled file is set, and the config still opens: on the cached
 * tier, or on the getters' defaults. appnorth_config_new() reads the file
 * again; if it has become unusable since, it is skipped (logged as an
 * error) with the same fall-back.
 */
APPNORTH_API int32_t appnorth_config_options_set_bundled_path(appnorth_config_options *options,
                                                              const char *path,
                                                              appnorth_error *err);

/** Set the cache TTL: 0 for the default (3600), else 1 to 31536000 seconds. */
APPNORTH_API int32_t appnorth_config_options_set_ttl_seconds(appnorth_config_options *options,
                                                             int32_t ttl_seconds,
                                                             appnorth_error *err);

/** Set the clock TTLs and fetch times are read from. clock: NULL for the
 *  system clock. The config keeps a reference. Waits between retries and polls
 *  always use real time. */
APPNORTH_API int32_t appnorth_config_options_set_clock(appnorth_config_options *options,
                                                       appnorth_clock *clock,
                                                       appnorth_error *err);

/** Set how often the config is polled while the live stream is down: 0 for
 *  the default (60000), else 10 to 86400000 ms. */
APPNORTH_API int32_t appnorth_config_options_set_poll_interval_ms(appnorth_config_options *options,
                                                                  int32_t poll_interval_ms,
                                                                  appnorth_error *err);

/**
 * Set the reconnect backoff of the live stream (and the wait after a failed
 * background fetch): the n-th consecutive failure waits up to
 * base_ms * 2^(n-1), capped at max_ms, shortened by a random share of up to
 * half. 0 for either gives its default (1000, 60000); otherwise
 * 1 <= base_ms <= max_ms <= 3600000.
 */
APPNORTH_API int32_t appnorth_config_options_set_reconnect_backoff_ms(appnorth_config_options *options,
                                                                      int32_t base_ms,
                                                                      int32_t max_ms,
                                                                      appnorth_error *err);

/**
 * How much random jitter the live stream's reconnect backoff gets: each
 * wait (base_ms * 2^(n-1), capped at max_ms) is shortened by a random share
 * of up to `percent` % of it. Default 50. 0 to 100; anything else:
 * APPNORTH_E_INVALID_ARGUMENT. Jitter spreads the reconnects of every
 * config that lost its stream at the same moment (a server restart), so
 * the server does not get them all at once (docs/outages-and-fleets.md);
 * 0 makes every wait exactly its nominal delay, which only tests and
 * benchmarks want. Independent of
 * appnorth_config_options_set_reconnect_backoff_ms(), in either order. Not
 * thread-safe, like every options setter.
 */
APPNORTH_API int32_t appnorth_config_options_set_reconnect_jitter(appnorth_config_options *options,
                                                                  int32_t percent, appnorth_error *err);

/** Route the config's log lines to `fn` for levels >= `min_level`
 *  (APPNORTH_LOG_DEBUG to APPNORTH_LOG_ERROR), as
 *  appnorth_client_options_set_logger() does. By default the config logs
 *  through its client's logger. NULL `fn` turns its logging off. Keep
 *  `fn` and `user_data` valid until the config made with these options
 *  is freed. */
APPNORTH_API int32_t appnorth_config_options_set_logger(appnorth_config_options *options,
                                                        appnorth_log_fn fn,
                                                        int32_t min_level,
                                                        void *user_data,
                                                        appnorth_error *err);

/**
 * Open a config: read the bundled file (if set) and the cached copy (if a
 * data directory is set), and resolve. No network traffic happens here, and
 * no thread is started; no listener exists yet, so this first resolution
 * fires none.
 * options, out_config: required. On success *out_config is a new handle to
 * free with appnorth_config_free(); on failure it is set to NULL.
 * Returns APPNORTH_E_INVALID_ARGUMENT without a client;
 * APPNORTH_E_STORAGE when the data directory or its database cannot be
 * used; APPNORTH_E_WRONG_STATE when a config for the same App ID is already
 * open on the same data directory in this process. A bundled file that
 * cannot be used never fails the open (see
 * appnorth_config_options_set_bundled_path()).
 * Thread-safe: the config may be shared by several threads.
 */
APPNORTH_API int32_t appnorth_config_new(const appnorth_config_options *options,
                                         appnorth_config **out_config,
                                         appnorth_error *err);

/**
 * Free a config. NULL is a no-op. Stops live updates and joins the
 * config's background thread, waits for a listener callback running on
 * another thread, and releases the client reference. After it returns no
 * callback of this config runs. It may be called from inside one of the
 * config's listener callbacks (the callback then finishes normally and no
 * other callback follows). Calls in progress on other threads are waited
 * for, except from inside a callback (see "Freeing while other threads use
 * a handle" above). Do not use the handle after.
 */
APPNORTH_API void appnorth_config_free(appnorth_config *config);

/**
 * Read a string value. key: required (NULL is APPNORTH_E_INVALID_ARGUMENT,
 * bad UTF-8 APPNORTH_E_INVALID_UTF8). default_value: may be NULL.
 * *out_value receives a copy of the value, or of default_value when the key
 * is missing or its value is not a string (NULL if default_value is NULL);
 * the caller frees it with appnorth_string_free(). Never blocks on I/O.
 * A string served with the escape \u0000 cannot be a C string: the call
 * returns APPNORTH_E_INVALID_ARGUMENT with *out_value NULL; read such a
 * value with appnorth_config_get_json(), which keeps the escape.
 */
APPNORTH_API int32_t appnorth_config_get_string(appnorth_config *config, const char *key,
                                                const char *default_value, char **out_value,
                                                appnorth_error *err);

/**
 * Read an integer value: a JSON number without fraction or exponent.
 * *out_value receives it, or default_value when the key is missing or its
 * value is not an integer (3.0 is not). default_value: any value. On
 * failure (bad arguments) *out_value is also set to default_value. Never
 * blocks on I/O.
 */
APPNORTH_API int32_t appnorth_config_get_int(appnorth_config *config, const char *key,
                                             int64_t default_value, int64_t *out_value,
                                             appnorth_error *err);

/** Read a number (integer or real) as a double, else default_value. */
APPNORTH_API int32_t appnorth_config_get_double(appnorth_config *config, const char *key,
                                                double default_value, double *out_value,
                                                appnorth_error *err);

/** Read a boolean: *out_value is 1 for true, 0 for false, or default_value
 *  (any value, passed back unchanged) when the key is missing or not a JSON
 *  boolean. */
APPNORTH_API int32_t appnorth_config_get_bool(appnorth_config *config, const char *key,
                                              int32_t default_value, int32_t *out_value,
                                              appnorth_error *err);

/**
 * Read any value as JSON text (object, array, string, number, true, false
 * or null), exactly as served. default_json: NULL, or JSON text returned
 * when the key is missing (checked: invalid JSON is APPNORTH_E_INVALID_JSON
 * even when the key exists). *out_json: the caller frees it with
 * appnorth_string_free(); NULL when the key is missing and default_json is
 * NULL.
 */
APPNORTH_API int32_t appnorth_config_get_json(appnorth_config *config, const char *key,
                                              const char *default_json, char **out_json,
                                              appnorth_error *err);

/**
 * The whole effective config object, exactly as served or bundled ("{}" for
 * the default tier). Escapes such as \u0000 are kept as written; a document
 * with a raw NUL byte is never accepted from any tier, so this text is never
 * cut short. *out_json: the caller frees it with
 * appnorth_string_free(). Never blocks on I/O.
 */
APPNORTH_API int32_t appnorth_config_snapshot(appnorth_config *config, char **out_json,
                                              appnorth_error *err);

/**
 * Where the effective config came from. out_tier (optional): an
 * APPNORTH_CONFIG_TIER_* value. out_fetched_ms (optional): when it was last
 * fetched or confirmed by the server, in wall milliseconds since the epoch
 * (for a cached config, the time stored with it); 0 for the bundled and
 * default tiers. Like the getters, it may start a background fetch of a
 * stale config. Never blocks on I/O.
 */
APPNORTH_API int32_t appnorth_config_source(appnorth_config *config, int32_t *out_tier,
                                            int64_t *out_fetched_ms, appnorth_error *err);

/**
 * Fetch the config now, on the calling thread (a conditional GET), and
 * apply it. A change fires the listeners on this thread before the call
 * returns, unless another thread is delivering a change at that moment:
 * that thread then delivers this one right after its own.
 * In dispatch mode the change is queued instead, for the next
 * appnorth_dispatch().
 * Returns the fetch's error (APPNORTH_E_NETWORK, APPNORTH_E_NOT_FOUND when
 * no config is published, APPNORTH_E_SERVER, APPNORTH_E_INVALID_JSON for
 * an invalid payload, ...); the effective config is then unchanged.
 * Blocks for at most the client's resource download timeout.
 */
APPNORTH_API int32_t appnorth_config_refresh(appnorth_config *config, appnorth_error *err);

/**
 * appnorth_config_refresh() without blocking: the fetch and its apply run
 * on a library worker thread, and a change fires the listeners there
 * (before on_done). Result: {} (read the values with the getters). A
 * cancel ends the fetch with APPNORTH_E_CANCELLED and leaves the effective
 * config unchanged.
 * Returns at once; on_done and user_data are kept until on_done has run.
 */
APPNORTH_API int32_t appnorth_config_refresh_async(appnorth_config *config, appnorth_completion_fn on_done,
                                                   void *user_data, uint64_t *out_op, appnorth_error *err);

/**
 * Start live updates: the stream, its reconnects and the polling fallback
 * run on the config's background thread until appnorth_config_stop_live()
 * or appnorth_config_free(). Returns at once; calling it while live is a
 * no-op.
 */
APPNORTH_API int32_t appnorth_config_start_live(appnorth_config *config, appnorth_error *err);

/**
 * Stop live updates and background fetches: closes the stream and joins
 * the config's background thread, so that no library thread runs for this
 * config after it returns (called from a listener callback on that thread,
 * it returns at once and the thread ends after the callback). Reads keep
 * working, and a read of a stale config starts a one-shot background fetch
 * again. Calling it while not live is a no-op.
 */
APPNORTH_API int32_t appnorth_config_stop_live(appnorth_config *config, appnorth_error *err);

/**
 * A config listener. config_json: the new effective config object (as
 * served); changed_keys_json: a JSON array of the top-level keys added,
 * removed or changed, for instance ["theme","price"]; tier: an
 * APPNORTH_CONFIG_TIER_* value (APPNORTH_CONFIG_TIER_REMOTE for every change
 * after open). Both strings are valid only during the call.
 *
 * Called on every change of the effective config's content: the first
 * remote config that differs from the cached, bundled or default one, and
 * every live update, poll or fetch that brings different content. Not
 * called when a fetch brings identical content (values compared as JSON:
 * whitespace, key order and number spelling such as 1.5 and 1.50 do not
 * count) or on a 304; such a fetch keeps the text already held, so no
 * getter or snapshot changes without a listener call.
 *
 * THREAD, default mode: the config's background thread (live updates,
 * polls, background fetches), a thread calling appnorth_config_refresh()
 * whose fetch brought the change, or the library worker running an
 * appnorth_config_refresh_async(). Dispatch mode (the config's client made
 * with appnorth_client_options_set_dispatch_mode): only inside
 * appnorth_dispatch() on that client, on the thread calling it; changes
 * that arrive between two dispatches are coalesced into one call (latest
 * values and tier, union of the changed keys), and a refresh's change is
 * delivered by the next dispatch, not inside the refresh. Callbacks of
 * one config never run concurrently, and see changes in order. No library
 * lock is held while a callback runs: it may call any function of this
 * library, including appnorth_config_remove_listener() for its own token,
 * appnorth_config_stop_live() and appnorth_config_free() on its config.
 * It must not block on a lock that a thread inside
 * appnorth_config_remove_listener(), _stop_live() or _free() of the same
 * config holds, since those wait for it.
 */
typedef void (*appnorth_config_listener_fn)(const char *config_json, const char *changed_keys_json,
                                            int32_t tier, void *user_data);

/**
 * Register a listener. fn: required. user_data: passed back unchanged; the
 * host keeps it valid until the listener is removed or the config freed.
 * *out_token (required) receives a token (1 or more) for
 * appnorth_config_remove_listener(). A new listener is not called for the
 * current config: read it with the getters after registering.
 */
APPNORTH_API int32_t appnorth_config_add_listener(appnorth_config *config,
                                                  appnorth_config_listener_fn fn, void *user_data,
                                                  int64_t *out_token, appnorth_error *err);

/**
 * Unregister a listener; it is never called after this returns. If its
 * callback is running on another thread, waits for it to return; called
 * from inside that callback, returns at once.
 * token: any value. Returns APPNORTH_E_INVALID_ARGUMENT for an unknown or
 * already removed token.
 */
APPNORTH_API int32_t appnorth_config_remove_listener(appnorth_config *config, int64_t token,
                                                     appnorth_error *err);

/**
 * The outcome of the latest exchange with the config endpoints: a refresh,
 * a background fetch or poll, a stream connection attempt, or a stream
 * event. out_status (required) is filled like an err out-parameter: code 0
 * and an empty message after a success (a 304 included), else the failure's
 * code, HTTP status and message; for instance APPNORTH_E_INVALID_JSON for a
 * payload that was rejected (the last good config stays in effect), or
 * APPNORTH_E_TOO_LARGE once a live stream sends a line or event longer
 * than APPNORTH_CONFIG_MAX_STREAM_EVENT_BYTES (that connection is then
 * closed and reopened after the reconnect backoff).
 * out_time_ms (optional): when that exchange ended, wall milliseconds; 0 if
 * none has happened yet (out_status then says OK).
 * Returns APPNORTH_OK unless the arguments are bad.
 */
APPNORTH_API int32_t appnorth_config_last_fetch_status(appnorth_config *config,
                                                       appnorth_error *out_status,
                                                       int64_t *out_time_ms,
                                                       appnorth_error *err);

/* Data-source status (0.4.0): a state, since when, and the last error,
 * read with appnorth_config_status() or delivered to status listeners,
 * after LaunchDarkly's data-source status. docs/config.md has the table of
 * what each server answer does to the data source: none stops it for
 * good; a 401 or 403 holds back every request of the config's background
 * thread for APPNORTH_CONFIG_AUTH_HOLD_MS instead (the host's own
 * appnorth_config_refresh() is not held back). */

/** The state of a config's data source: APPNORTH_CONFIG_STATE_*. The
 *  state is the outcome of the latest exchange with the config endpoints
 *  (a refresh, a background fetch or poll, a stream connection or event)
 *  or of the host's start_live/stop_live, whichever came last. */
typedef int32_t appnorth_config_state;

enum {
    /** Nothing has ended yet since appnorth_config_new(), or since
     *  appnorth_config_start_live() after a stop. */
    APPNORTH_CONFIG_STATE_INITIALIZING = 0,
    /** The server answered with a config or a 304. */
    APPNORTH_CONFIG_STATE_VALID = 1,
    /** The server answered with an error status or an invalid payload, or
     *  a connected stream ended; the library retries. */
    APPNORTH_CONFIG_STATE_INTERRUPTED = 2,
    /** No answer: connection refused or dropped, DNS, TLS, timeout
     *  (APPNORTH_E_NETWORK, APPNORTH_E_TIMEOUT); the library retries. */
    APPNORTH_CONFIG_STATE_OFFLINE = 3,
    /** The host stopped live updates with appnorth_config_stop_live(). */
    APPNORTH_CONFIG_STATE_OFF = 4,
    APPNORTH_CONFIG_STATE_INT32_MIN_ = INT32_MIN
};

/** How long a 401 or 403 answer holds back the config's background
 *  thread (stream, polls, background fetches), in ms: 5 minutes. */
#define APPNORTH_CONFIG_AUTH_HOLD_MS 300000

/**
 * A config's data-source status. The host owns the struct (usually on its
 * stack); the library only writes into it. last_error is kept after a
 * recovery (the state then says VALID): its message is the error's
 * message cut as every appnorth_error's is (a server's text at most a
 * bounded excerpt, then truncated to APPNORTH_ERROR_MESSAGE_SIZE on a
 * UTF-8 boundary).
 */
typedef struct appnorth_data_source_status {
    int32_t state;             /* an APPNORTH_CONFIG_STATE_* value */
    int64_t since_ms;          /* when that state began, wall ms since the epoch */
    int64_t last_error_ms;     /* when the last failure happened, wall ms; 0 if none yet */
    appnorth_error last_error; /* the last failure; code 0 and empty if none yet */
} appnorth_data_source_status;

/**
 * The config's data-source status. out_status: required, filled on
 * success (zeroed on failure). Reads memory only: never blocks on I/O and,
 * unlike the getters, never starts a fetch.
 * Returns APPNORTH_OK unless the arguments are bad.
 */
APPNORTH_API int32_t appnorth_config_status(appnorth_config *config, appnorth_data_source_status *out_status,
                                            appnorth_error *err);

/**
 * A status listener. status: the new status, valid only during the call.
 * Called when the state changes, or when the last error's code or HTTP
 * status changes; a repeated failure of the same kind (a poll failing again
 * during an outage) only updates last_error_ms and the message, which
 * appnorth_config_status() reads, and calls nothing.
 * THREAD: the same as appnorth_config_listener_fn: default mode, the
 * config's background thread, the thread whose appnorth_config_refresh(),
 * _start_live() or _stop_live() changed the status, or the library worker
 * of an appnorth_config_refresh_async(). Dispatch mode (the config's client
 * made with appnorth_client_options_set_dispatch_mode): only inside
 * appnorth_dispatch() on that client, on the thread calling it; statuses
 * that change between two dispatches come as one call with the latest.
 * Status callbacks of one config never run concurrently and see changes in
 * order. No library lock is held while it runs, and the same calls are
 * allowed inside it as in a config listener.
 */
typedef void (*appnorth_config_status_fn)(const appnorth_data_source_status *status, void *user_data);

/**
 * Register a status listener. fn: required. user_data: passed back
 * unchanged; the host keeps it valid until the listener is removed or the
 * config freed. *out_token (required) receives a token (1 or more) for
 * appnorth_config_remove_status_listener(). A new listener is not called
 * for the current status: read it with appnorth_config_status() after
 * registering.
 */
APPNORTH_API int32_t appnorth_config_add_status_listener(appnorth_config *config,
                                                         appnorth_config_status_fn fn, void *user_data,
                                                         int64_t *out_token, appnorth_error *err);

/**
 * Unregister a status listener; it is never called after this returns. If
 * its callback is running on another thread, waits for it to return;
 * called from inside that callback, returns at once.
 * token: any value. Returns APPNORTH_E_INVALID_ARGUMENT for an unknown or
 * already removed token.
 */
APPNORTH_API int32_t appnorth_config_remove_status_listener(appnorth_config *config, int64_t token,
                                                            appnorth_error *err);

#ifdef __cplusplus
}
#endif

#endif /* APPNORTH_H */
