/* Flush throughput: 10,000 queued events uploaded to the local dev server,
 * against plain libcurl POSTs of the same batch bodies to the same server.
 *
 *   library: an events handle (Wi-Fi: 100 events per batch, no automatic
 *            flush before 10,000 events wait, short retries) queues 9,999
 *            events untimed; the clock starts before the 10,000th track(),
 *            which reaches the threshold and wakes the upload thread, and
 *            stops when appnorth_events_flush() returns with the queue empty.
 *   curl:    the same 100 bodies ({"events":[...100 stored payloads...]},
 *            read from the library's database before the upload; the last
 *            event is a copy of the 9,999th with a fresh id) POSTed one after
 *            another through one easy handle (keep-alive), with the headers
 *            the library sends, to the same server under another App ID, so
 *            the server's event-id deduplication never makes it cheaper.
 *
 * Rounds alternate which side goes first (when curl goes first it sends the
 * previous round's bodies, under a new App ID).
 *
 * The receiver is either the dev server (one Python process storing every
 * event in SQLite: the bottleneck of both sides, so the ratio shows ~1 and
 * single rounds swing) or bench/c/event_sink.c, a native server that reads,
 * inflates, parses and counts each batch and answers at once: the figure
 * the library is judged by (RECEIVER "sink"). Against the sink each side's
 * events are checked at the receiver: every one arrived, exactly once.
 *
 * Each side also counts the TCP connections it opened (client sockets to the
 * server's port in /proc/net/tcp, established or in TIME_WAIT, before and
 * after): keep-alive should make that 1.
 *
 * The library's side also reports when its first request reached the
 * server after the clock started (the request log's `mono_ms`, on the same
 * CLOCK_MONOTONIC as now_ns): the journal import before the first batch.
 *
 * Bytes on the wire: the library gzips every batch (Content-Encoding: gzip);
 * curl sends the same bodies uncompressed. After each library flush the dev
 * server's request log gives, per event, the request body bytes as sent
 * (`wire_size`) and as decoded (`body_size`, what an uncompressed upload
 * sends): "after" and "before" compression.
 *
 * usage: bench_flush SERVER_URL [sink]   env: BENCH_FLUSH_EVENTS (10000),
 *        BENCH_FLUSH_ROUNDS (5), BENCH_FLUSH_GZIP (1; 0 uploads uncompressed)
 */
#include "bench.h"

#include <jansson.h>
#include <sqlite3.h>

#include "../../Tests/c/journal.h"

typedef struct {
    char **bodies;
    size_t *lengths;
    size_t count;
    size_t events;
} batches;

typedef struct {
    char **payloads;
    size_t *sizes;
    size_t n, cap;
} payload_list;

static void add_payload(const unsigned char *bytes, size_t len, void *ctx) {
    payload_list *l = ctx;
    if (l->n == l->cap) die("too many events");
    l->sizes[l->n] = len;
    l->payloads[l->n] = malloc(len + 1);
    memcpy(l->payloads[l->n], bytes, len);
    l->payloads[l->n][len] = 0;
    l->n++;
}

/* Reads every queued payload (table rows oldest first, then the journal's)
 * and splices them into bodies of
 * `per_batch` events, exactly as the library's upload does. `extra` more
 * events are synthesised from the last payload with fresh ids. */
static batches read_batches(const char *dir, size_t per_batch, size_t extra) {
    char path[4200];
    snprintf(path, sizeof path, "%s/appnorth.sqlite3", dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) die("open %s", path);
    if (sqlite3_prepare_v2(db, "SELECT payload FROM events ORDER BY seq", -1, &st, NULL) != SQLITE_OK)
        die("select: %s", sqlite3_errmsg(db));
    size_t cap = 16384;
    payload_list list = {malloc(cap * sizeof(char *)), malloc(cap * sizeof(size_t)), 0, cap};
    while (sqlite3_step(st) == SQLITE_ROW)
        add_payload(sqlite3_column_blob(st, 0), (size_t)sqlite3_column_bytes(st, 0), &list);
    sqlite3_finalize(st);
    sqlite3_close(db);
    journal_each(dir, add_payload, &list);
    char **payloads = list.payloads;
    size_t *sizes = list.sizes, n = list.n;
    if (n == 0) die("no queued events to read");
    for (size_t k = 0; k < extra; k++) {
        if (n == cap) die("too many events");
        sizes[n] = sizes[n - 1];
        payloads[n] = malloc(sizes[n] + 1);
        memcpy(payloads[n], payloads[n - 1], sizes[n] + 1);
        /* {"id":"xxxxxxxx-... : change the last 12 hex digits of the id */
        snprintf(payloads[n] + 7 + 24, 13, "%012zx", (size_t)0xbe0000000000ull + k);
        payloads[n][7 + 36] = '"';
        n++;
    }
    batches b = {malloc((n / per_batch + 1) * sizeof(char *)), malloc((n / per_batch + 1) * sizeof(size_t)), 0, n};
    for (size_t i = 0; i < n; i += per_batch) {
        size_t len = 16;
        for (size_t j = i; j < n && j < i + per_batch; j++) len += sizes[j] + 1;
        char *body = malloc(len);
        size_t at = 0;
        at += (size_t)sprintf(body + at, "{\"events\":[");
        for (size_t j = i; j < n && j < i + per_batch; j++) {
            if (j > i) body[at++] = ',';
            memcpy(body + at, payloads[j], sizes[j]);
            at += sizes[j];
        }
        at += (size_t)sprintf(body + at, "]}");
        b.bodies[b.count] = body;
        b.lengths[b.count] = at;
        b.count++;
    }
    for (size_t i = 0; i < n; i++) free(payloads[i]);
    free(payloads);
    free(sizes);
    return b;
}

