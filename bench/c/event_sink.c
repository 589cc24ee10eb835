/* A receiving server for the flush benchmark that is not the bottleneck.
 *
 * The dev server is one Python process that parses and stores every event
 * in SQLite: against it, the library and plain libcurl both measure the
 * server (single rounds of the ratio ranged 0.66-1.46). This sink does the
 * least a real receiver must: it reads each POST /v1/apps/{app}/events body
 * (Content-Length, keep-alive), inflates it when gzip-encoded (zlib), parses
 * it with jansson, checks every event is an object with a string "id",
 * counts the events and distinct ids per app, and answers at once with the
 * protocol's 200 {"accepted":N,"duplicates":D} (docs/protocol.md). A body
 * that is not a valid batch gets 400, as the dev server would answer.
 *
 *   GET  /sink/stats?app=APP  {"events":N,"distinct":D,"posts":P,"wire_bytes":W,
 *                              "plain_bytes":B,"first_mono_ms":M,"invalid":I}
 *   POST /sink/quit           ends the process
 *
 * usage: event_sink [PORT]   (0 or none: an ephemeral port); prints
 * "port N" on stdout once listening, on 127.0.0.1 only. Single-threaded,
 * poll(); every connection's state is its own buffer. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define MAX_CONNS 64
#define MAX_APPS 64
#define MAX_BODY (64u << 20)

typedef struct {
    char name[128];
    long long events, posts, wire, plain, invalid;
    double first_mono_ms;
    json_t *ids; /* object used as a set of ids */
} app_stats;

typedef struct {
    int fd;
    char *buf;
    size_t len, cap;
} conn;

static app_stats apps[MAX_APPS];
static size_t app_count;
static int quit;

static double mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static app_stats *app_named(const char *name, size_t len) {
    if (len == 0 || len >= sizeof apps[0].name) return NULL;
    for (size_t i = 0; i < app_count; i++)
        if (strlen(apps[i].name) == len && memcmp(apps[i].name, name, len) == 0) return &apps[i];
    if (app_count == MAX_APPS) return NULL;
    app_stats *a = &apps[app_count++];
    memset(a, 0, sizeof *a);
    memcpy(a->name, name, len);
    a->first_mono_ms = -1;
    a->ids = json_object();
    return a;
}

/* The body as sent, inflated when gzip-encoded; NULL when it is not valid gzip. */
static char *plain_body(const char *body, size_t len, int gzipped, size_t *out_len) {
    if (!gzipped) {
        char *copy = malloc(len + 1);
        memcpy(copy, body, len);
        copy[len] = 0;
        *out_len = len;
        return copy;
    }
    z_stream z = {0};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return NULL;
    size_t cap = len * 8 + 1024, used = 0;
    char *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)body;
    z.avail_in = (uInt)len;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (cap - used < 4096) {
            if (cap >= MAX_BODY) break;
            cap *= 2;
            out = realloc(out, cap);
        }
        z.next_out = (Bytef *)out + used;
        z.avail_out = (uInt)(cap - used - 1);
        rc = inflate(&z, Z_NO_FLUSH);
        used = cap - 1 - z.avail_out;
    }
    inflateEnd(&z);
    if (rc != Z_STREAM_END) { free(out); return NULL; }
    out[used] = 0;
    *out_len = used;
    return out;
}

/* Counts a batch; returns the HTTP status and writes the answer's body. */
static int take_batch(app_stats *a, const char *body, size_t len, int gzipped, char *answer, size_t size) {
    size_t plain_len = 0;
    char *plain = plain_body(body, len, gzipped, &plain_len);
    json_t *doc = plain ? json_loadb(plain, plain_len, 0, NULL) : NULL;
    json_t *events = json_object_get(doc, "events");
    size_t n = json_array_size(events), i;
    json_t *event;
    int valid = json_is_array(events) && n >= 1 && n <= 1000;
    json_array_foreach(events, i, event) {
        const char *id = json_string_value(json_object_get(event, "id"));
        if (!json_is_object(event) || !id || !*id) valid = 0;
    }
    long long accepted = 0, duplicates = 0;
    if (valid) {
        json_array_foreach(events, i, event) {
            const char *id = json_string_value(json_object_get(event, "id"));
            if (json_object_get(a->ids, id)) { duplicates++; continue; }
            json_object_set_new(a->ids, id, json_true());
            accepted++;
        }
        a->events += (long long)n;
        a->wire += (long long)len;
        a->plain += (long long)plain_len;
        a->posts++;
    } else {
        a->invalid++;
    }
    json_decref(doc);
    free(plain);
    if (!valid) {
        snprintf(answer, size, "{\"error\":{\"code\":\"validation\",\"message\":\"not a batch of 1-1000 events with ids\"}}");
        return 400;
    }
    snprintf(answer, size, "{\"accepted\":%lld,\"duplicates\":%lld}", accepted, duplicates);
    return 200;
}

