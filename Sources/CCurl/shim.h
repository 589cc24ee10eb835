#include <curl/curl.h>

/* The release library is compiled against the platform floor's headers
 * (curl 7.74, Debian 11: docs/platforms.md). The two newer pieces of curl's
 * API it uses are declared here when those headers lack them, exactly as
 * curl's own headers declare them, and are found at run time:
 * CurlFeatures.takesCABlob and CurlFeatures.keepsFields. */
#if LIBCURL_VERSION_NUM < 0x074D00 /* 7.77: CURLOPT_CAINFO_BLOB */
static const CURLoption CURLOPT_CAINFO_BLOB = (CURLoption)(CURLOPTTYPE_BLOB + 309);
#endif
#if LIBCURL_VERSION_NUM < 0x075300 /* 7.83: the headers API */
struct curl_header {
    char *name;
    char *value;
    size_t amount;
    size_t index;
    unsigned int origin;
    void *anchor;
};
#define CURLH_HEADER (1 << 0)
typedef enum {
    CURLHE_OK,
    CURLHE_BADINDEX,
    CURLHE_MISSING,
    CURLHE_NOHEADERS,
    CURLHE_NOREQUEST,
    CURLHE_OUT_OF_MEMORY,
    CURLHE_BAD_ARGUMENT,
    CURLHE_NOT_BUILT_IN
} CURLHcode;
CURL_EXTERN CURLHcode curl_easy_header(CURL *easy, const char *name, size_t index, unsigned int origin, int request,
                                       struct curl_header **hout);
#endif

/* The loaded libcurl's version text ("7.74.0"). */
static inline const char *cshim_version_text(void) {
    return curl_version_info(CURLVERSION_NOW)->version;
}

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

/* Every socket curl opens for a connection is close-on-exec from its
 * creation (SOCK_CLOEXEC: no window in which another thread's fork+exec
 * could inherit it), so a program the host starts never holds a live
 * connection to the API server. */
#include <sys/socket.h>
static curl_socket_t cshim_open_cloexec_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)clientp;
    (void)purpose;
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}
static inline CURLcode cshim_setopt_cloexec_sockets(CURL *h) {
    return curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, cshim_open_cloexec_socket);
}

/* curl_multi_init() without a leak into a host's exec: libcurl before 8.8
 * makes each multi handle's wake-up socketpair without close-on-exec (curl
 * issue #13618) and offers no option for it. With such a libcurl this notes
 * the open descriptors, makes the handle, and marks close-on-exec the new
 * AF_UNIX stream sockets that are not (the pair: no other code of the
 * library makes one; a host thread making a socketpair without
 * close-on-exec in the same microseconds would see its pair marked too). */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
enum { CSHIM_FD_SCAN_MAX = 8192 };
static inline void cshim_open_fds(unsigned char *bits) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    int own = dirfd(d); /* the listing's own descriptor, closed below */
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (fd > 0 && fd != own && fd < CSHIM_FD_SCAN_MAX) bits[fd / 8] |= (unsigned char)(1u << (fd % 8));
    }
    closedir(d);
}
static inline CURLM *cshim_multi_init_cloexec(void) {
    curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    if (v && v->version_num >= 0x080800) return curl_multi_init(); /* already close-on-exec */
    unsigned char *before = calloc(2, CSHIM_FD_SCAN_MAX / 8);
    if (!before) return curl_multi_init();
    unsigned char *after = before + CSHIM_FD_SCAN_MAX / 8;
    cshim_open_fds(before);
    CURLM *m = curl_multi_init();
    cshim_open_fds(after);
    for (int fd = 3; fd < CSHIM_FD_SCAN_MAX; fd++) {
        unsigned char bit = (unsigned char)(1u << (fd % 8));
        if (!(after[fd / 8] & bit) || (before[fd / 8] & bit)) continue;
        int flags = fcntl(fd, F_GETFD), domain = 0, type = 0;
        socklen_t len = sizeof domain;
        if (flags < 0 || (flags & FD_CLOEXEC)) continue;
        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX) continue;
        len = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
        fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    free(before);
    return m;
}
