/*
 * One process of the outage fleet (Tests/fleet/fleet.py drives several).
 *
 * Runs COUNT independent library instances, as COUNT installs of an app
 * would: each has its own client (its own credential), its own data
 * directory, an events queue and a live config stream. Commands arrive on
 * stdin, one per line, and each is answered on stdout:
 *
 *   (start)   -> "ready N"      N configs received the published config
 *   "track"   -> "tracked N"    every client queued EVENTS events
 *                               {"client": I, "n": K}, K = 0..EVENTS-1
 *   "quit"    -> "done {...}"   handles freed; counts as JSON
 *
 * Intervals are the seed's shapes, scaled down by the driver (a retry base
 * of 100 ms instead of 1 s, ...). JITTER 0 sets both jitter options to 0 %
 * (1 keeps the defaults, 20 % and 50 %), to show what jitter does.
 *
 * The installs open at random moments spread over OPEN_SPREAD_MS (the
 * driver passes one flush interval): a real fleet's apps started at
 * unrelated times, so their flush timers, which count from the open, are
 * out of phase. Opening them all at once would line the timers up and make
 * a burst no real fleet makes.
 *
 * usage: fleet_client URL APP FIRST COUNT DATA_ROOT JITTER EVENTS
 *                     RETRY_BASE_MS FLUSH_MS BACKOFF_BASE_MS BACKOFF_MAX_MS POLL_MS OPEN_SPREAD_MS
 */
#include <appnorth.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    appnorth_client *client;
    appnorth_events *events;
    appnorth_config *config;
    atomic_int updates;
} install;

static int failures;

static void fail(const char *what, int index, int32_t rc, const appnorth_error *err) {
    failures++;
    fprintf(stderr, "fleet_client: %s (client %d): %s: %s\n", what, index, appnorth_status_str(rc),
            err ? err->message : "");
}

#define TRY(what, index, call)                         \
    do {                                               \
        appnorth_error err_ = {0};                     \
        int32_t rc_ = (call);                          \
        if (rc_ != APPNORTH_OK) {                      \
            fail(what, index, rc_, &err_);             \
            return -1;                                 \
        }                                              \
    } while (0)
#define ERR (&err_)

static void on_config(const char *config_json, const char *changed_keys_json, int32_t tier, void *user_data) {
    (void)config_json;
    (void)changed_keys_json;
    (void)tier;
    atomic_fetch_add(&((install *)user_data)->updates, 1);
}

static long arg(char **argv, int i) { return strtol(argv[i], NULL, 10); }

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int open_install(install *in, int index, char **argv) {
    const char *url = argv[1], *app = argv[2], *root = argv[5];
    int32_t jitter = (int32_t)arg(argv, 6);
    char email[64], token[64], dir[4096];
    snprintf(email, sizeof email, "c%d@fleet.test", index);
    snprintf(token, sizeof token, "token-%d", index);
    snprintf(dir, sizeof dir, "%s/c%d", root, index);

    appnorth_client_options *co = appnorth_client_options_new();
    TRY("client options", index, appnorth_client_options_set_api_url(co, url, ERR));
    TRY("client options", index, appnorth_client_options_set_app_id(co, app, ERR));
    TRY("client options", index, appnorth_client_options_set_credential(co, email, token, ERR));
    TRY("client", index, appnorth_client_new(co, &in->client, ERR));
    appnorth_client_options_free(co);

    /* Only the timer flushes (a few events never reach the threshold). */
    appnorth_events_options *eo = appnorth_events_options_new();
    TRY("events options", index, appnorth_events_options_set_client(eo, in->client, ERR));
    TRY("events options", index, appnorth_events_options_set_data_dir(eo, dir, ERR));
    TRY("events options", index, appnorth_events_options_set_flush_policy(eo, (int32_t)arg(argv, 9), 1000, ERR));
    TRY("events options", index, appnorth_events_options_set_retry(eo, (int32_t)arg(argv, 8), 3, 120000, 5, ERR));
    TRY("events options", index, appnorth_events_options_set_retry_jitter(eo, jitter ? 20 : 0, ERR));
    TRY("events", index, appnorth_events_new(eo, &in->events, ERR));
    appnorth_events_options_free(eo);

    appnorth_config_options *fo = appnorth_config_options_new();
    TRY("config options", index, appnorth_config_options_set_client(fo, in->client, ERR));
    TRY("config options", index, appnorth_config_options_set_data_dir(fo, dir, ERR));
    TRY("config options", index, appnorth_config_options_set_poll_interval_ms(fo, (int32_t)arg(argv, 12), ERR));
    TRY("config options", index,
        appnorth_config_options_set_reconnect_backoff_ms(fo, (int32_t)arg(argv, 10), (int32_t)arg(argv, 11), ERR));
    TRY("config options", index, appnorth_config_options_set_reconnect_jitter(fo, jitter ? 50 : 0, ERR));
    TRY("config", index, appnorth_config_new(fo, &in->config, ERR));
    appnorth_config_options_free(fo);
    int64_t token_id = 0;
    TRY("listener", index, appnorth_config_add_listener(in->config, on_config, in, &token_id, ERR));
    TRY("start live", index, appnorth_config_start_live(in->config, ERR));
    return 0;
}

