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
 *  - Strings. Input strings are NUL-terminated UTF-8; the library copies
 *    what it keeps. Strings the library returns through `char **out_*`
 *    parameters belong to the caller and must be released with
 *    appnorth_string_free(), never with the host's free(). On failure the
 *    out-parameter is set to NULL.
 *  - JSON crosses the boundary as UTF-8 text. Invalid JSON, invalid UTF-8,
 *    NULL where a value is required and oversize values are refused with a
 *    status and a message; nothing is stored or sent.
 *  - Threads. Every handle may be used from several threads at once unless
 *    its comment says otherwise. Calls that talk to the network block the
 *    calling thread for at most the client's request timeout.
 *  - fork(). Handles do not survive fork(): a child process must not use
 *    the parent's handles. A child that only exits or execs is safe.
 */
#ifndef APPNORTH_H
#define APPNORTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#  define APPNORTH_API __declspec(dllexport)
#else
#  define APPNORTH_API __attribute__((visibility("default")))
#endif

/* ------------------------------------------------------------------------
 * Version
 * --------------------------------------------------------------------- */

#define APPNORTH_VERSION_MAJOR 0
#define APPNORTH_VERSION_MINOR 1
#define APPNORTH_VERSION_PATCH 0
#define APPNORTH_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH, for compile-time comparisons. */
#define APPNORTH_VERSION_NUMBER 100

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
 * --------------------------------------------------------------------- */

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
    APPNORTH_E_INTERNAL = 15
};

/**
 * The name of a status code, for instance "network error".
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
 * Logging
 * --------------------------------------------------------------------- */

enum {
    APPNORTH_LOG_DEBUG = 0,
    APPNORTH_LOG_INFO = 1,
    APPNORTH_LOG_WARNING = 2,
    APPNORTH_LOG_ERROR = 3
};

/**
 * A log sink. `message` is UTF-8 and valid only during the call. Log lines
 * never contain credentials, tokens or identity values.
 * It may be called on any thread, including library background threads,
 * and never while the library holds an internal lock. It must not free the
 * handle whose options installed it.
 */
typedef void (*appnorth_log_fn)(int32_t level, const char *message, void *user_data);

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

/**
 * Set the API's base URL, for instance "https://api.appnorth.example" or
 * "http://127.0.0.1:8080". Scheme must be http or https; a trailing slash
 * is removed. Required.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL or a malformed URL,
 * APPNORTH_E_INVALID_UTF8 for bad text.
 */
APPNORTH_API int32_t appnorth_client_options_set_api_url(appnorth_client_options *options,
                                                         const char *api_url,
                                                         appnorth_error *err);

/**
 * Set the App ID: 1 to 128 characters of A-Z a-z 0-9 . _ -. Required.
 * Returns APPNORTH_E_INVALID_ARGUMENT for NULL or a malformed id.
 */
APPNORTH_API int32_t appnorth_client_options_set_app_id(appnorth_client_options *options,
                                                        const char *app_id,
                                                        appnorth_error *err);

/**
 * Set the user's credential: an email (the identity; lowercased for account
 * scoping) and its API token. Both NULL clears the credential (anonymous).
 * One NULL and not the other is APPNORTH_E_INVALID_ARGUMENT. The token is
 * kept in memory only: it is never written to disk or to a log.
 */
APPNORTH_API int32_t appnorth_client_options_set_credential(appnorth_client_options *options,
                                                            const char *email,
                                                            const char *token,
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
 * Route the client's log lines to `fn` for levels >= `min_level`. NULL `fn`
 * turns logging off (the default). `user_data` is passed back unchanged; the
 * host keeps it alive until the client is freed.
 */
APPNORTH_API int32_t appnorth_client_options_set_logger(appnorth_client_options *options,
                                                        appnorth_log_fn fn,
                                                        int32_t min_level,
                                                        void *user_data,
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
 * Free a client. NULL is a no-op. Wait for calls in progress on other
 * threads to return before freeing: the handle must not be used after.
 */
APPNORTH_API void appnorth_client_free(appnorth_client *client);

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
 * Unknown keys or wrong types are APPNORTH_E_INVALID_JSON, before any
 * request is made.
 * *out_json receives {"ideas":[...],"next_cursor":"..." or null}; the caller
 * frees it with appnorth_string_free().
 * Thread-safe. Blocks for at most the API request timeout.
 */
APPNORTH_API int32_t appnorth_client_list_ideas(appnorth_client *client,
                                                const char *query_json,
                                                char **out_json,
                                                appnorth_error *err);

#ifdef __cplusplus
}
#endif

#endif /* APPNORTH_H */
