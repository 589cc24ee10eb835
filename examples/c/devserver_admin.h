/* Dev-server-only helpers for the examples: they call the local server's
 * /admin API (fault injection) over a plain socket so that an example can
 * show an outage and a reconnect. Not part of the SDK, and never needed
 * against a real AppNorth API. */
#ifndef APPNORTH_EXAMPLE_DEVSERVER_ADMIN_H
#define APPNORTH_EXAMPLE_DEVSERVER_ADMIN_H

/* getaddrinfo() and struct addrinfo are POSIX, hidden by strict -std=c99/c11
 * unless the program asks for POSIX before its first #include. */
#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200112L
#error "define _POSIX_C_SOURCE 200809L before the first #include to use devserver_admin.h"
#endif

#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Sends one JSON request to the dev server's /admin API and returns the
 * HTTP status, or -1 when the server could not be reached. Loopback
 * http://HOST:PORT URLs only, which is all the dev server serves. */
static inline int dev_admin(const char *api_url, const char *method, const char *path, const char *body) {
    char host[256], port[16] = "80";
    const char *p = strncmp(api_url, "http://", 7) == 0 ? api_url + 7 : NULL;
    if (!p) return -1;
    size_t n = strcspn(p, "/");
    if (n == 0 || n >= sizeof host) return -1;
    memcpy(host, p, n);
    host[n] = 0;
    char *colon = strrchr(host, ':');
    if (colon && (host[0] != '[' || colon > strchr(host, ']'))) {
        snprintf(port, sizeof port, "%s", colon + 1);
        *colon = 0;
    }
    if (host[0] == '[') { /* [::1] */
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = 0;
    }

    struct addrinfo hints, *addrs = NULL;
    memset(&hints, 0, sizeof hints); /* not {0}: C++ warns about the other fields */
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &addrs) != 0) return -1;
    int fd = -1;
    for (struct addrinfo *a = addrs; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(addrs);
    if (fd < 0) return -1;

    char request[2048];
    int len = snprintf(request, sizeof request,
                       "%s %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                       method, path, host, port, body ? strlen(body) : 0, body ? body : "");
    int status = -1;
    if (len > 0 && (size_t)len < sizeof request && write(fd, request, (size_t)len) == len) {
        char reply[64] = {0};
        ssize_t got = read(fd, reply, sizeof reply - 1);
        if (got > 12) sscanf(reply, "HTTP/%*s %d", &status);
    }
    close(fd);
    return status;
}

static inline void lose_connectivity(const char *api_url) {
    if (dev_admin(api_url, "POST", "/admin/faults", "{\"drop\":true,\"count\":1000}") != 201)
        fprintf(stderr, "   (could not reach the dev server's /admin API)\n");
    printf("   [dev server] dropping every API connection\n");
}

static inline void reconnect(const char *api_url) {
    dev_admin(api_url, "DELETE", "/admin/faults", NULL);
    printf("   [dev server] connections work again\n");
}

#endif