/* Client-side TCP sockets to `port` (established or in TIME_WAIT, which
 * lasts a minute after a close): the difference across a run counts the
 * connections that run opened. Loopback sockets of this network namespace. */
static int client_sockets_to(int port) {
    const char *files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
    int count = 0;
    for (int f = 0; f < 2; f++) {
        FILE *in = fopen(files[f], "r");
        if (!in) continue;
        char line[512];
        while (fgets(line, sizeof line, in)) {
            char local[128], remote[128];
            unsigned state = 0;
            if (sscanf(line, " %*d: %127s %127s %x", local, remote, &state) != 3) continue;
            const char *colon = strrchr(remote, ':');
            if (colon && (int)strtol(colon + 1, NULL, 16) == port && (state == 0x01 || state == 0x06)) count++;
        }
        fclose(in);
    }
    return count;
}

static int server_port(const char *server) {
    const char *colon = strrchr(server, ':');
    return colon ? atoi(colon + 1) : 80;
}

/* Against the sink (`sink`): what it counted of `app`'s batches, which
 * must be `expected` distinct events; the same figures as below. */
static int sink;

static void sink_counts(const char *server, const char *app, size_t expected, double *wire, double *plain,
                        double *first_mono_ms) {
    char path[256], *text = NULL;
    snprintf(path, sizeof path, "/sink/stats?app=%s", app);
    if (admin_request_text(server, "GET", path, NULL, &text) != 200 || !text) die("no sink stats for %s", app);
    json_t *stats = json_loads(text, 0, NULL);
    free(text);
    json_int_t distinct = json_integer_value(json_object_get(stats, "distinct"));
    json_int_t events = json_integer_value(json_object_get(stats, "events"));
    if (distinct != (json_int_t)expected || events != (json_int_t)expected)
        die("the sink received %lld events (%lld distinct) of %s, not %zu", (long long)events, (long long)distinct, app,
            expected);
    *wire = (double)json_integer_value(json_object_get(stats, "wire_bytes"));
    *plain = (double)json_integer_value(json_object_get(stats, "plain_bytes"));
    *first_mono_ms = json_number_value(json_object_get(stats, "first_mono_ms"));
    json_decref(stats);
}

static size_t discard(char *ptr, size_t size, size_t n, void *user) {
    (void)ptr;
    admin_buffer *b = user;
    if (b) admin_write(ptr, size, n, b);
    return size * n;
}

/* POSTs every body through one easy handle; returns seconds. */
static double post_with_curl(const char *server, const char *app, const batches *b, int *out_connections) {
    char url[1024];
    snprintf(url, sizeof url, "%s/v1/apps/%s/events", server, app);
    CURL *h = curl_easy_init();
    struct curl_slist *headers = NULL;
    headers = curl_slist_append(headers, "Accept: application/json");
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "appnorth-bench-curl");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    admin_buffer reply = {0};
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &reply);
    int sockets_before = client_sockets_to(server_port(server));
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < b->count; i++) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)b->lengths[i]);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, b->bodies[i]);
        reply.len = 0;
        CURLcode rc = curl_easy_perform(h);
        long status = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (rc != CURLE_OK || status != 200)
            die("curl POST %zu: %s, HTTP %ld: %s", i, curl_easy_strerror(rc), status, reply.data ? reply.data : "");
    }
    double seconds = (double)(now_ns() - t0) / 1e9;
    *out_connections = client_sockets_to(server_port(server)) - sockets_before;
    if (sink) {
        double wire, plain, first;
        sink_counts(server, app, b->events, &wire, &plain, &first);
    }
    free(reply.data);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return seconds;
}

