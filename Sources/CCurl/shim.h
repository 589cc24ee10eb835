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
