/* HTTP/2 against HTTP/1.1 over TLS: the same client work through two HTTPS
 * fronts of one dev server (devserver/h2front, Go), one that speaks HTTP/2
 * and one started with --h1-only. The library offers h2 in ALPN to both;
 * only the server's answer differs.
 *
 * Per round and protocol (the order alternates between rounds), one fresh
 * client under a fresh App ID, the way an app runs:
 *   1. starts the live config stream (it holds a connection of its own);
 *   2. makes BENCH_HTTP2_REQUESTS reads one after another
 *      (appnorth_client_list_boards), each timed; the first one, which
 *      opens the connection (TCP + TLS + ALPN), is reported apart;
 *   3. flushes BENCH_HTTP2_EVENTS queued events (100 per batch), timed from
 *      appnorth_events_flush() to its return with the queue empty.
 * Connections are counted at the front: its log names the connection of
 * every request, so the distinct ids of the round's requests are the TLS
 * connections the client opened. The same log proves the protocol.
 *
 * usage: bench_http2 H1_URL H1_LOG H2_URL H2_LOG CA_FILE
 * env:   BENCH_HTTP2_REQUESTS (300), BENCH_HTTP2_EVENTS (2000), BENCH_HTTP2_ROUNDS (4)
 */
#include "bench.h"

typedef struct {
    const char *name, *tag, *url, *log;
} front;

typedef struct {
    double read_p50_ms[16], read_p99_ms[16], first_ms[16], flush_eps[16], connections[16];
    long lines, wrong_protocol;
} results;

static long file_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* The front's log lines from byte `from`, for App ID `app`: how many, how
 * many not over `protocol`, how many distinct connections, and whether the
 * config stream is among them. */
static void scan_log(const char *path, long from, const char *app, const char *protocol, long *lines,
                     long *wrong, int *connections, int *stream) {
    FILE *f = fopen(path, "r");
    if (!f) die("open %s", path);
    fseek(f, from, SEEK_SET);
    char line[1024], needle[256], stream_needle[256];
    snprintf(needle, sizeof needle, " /v1/apps/%s/", app);
    snprintf(stream_needle, sizeof stream_needle, " /v1/apps/%s/config/stream ", app);
    long seen[256];
    int distinct = 0;
    *lines = *wrong = 0;
    *stream = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, needle)) continue;
        (*lines)++;
        if (strncmp(line, protocol, strlen(protocol)) != 0) (*wrong)++;
        if (strstr(line, stream_needle)) *stream = 1;
        const char *conn = strstr(line, " conn=");
        long id = conn ? atol(conn + 6) : -1;
        int known = 0;
        for (int i = 0; i < distinct; i++) known |= seen[i] == id;
        if (!known && distinct < 256) seen[distinct++] = id;
    }
    fclose(f);
    *connections = distinct;
}

static appnorth_client *tls_client(const char *url, const char *app, const char *ca) {
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client *c = NULL;
    CHECK(appnorth_client_options_set_api_url(o, url, &E));
    CHECK(appnorth_client_options_set_app_id(o, app, &E));
    CHECK(appnorth_client_options_set_timeouts(o, 30000, 30000, &E));
    CHECK(appnorth_client_options_set_ca_file(o, ca, &E));
    CHECK(appnorth_client_new(o, &c, &E));
    appnorth_client_options_free(o);
    return c;
}