/* Request body bytes of the logged event POSTs of `app`: as sent (wire)
 * and decoded (plain), and the earliest one's start on the server
 * (`mono_ms`, CLOCK_MONOTONIC like now_ns); dies when the server logged none. */
static void event_body_bytes(const char *server, const char *app, size_t expected, double *wire, double *plain,
                             double *first_mono_ms) {
    if (sink) {
        sink_counts(server, app, expected, wire, plain, first_mono_ms);
        return;
    }
    char *text = NULL;
    if (admin_request_text(server, "GET", "/admin/requests", NULL, &text) != 200 || !text) die("no request log");
    json_t *log = json_loads(text, 0, NULL);
    free(text);
    char path[256];
    snprintf(path, sizeof path, "/v1/apps/%s/events", app);
    size_t i, posts = 0;
    json_t *entry;
    *wire = *plain = 0;
    *first_mono_ms = -1;
    json_array_foreach(json_object_get(log, "requests"), i, entry) {
        const char *p = json_string_value(json_object_get(entry, "path"));
        if (!p || strcmp(p, path) != 0) continue;
        *wire += (double)json_integer_value(json_object_get(entry, "wire_size"));
        *plain += (double)json_integer_value(json_object_get(entry, "body_size"));
        double mono = json_number_value(json_object_get(entry, "mono_ms"));
        if (*first_mono_ms < 0 || mono < *first_mono_ms) *first_mono_ms = mono;
        posts++;
    }
    json_decref(log);
    if (posts == 0) die("the request log has no event uploads of %s", app);
}

/* Queues `n` events (the last one timed with the upload), flushes, returns
 * seconds; fills *out_batches with the bodies for the curl side. */
static double flush_with_library(const char *server, const char *app, size_t n, batches *out_batches,
                                 int *out_connections, double *out_wire_per_event, double *out_plain_per_event,
                                 double *out_first_request_ms) {
    appnorth_client_options *co = appnorth_client_options_new();
    appnorth_client *client = NULL;
    CHECK(appnorth_client_options_set_api_url(co, server, &E));
    CHECK(appnorth_client_options_set_app_id(co, app, &E));
    CHECK(appnorth_client_options_set_timeouts(co, 10000, 10000, &E));
    /* BENCH_FLUSH_GZIP=0: upload uncompressed, to see what compression costs. */
    CHECK(appnorth_client_options_set_compression(co, env_int("BENCH_FLUSH_GZIP", 1) ? 1 : 0, &E));
    CHECK(appnorth_client_new(co, &client, &E));
    appnorth_client_options_free(co);
    char *dir = scratch_dir("flush");
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events *ev = NULL;
    CHECK(appnorth_events_options_set_client(o, client, &E));
    CHECK(appnorth_events_options_set_data_dir(o, dir, &E));
    CHECK(appnorth_events_options_set_flush_policy(o, 86400000, (int32_t)n, &E));
    CHECK(appnorth_events_options_set_limits(o, 10000000, (int64_t)1 << 30, 65536, &E));
    CHECK(appnorth_events_options_set_retry(o, 50, 3, 1000, 100, &E));
    CHECK(appnorth_events_new(o, &ev, &E));
    appnorth_events_options_free(o);
    CHECK(appnorth_events_set_network_type(ev, APPNORTH_NETWORK_WIFI, &E));
    int32_t queued = 0;
    for (size_t i = 0; i + 1 < n; i++) CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
    *out_batches = read_batches(dir, 100, 1);

    int sockets_before = client_sockets_to(server_port(server));
    uint64_t t0 = now_ns();
    CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
    CHECK(appnorth_events_flush(ev, 300000, &E));
    double seconds = (double)(now_ns() - t0) / 1e9;
    *out_connections = client_sockets_to(server_port(server)) - sockets_before;

    char *stats = NULL;
    CHECK(appnorth_events_stats(ev, &stats, &E));
    if (!strstr(stats, "\"queued\":0,") && !strstr(stats, "\"queued\": 0,")) die("flush left events: %s", stats);
    appnorth_string_free(stats);
    double wire = 0, plain = 0, first_mono_ms = 0;
    event_body_bytes(server, app, n, &wire, &plain, &first_mono_ms);
    *out_first_request_ms = first_mono_ms - (double)t0 / 1e6;
    *out_wire_per_event = wire / (double)n;
    *out_plain_per_event = plain / (double)n;
    appnorth_events_free(ev);
    appnorth_client_free(client);
    remove_tree(dir);
    return seconds;
}

