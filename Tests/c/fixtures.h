/* Fixtures shared by the C tests: the dev server's state (the clock is
 * clock.h, through check.h).
 * admin.h (the admin API through plain libcurl) is shared with the
 * benchmarks too; this file adds what needs check.h. */
#ifndef APPNORTH_TEST_FIXTURES_H
#define APPNORTH_TEST_FIXTURES_H

#include <appnorth.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "admin.h"
#include "check.h"

/* Empties the dev server at `base` (apps, requests log, faults), checked. */
static inline void admin_reset(const char *base) {
    long status = admin_request(base, "POST", "/admin/reset", "{}", NULL);
    CHECK(status == 200, "admin reset: HTTP %ld", status);
}

/* Adds a dev-server fault (POST /admin/faults with `spec`), checked. */
static inline void admin_add_fault(const char *base, const char *spec) {
    long status = admin_request(base, "POST", "/admin/faults", spec, NULL);
    CHECK(status == 201, "fault %s: HTTP %ld", spec, status);
}

static inline void admin_clear_faults(const char *base) {
    admin_request(base, "DELETE", "/admin/faults", NULL, NULL);
}

/* True while a fault on path prefix `prefix` waits for its request. */
static inline int admin_fault_pending(const char *base, const char *prefix) {
    json_t *reply = NULL;
    admin_request(base, "GET", "/admin/faults", NULL, &reply);
    int found = 0;
    size_t i;
    json_t *fault;
    json_array_foreach(json_object_get(reply, "faults"), i, fault) {
        const char *p = json_string_value(json_object_get(fault, "path_prefix"));
        if (p && strcmp(p, prefix) == 0) found = 1;
    }
    json_decref(reply);
    return found;
}

/* Waits (up to 15 s) until the server has taken the request of the fault
 * on `prefix`: the request is then held at the server. */
static inline void admin_wait_fault_taken(const char *base, const char *prefix) {
    int64_t deadline = mono_ms() + 15000;
    while (mono_ms() < deadline && admin_fault_pending(base, prefix)) sleep_ms(20);
}

/* How many requests wait out a delay fault at the server now. */
static inline int admin_held(const char *base) {
    json_t *reply = NULL;
    admin_request(base, "GET", "/admin/faults", NULL, &reply);
    int held = (int)json_integer_value(json_object_get(reply, "held"));
    json_decref(reply);
    return held;
}

/* Waits until at least `n` requests are held at the server (a long
 * delay_ms holds one until admin_release); 30 s only catch a hang. */
static inline int admin_wait_held(const char *base, int n) {
    int64_t deadline = mono_ms() + 30000;
    while (admin_held(base) < n && mono_ms() < deadline) sleep_ms(5);
    return admin_held(base) >= n;
}

/* Publishes `config_json` (a JSON object's text) as `app`'s config. */
static inline void admin_publish_config(const char *base, const char *app, const char *config_json) {
    char path[256], *body = malloc(strlen(config_json) + 32);
    snprintf(path, sizeof path, "/admin/apps/%s/config", app);
    sprintf(body, "{\"config\":%s}", config_json);
    long status = admin_request(base, "POST", path, body, NULL);
    CHECK(status == 201, "publish %s's config -> HTTP %ld", app, status);
    free(body);
}

/* Ends every delay in progress at the server: the held requests go on. */
static inline void admin_release(const char *base) {
    long status = admin_request(base, "POST", "/admin/faults/release", "{}", NULL);
    CHECK(status == 200, "release the held requests: HTTP %ld", status);
}

/* How many requests `method` `path` (exactly) the server logged. */
static inline int admin_logged(const char *base, const char *method, const char *path) {
    json_t *reply = NULL;
    admin_request(base, "GET", "/admin/requests", NULL, &reply);
    int count = 0;
    size_t i;
    json_t *entry;
    json_array_foreach(json_object_get(reply, "requests"), i, entry) {
        const char *m = json_string_value(json_object_get(entry, "method"));
        const char *p = json_string_value(json_object_get(entry, "path"));
        count += m && p && strcmp(m, method) == 0 && strcmp(p, path) == 0;
    }
    json_decref(reply);
    return count;
}

/* A client of `app` on `base` with the given API and config timeouts
 * (a "patient" client outlasts the server's holds: only a cancel ends one). */
static inline appnorth_client *client_with_timeouts(const char *base, const char *app, int32_t api_ms,
                                                    int32_t config_ms) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, base, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, app, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, api_ms, config_ms, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

/* A config handle, and an events handle, of client `c` on data directory `dir`. */
static inline appnorth_config *config_in(appnorth_client *c, const char *dir) {
    appnorth_error err;
    appnorth_config_options *co = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(co, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(co, dir, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(co, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(co);
    return config;
}

static inline appnorth_events *events_in(appnorth_client *c, const char *dir) {
    appnorth_error err;
    appnorth_events_options *eo = appnorth_events_options_new();
    CHECK_STATUS(appnorth_events_options_set_client(eo, c, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_data_dir(eo, dir, &err), APPNORTH_OK, err);
    appnorth_events *events = NULL;
    CHECK_STATUS(appnorth_events_new(eo, &events, &err), APPNORTH_OK, err);
    appnorth_events_options_free(eo);
    return events;
}

#endif