static void stats_of(const char *query, char *answer, size_t size) {
    const char *name = query ? strstr(query, "app=") : NULL;
    app_stats *a = NULL;
    if (name) {
        name += 4;
        a = app_named(name, strcspn(name, "& "));
    }
    if (!a) { snprintf(answer, size, "{}"); return; }
    snprintf(answer, size, "{\"events\":%lld,\"distinct\":%zu,\"posts\":%lld,\"wire_bytes\":%lld,\"plain_bytes\":%lld,"
             "\"first_mono_ms\":%.3f,\"invalid\":%lld}", a->events, json_object_size(a->ids), a->posts, a->wire,
             a->plain, a->first_mono_ms, a->invalid);
}

static const char *reason(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    default: return "Error";
    }
}

static int reply(int fd, int status, const char *body) {
    char head[256];
    size_t len = strlen(body);
    int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     status, reason(status), len);
    struct iovec parts[2] = {{head, (size_t)n}, {(void *)(uintptr_t)body, len}};
    size_t want = (size_t)n + len;
    ssize_t sent = writev(fd, parts, 2);
    /* Answers are small: a short write on a loopback socket means the peer is gone. */
    return sent == (ssize_t)want ? 0 : -1;
}

/* The value of header `name` (case-insensitive) in `head`, or NULL. */
static const char *header(const char *head, const char *name) {
    size_t n = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
        if (strncasecmp(line + 2, name, n) == 0 && line[2 + n] == ':') {
            const char *v = line + 3 + n;
            while (*v == ' ') v++;
            return v;
        }
    }
    return NULL;
}

/* Answers one whole request at the start of c->buf; returns the bytes it
 * took, 0 when the request is not whole yet, -1 to close the connection. */
static long serve_one(conn *c) {
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end) return c->len > 65536 ? -1 : 0;
    *end = 0;
    size_t head_len = (size_t)(end - c->buf) + 4;
    const char *cl = header(c->buf, "Content-Length");
    unsigned long long body_len = cl ? strtoull(cl, NULL, 10) : 0;
    if ((!cl && header(c->buf, "Transfer-Encoding")) || body_len > MAX_BODY) {
        reply(c->fd, cl ? 413 : 411, "{}");  /* the batch protocol sends a length */
        return -1;
    }
    if (c->len < head_len + body_len) { *end = '\r'; return 0; }
    const char *body = c->buf + head_len;
    char answer[512], path[512];
    int status = 404;
    snprintf(answer, sizeof answer, "{}");
    if (sscanf(c->buf, "%*s %511s", path) != 1) return -1;
    char *query = strchr(path, '?');
    if (query) *query++ = 0;
    const char *app = path + strlen("/v1/apps/");
    const char *slash = strncmp(path, "/v1/apps/", 9) == 0 ? strchr(app, '/') : NULL;
    if (strncmp(c->buf, "POST ", 5) == 0 && slash && strcmp(slash, "/events") == 0) {
        app_stats *a = app_named(app, (size_t)(slash - app));
        if (a && a->first_mono_ms < 0) a->first_mono_ms = mono_ms();
        const char *enc = header(c->buf, "Content-Encoding");
        if (a) status = take_batch(a, body, (size_t)body_len, enc && strncasecmp(enc, "gzip", 4) == 0, answer, sizeof answer);
    } else if (strcmp(path, "/sink/stats") == 0) {
        stats_of(query, answer, sizeof answer);
        status = 200;
    } else if (strcmp(path, "/sink/quit") == 0) {
        quit = 1;
        status = 200;
    }
    if (reply(c->fd, status, answer) != 0) return -1;
    return (long)(head_len + body_len);
}

/* Reads what the socket has and answers every whole request; -1: close. */
static int serve(conn *c) {
    if (c->cap - c->len < 65536) {
        c->cap = c->cap ? c->cap * 2 : 262144;
        if (c->cap > MAX_BODY * 2) return -1;
        c->buf = realloc(c->buf, c->cap);
    }
    ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len - 1);
    if (n <= 0) return (n < 0 && errno == EINTR) ? 0 : -1;
    c->len += (size_t)n;
    for (;;) {
        long took = serve_one(c);
        if (took < 0) return -1;
        if (took == 0) return 0;
        memmove(c->buf, c->buf + took, c->len - (size_t)took);
        c->len -= (size_t)took;
    }
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0) {
        perror("event_sink: listen");
        exit(2);
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    printf("port %d\n", ntohs(sa.sin_port));
    fflush(stdout);
    return fd;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    int listener = listen_on(argc > 1 ? atoi(argv[1]) : 0);
    conn conns[MAX_CONNS] = {0};
    size_t count = 0;
    while (!quit) {
        struct pollfd fds[MAX_CONNS + 1];
        fds[0] = (struct pollfd){.fd = listener, .events = POLLIN};
        for (size_t i = 0; i < count; i++) fds[i + 1] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
        if (poll(fds, count + 1, -1) < 0 && errno != EINTR) return 2;
        for (size_t i = count; i-- > 0;) {
            if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) || serve(&conns[i]) == 0) continue;
            close(conns[i].fd);
            free(conns[i].buf);
            conns[i] = conns[--count];
        }
        if ((fds[0].revents & POLLIN) && count < MAX_CONNS) {
            int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC), on = 1;
            if (fd >= 0) {
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
                conns[count++] = (conn){.fd = fd};
            }
        }
    }
    return 0;
}