static void free_batches(batches *b) {
    for (size_t i = 0; i < b->count; i++) free(b->bodies[i]);
    free(b->bodies);
    free(b->lengths);
}

int main(int argc, char **argv) {
    const char *server = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    if (!server) die("usage: bench_flush SERVER_URL [sink]");
    sink = argc > 2 && strcmp(argv[2], "sink") == 0;
    size_t n = (size_t)env_int("BENCH_FLUSH_EVENTS", 10000);
    int rounds = env_int("BENCH_FLUSH_ROUNDS", 5);
    if (n < 200 || n > 10000 || rounds < 1 || rounds > 16) die("bad BENCH_FLUSH_EVENTS / BENCH_FLUSH_ROUNDS");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (admin_request(server, "GET", sink ? "/sink/stats" : "/admin/health", NULL, NULL) != 200)
        die("no %s at %s", sink ? "event sink" : "dev server", server);

    double lib_eps[16], curl_eps[16], ratio[16], wire_pe[16], plain_pe[16], first_ms[16];
    int lib_conn[16], curl_conn[16];
    size_t batch_count = 0;
    batches b = {0};
    int have = 0;
    for (int r = 0; r < rounds; r++) {
        char lib_app[128], curl_app[128];
        snprintf(lib_app, sizeof lib_app, "bench-flush-lib-%d-%d", (int)getpid(), r);
        snprintf(curl_app, sizeof curl_app, "bench-flush-curl-%d-%d", (int)getpid(), r);
        double lib_s, curl_s;
        if (r % 2 == 0) {
            if (have) free_batches(&b);
            lib_s = flush_with_library(server, lib_app, n, &b, &lib_conn[r], &wire_pe[r], &plain_pe[r], &first_ms[r]);
            have = 1;
            curl_s = post_with_curl(server, curl_app, &b, &curl_conn[r]);
        } else {
            /* curl first, with the previous round's bodies (posted before
             * under another App ID, so nothing is a duplicate here). */
            curl_s = post_with_curl(server, curl_app, &b, &curl_conn[r]);
            free_batches(&b);
            lib_s = flush_with_library(server, lib_app, n, &b, &lib_conn[r], &wire_pe[r], &plain_pe[r], &first_ms[r]);
        }
        batch_count = b.count;
        lib_eps[r] = (double)n / lib_s;
        curl_eps[r] = (double)n / curl_s;
        ratio[r] = lib_eps[r] / curl_eps[r];
        fprintf(stderr, "flush round %d: library %.0f events/s (%.3f s, %d TCP connections), curl %.0f events/s "
                "(%.3f s, %d), ratio %.3f; first request %.1f ms after the clock started; %.1f body bytes per event "
                "gzipped, %.1f plain\n", r + 1, lib_eps[r], lib_s, lib_conn[r], curl_eps[r], curl_s, curl_conn[r], ratio[r],
                first_ms[r], wire_pe[r], plain_pe[r]);
    }

    free_batches(&b);
    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "flush");
    jw_string(&w, "receiver", sink ? "sink" : "devserver");
    jw_int(&w, "events", (long long)n);
    jw_int(&w, "batches", (long long)batch_count);
    jw_int(&w, "rounds", rounds);
    jw_num(&w, "library_events_per_s", median(lib_eps, (size_t)rounds));
    jw_num(&w, "curl_events_per_s", median(curl_eps, (size_t)rounds));
    jw_num(&w, "ratio", median(ratio, (size_t)rounds));
    jw_num(&w, "library_first_request_ms", median(first_ms, (size_t)rounds));
    double lc[16], cc[16];
    for (int r = 0; r < rounds; r++) { lc[r] = lib_conn[r]; cc[r] = curl_conn[r]; }
    jw_num(&w, "library_connections", median(lc, (size_t)rounds));
    jw_num(&w, "curl_connections", median(cc, (size_t)rounds));
    jw_num(&w, "wire_bytes_per_event_gzip", median(wire_pe, (size_t)rounds));
    jw_num(&w, "wire_bytes_per_event_plain", median(plain_pe, (size_t)rounds));
    jw_array(&w, "round_library_events_per_s", lib_eps, (size_t)rounds);
    jw_array(&w, "round_curl_events_per_s", curl_eps, (size_t)rounds);
    jw_array(&w, "round_ratio", ratio, (size_t)rounds);
    jw_num(&w, "ratio_min", quantile(ratio, (size_t)rounds, 0));
    jw_num(&w, "ratio_max", quantile(ratio, (size_t)rounds, 1));
    jw_end(&w);
    curl_global_cleanup();
    return 0;
}
