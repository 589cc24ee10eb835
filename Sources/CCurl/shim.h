#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
 * call. These typed wrappers cover the argument kinds the transport uses. */
static inline CURLcode cshim_setopt_long(CURL *h, CURLoption opt, long value) {
    return curl_easy_setopt(h, opt, value);
}
static inline CURLcode cshim_setopt_pointer(CURL *h, CURLoption opt, const void *value) {
    return curl_easy_setopt(h, opt, value);
}
static inline CURLcode cshim_setopt_offset(CURL *h, CURLoption opt, curl_off_t value) {
    return curl_easy_setopt(h, opt, value);
}
static inline CURLcode cshim_setopt_write_function(CURL *h, CURLoption opt, curl_write_callback fn) {
    return curl_easy_setopt(h, opt, fn);
}
static inline CURLcode cshim_setopt_xferinfo_function(CURL *h, curl_xferinfo_callback fn) {
    return curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, fn);
}
static inline CURLcode cshim_getinfo_long(CURL *h, CURLINFO info, long *out) {
    return curl_easy_getinfo(h, info, out);
}
static inline CURLcode cshim_getinfo_offset(CURL *h, CURLINFO info, curl_off_t *out) {
    return curl_easy_getinfo(h, info, out);
}
/* CURLOPT_CAINFO_BLOB: curl copies the bytes (CURL_BLOB_COPY), so they need
 * only live for the call. */
static inline CURLcode cshim_setopt_blob_copy(CURL *h, CURLoption opt, const void *data, size_t len) {
    struct curl_blob blob;
    blob.data = (void *)data;
    blob.len = len;
    blob.flags = CURL_BLOB_COPY;
    return curl_easy_setopt(h, opt, &blob);
}
static inline CURLMcode cshim_multi_setopt_long(CURLM *m, CURLMoption opt, long value) {
    return curl_multi_setopt(m, opt, value);
}
/* The event-driven multi interface (TransferEngine): curl tells which
 * sockets to watch and when its next timeout is; the caller waits on them
 * itself and reports back with curl_multi_socket_action. */
typedef int (*cshim_socket_fn)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*cshim_timer_fn)(CURLM *m, long timeout_ms, void *userp);
static inline void cshim_multi_set_event_callbacks(CURLM *m, cshim_socket_fn on_socket, cshim_timer_fn on_timer,
                                                   void *userp) {
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m, CURLMOPT_SOCKETDATA, userp);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(m, CURLMOPT_TIMERDATA, userp);
}
static inline CURLMcode cshim_multi_socket_timeout(CURLM *m, int *running) {
    return curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, running);
}

/* curl_easy_header (libcurl 7.83+, unless built without the headers API)
 * is referenced weakly: with an older libcurl the library still loads, the
 * symbol is NULL, and the transport reads response fields in its header
 * callback instead. Returns CURLHE_NOT_BUILT_IN then. */
#pragma weak curl_easy_header
static inline CURLHcode cshim_easy_header(CURL *h, const char *name, size_t index, unsigned int origin,
                                          int request, struct curl_header **out) {
    if (!curl_easy_header) return CURLHE_NOT_BUILT_IN;
    return curl_easy_header(h, name, index, origin, request, out);
}
