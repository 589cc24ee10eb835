/* Test-side helpers for the local server's admin endpoints. They use libcurl
 * directly: the tests arrange server state and inspect what arrived without
 * going through the library under test. */
#ifndef APPNORTH_TEST_ADMIN_H
#define APPNORTH_TEST_ADMIN_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char *data; size_t len; } admin_buffer;

static inline size_t admin_write(char *ptr, size_t size, size_t n, void *user) {
    admin_buffer *b = user;
    size_t add = size * n;
    char *grown = realloc(b->data, b->len + add + 1);
    if (!grown) return 0;
    b->data = grown;
    memcpy(b->data + b->len, ptr, add);
    b->len += add;
    b->data[b->len] = 0;
    return add;
}

/* Sends method+path (+ JSON body) to the server; returns the HTTP status (0
 * if no answer) and, in *out (optional), the body's text or NULL. The caller
 * frees *out. Shared with the benchmarks (bench/c/bench.h). */
static inline long admin_request_text(const char *base, const char *method, const char *path,
                                      const char *body, char **out) {
    char url[1024];
    snprintf(url, sizeof url, "%s%s", base, path);
    CURL *h = curl_easy_init();
    admin_buffer buf = {0};
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, admin_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &buf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    /* The HTTPS test server's certificate comes from the test CA. */
    if (getenv("APPNORTH_TEST_TLS_CA")) curl_easy_setopt(h, CURLOPT_CAINFO, getenv("APPNORTH_TEST_TLS_CA"));
    if (body) curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (out) *out = buf.data;
    else free(buf.data);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return status;
}

/* admin_request_text with the body parsed: *out (optional) is the JSON
 * reply or NULL. The caller decrefs *out. */
static inline long admin_request(const char *base, const char *method, const char *path,
                          const char *body, json_t **out) {
    char *text = NULL;
    long status = admin_request_text(base, method, path, body, out ? &text : NULL);
    if (out) *out = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return status;
}

/* Creates a board and returns its id (caller frees). */
static inline char *admin_board(const char *base, const char *app, const char *name) {
    char path[256], body[512];
    snprintf(path, sizeof path, "/admin/apps/%s/boards", app);
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"description\":\"about %s\"}", name, name);
    json_t *reply = NULL;
    admin_request(base, "POST", path, body, &reply);
    json_t *board = json_object_get(reply, "board");
    const char *id = json_string_value(json_object_get(board ? board : reply, "id"));
    char *copy = id ? strdup(id) : NULL;
    json_decref(reply);
    return copy;
}

static inline void admin_idea(const char *base, const char *app, const char *board_id,
                       const char *title, const char *status) {
    char path[256], body[1024];
    snprintf(path, sizeof path, "/admin/apps/%s/ideas", app);
    snprintf(body, sizeof body, "{\"board_id\":\"%s\",\"title\":\"%s\",\"body\":\"text of %s\",\"status\":\"%s\"}",
             board_id, title, title, status);
    admin_request(base, "POST", path, body, NULL);
}

#endif