static int track_all(install *fleet, int first, int count, int events) {
    int tracked = 0;
    for (int i = 0; i < count; i++) {
        for (int k = 0; k < events; k++) {
            char props[96];
            snprintf(props, sizeof props, "{\"client\":%d,\"n\":%d}", first + i, k);
            int32_t queued = 0;
            appnorth_error err = {0};
            int32_t rc = appnorth_events_track(fleet[i].events, "fleet_event", props, &queued, &err);
            if (rc != APPNORTH_OK || !queued) fail("track", first + i, rc, &err);
            else tracked++;
        }
    }
    return tracked;
}

int main(int argc, char **argv) {
    if (argc != 14) {
        fprintf(stderr, "usage: fleet_client URL APP FIRST COUNT DATA_ROOT JITTER EVENTS RETRY_BASE_MS FLUSH_MS "
                        "BACKOFF_BASE_MS BACKOFF_MAX_MS POLL_MS OPEN_SPREAD_MS\n");
        return 2;
    }
    int first = (int)arg(argv, 3), count = (int)arg(argv, 4), events = (int)arg(argv, 7);
    double spread_s = (double)arg(argv, 13) / 1000;
    install *fleet = calloc((size_t)count, sizeof *fleet);
    double *open_at = calloc((size_t)count, sizeof *open_at);
    if (!fleet || !open_at) return 1;
    /* Random open times, in order: the i-th install opens at the i-th smallest. */
    srand48(first + 1);
    for (int i = 0; i < count; i++) open_at[i] = drand48() * spread_s;
    qsort(open_at, (size_t)count, sizeof *open_at, by_value);
    double started = now_s();
    int opened = 0;
    for (; opened < count; opened++) {
        double wait = started + open_at[opened] - now_s();
        if (wait > 0) nanosleep(&(struct timespec){(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)}, NULL);
        atomic_init(&fleet[opened].updates, 0);
        if (open_install(&fleet[opened], first + opened, argv) != 0) break;
    }
    free(open_at);
    double open_s = now_s() - started;

    /* Ready once every config has its first remote document (60 s at most). */
    int live = 0;
    for (double deadline = now_s() + 60; now_s() < deadline;) {
        live = 0;
        for (int i = 0; i < opened; i++) live += atomic_load(&fleet[i].updates) > 0;
        if (live == count) break;
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    printf("ready %d\n", live);
    fflush(stdout);

    int tracked = 0;
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "track", 5) == 0 && opened == count) {
            tracked += track_all(fleet, first, count, events);
            printf("tracked %d\n", tracked);
            fflush(stdout);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        }
    }
    int updates = 0;
    for (int i = 0; i < opened; i++) {
        updates += atomic_load(&fleet[i].updates);
        appnorth_config_free(fleet[i].config);
        appnorth_events_free(fleet[i].events);
        appnorth_client_free(fleet[i].client);
    }
    free(fleet);
    printf("done {\"clients\":%d,\"opened\":%d,\"tracked\":%d,\"config_updates\":%d,\"failures\":%d,"
           "\"open_seconds\":%.3f}\n", count, opened, tracked, updates, failures, open_s);
    fflush(stdout);
    return failures ? 1 : 0;
}