static void run_round(const front *fr, const char *ca, int round, int requests, int events, results *out) {
    char app[128];
    snprintf(app, sizeof app, "bench-%s-%d-%d", fr->tag, (int)getpid(), round);
    long log_start = file_size(fr->log);
    appnorth_client *client = tls_client(fr->url, app, ca);

    char *config_dir = scratch_dir("h2-config");
    appnorth_config_options *co = appnorth_config_options_new();
    appnorth_config *config = NULL;
    CHECK(appnorth_config_options_set_client(co, client, &E));
    CHECK(appnorth_config_options_set_data_dir(co, config_dir, &E));
    CHECK(appnorth_config_new(co, &config, &E));
    appnorth_config_options_free(co);
    CHECK(appnorth_config_start_live(config, &E));
    /* Until the stream is connected (seen at the front), so that it holds
     * its connection through the reads and the flush. */
    long lines = 0, wrong = 0;
    int connections = 0, stream = 0;
    for (uint64_t deadline = now_ns() + 30000000000ull; !stream && now_ns() < deadline; sleep_ms(10))
        scan_log(fr->log, log_start, app, fr->name, &lines, &wrong, &connections, &stream);
    if (!stream) die("%s: the config stream did not connect", fr->name);

    double *ms = malloc((size_t)requests * sizeof *ms);
    for (int i = 0; i < requests; i++) {
        char *json = NULL;
        uint64_t t0 = now_ns();
        CHECK(appnorth_client_list_boards(client, &json, &E));
        ms[i] = (double)(now_ns() - t0) / 1e6;
        appnorth_string_free(json);
    }
    /* The stream connected first, so read 0 already had a connection to
     * open; the figure is "the first read on a fresh connection". */
    out->first_ms[round] = ms[0];
    out->read_p50_ms[round] = quantile(ms + 1, (size_t)requests - 1, 0.5);
    out->read_p99_ms[round] = quantile(ms + 1, (size_t)requests - 1, 0.99);
    free(ms);

    char *events_dir = scratch_dir("h2-events");
    appnorth_events *ev = make_events(client, events_dir, events + 1, events + 1, 3);
    CHECK(appnorth_events_set_network_type(ev, APPNORTH_NETWORK_WIFI, &E));
    int32_t queued = 0;
    for (int i = 0; i < events; i++) CHECK(appnorth_events_track(ev, BENCH_EVENT_NAME, BENCH_PROPERTIES, &queued, &E));
    uint64_t t0 = now_ns();
    CHECK(appnorth_events_flush(ev, 300000, &E));
    out->flush_eps[round] = (double)events / ((double)(now_ns() - t0) / 1e9);
    char *stats = NULL;
    CHECK(appnorth_events_stats(ev, &stats, &E));
    if (!strstr(stats, "\"queued\":0,")) die("flush left events: %s", stats);
    appnorth_string_free(stats);
    appnorth_events_free(ev);
    appnorth_config_free(config);
    appnorth_client_free(client);
    remove_tree(events_dir);
    remove_tree(config_dir);

    scan_log(fr->log, log_start, app, fr->name, &lines, &wrong, &connections, &stream);
    out->connections[round] = connections;
    out->lines += lines;
    out->wrong_protocol += wrong;
    fprintf(stderr, "http2 round %d %s: first read %.2f ms, reads p50 %.3f ms p99 %.3f ms, flush %.0f events/s, "
            "%d connections, %ld requests (%ld not %s)\n", round + 1, fr->name, out->first_ms[round],
            out->read_p50_ms[round], out->read_p99_ms[round], out->flush_eps[round], connections, lines, wrong,
            fr->name);
}

static void write_side(jw *w, const char *key, const results *r, int rounds) {
    size_t n = (size_t)rounds;
    jw_open(w, key);
    jw_num(w, "first_read_ms", median(r->first_ms, n));
    jw_num(w, "read_p50_ms", median(r->read_p50_ms, n));
    jw_num(w, "read_p99_ms", median(r->read_p99_ms, n));
    jw_num(w, "flush_events_per_s", median(r->flush_eps, n));
    jw_num(w, "connections", median(r->connections, n));
    jw_int(w, "requests_logged", r->lines);
    jw_int(w, "requests_over_other_protocol", r->wrong_protocol);
    jw_array(w, "round_flush_events_per_s", r->flush_eps, n);
    jw_array(w, "round_read_p50_ms", r->read_p50_ms, n);
    jw_close(w);
}

int main(int argc, char **argv) {
    if (argc != 6) die("usage: bench_http2 H1_URL H1_LOG H2_URL H2_LOG CA_FILE");
    /* The front logs r.Proto: "HTTP/1.1" or "HTTP/2.0". */
    front fronts[2] = {{"HTTP/1.1", "h1", argv[1], argv[2]}, {"HTTP/2.0", "h2", argv[3], argv[4]}};
    const char *ca = argv[5];
    int requests = env_int("BENCH_HTTP2_REQUESTS", 300);
    int events = env_int("BENCH_HTTP2_EVENTS", 2000);
    int rounds = env_int("BENCH_HTTP2_ROUNDS", 4);
    if (requests < 10 || requests > 100000 || events < 100 || events > 100000 || rounds < 1 || rounds > 16)
        die("bad BENCH_HTTP2_REQUESTS / BENCH_HTTP2_EVENTS / BENCH_HTTP2_ROUNDS");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    results r[2];
    memset(r, 0, sizeof r);
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k < 2; k++) {
            int side = (round + k) % 2;
            run_round(&fronts[side], ca, round, requests, events, &r[side]);
        }
    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "http2");
    jw_int(&w, "rounds", rounds);
    jw_int(&w, "requests", requests);
    jw_int(&w, "events", events);
    write_side(&w, "h1", &r[0], rounds);
    write_side(&w, "h2", &r[1], rounds);
    jw_end(&w);
    curl_global_cleanup();
    return 0;
}
