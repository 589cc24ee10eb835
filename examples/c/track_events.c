/* Analytics events that outlive a lost connection and a restart:
 *
 *   1. Lose connectivity and track three events: each is on disk (SQLite,
 *      WAL) before appnorth_events_track() returns. A flush fails with a
 *      network error and keeps them.
 *   2. "Restart the app": free the handle and open the same data directory
 *      again. The three events are still queued.
 *   3. Reconnect, come back to the foreground, flush: they are delivered
 *      once, and the statistics show an empty queue.
 *
 * usage: track_events API_URL APP_ID DATA_DIR
 *   e.g. scripts/with-devserver.sh \
 *          sh -c 'build/examples/track_events "$APPNORTH_TEST_SERVER" demo /tmp/te-data'
 *
 * DEV SERVER ONLY: to "lose connectivity" without unplugging anything, the
 * example asks the local dev server (devserver/, docs/protocol.md) to drop
 * every API connection (POST /admin/faults {"drop":true}); "reconnecting"
 * clears the faults (DELETE /admin/faults). For the library that is a real
 * network failure: the request goes out and no answer comes back, and the
 * client keeps its real URL for the later upload. A real app does none of
 * this: it reports the network with appnorth_events_set_network_type() and
 * calls appnorth_events_foreground() when it comes back to the foreground.
 * The admin calls use a few lines of plain sockets so the example needs
 * nothing but libappnorth and jansson.
 */
/* POSIX 2008 (sockets, clock_gettime, mkdtemp, nanosleep) under strict -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <appnorth.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devserver_admin.h"

/* ---- the walk-through ------------------------------------------------------ */

static int fail(const char *what, const appnorth_error *err) {
    fprintf(stderr, "%s failed: %s (%s, HTTP %d)\n", what, err->message, appnorth_status_str(err->code),
            err->http_status);
    return 1;
}

static appnorth_client *new_client(const char *api_url, const char *app_id) {
    appnorth_error err;
    appnorth_client_options *options = appnorth_client_options_new();
    appnorth_client *client = NULL;
    if (appnorth_client_options_set_api_url(options, api_url, &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(options, app_id, &err) != APPNORTH_OK ||
        appnorth_client_options_set_timeouts(options, 5000, 5000, &err) != APPNORTH_OK ||
        appnorth_client_new(options, &client, &err) != APPNORTH_OK)
        fail("creating a client", &err);
    appnorth_client_options_free(options); /* the client keeps a copy */
    return client;
}

/* Opens the event queue in data_dir. The defaults are the seed's numbers
 * (flush every 30 s or at 20 events; retries after 1, 2 and 4 s); only the
 * retry delays are shortened (0.2, 0.4, 0.8 s) so the offline flush of
 * step 1 gives up quickly. */
static appnorth_events *open_events(appnorth_client *client, const char *data_dir) {
    appnorth_error err;
    appnorth_events_options *options = appnorth_events_options_new();
    appnorth_events *events = NULL;
    if (appnorth_events_options_set_client(options, client, &err) != APPNORTH_OK ||
        appnorth_events_options_set_data_dir(options, data_dir, &err) != APPNORTH_OK ||
        appnorth_events_options_set_retry(options, 200, 3, 120000, 5, &err) != APPNORTH_OK ||
        appnorth_events_new(options, &events, &err) != APPNORTH_OK)
        fail("opening the event queue", &err);
    appnorth_events_options_free(options); /* the queue keeps a copy */
    return events;
}

/* The "queued" member of the statistics, or -1. */
static long queued(appnorth_events *events) {
    char *text = NULL;
    if (appnorth_events_stats(events, &text, NULL) != APPNORTH_OK) return -1;
    json_t *stats = json_loads(text, 0, NULL);
    appnorth_string_free(text);
    json_t *member = json_object_get(stats, "queued");
    long n = json_is_integer(member) ? (long)json_integer_value(member) : -1;
    json_decref(stats);
    return n;
}

static int track(appnorth_events *events, const char *name, const char *properties_json) {
    appnorth_error err;
    int32_t stored = 0;
    /* properties_json is sent exactly as written: 9.99 stays 9.99. */
    if (appnorth_events_track(events, name, properties_json, &stored, &err) != APPNORTH_OK)
        return fail("tracking", &err);
    printf("   track %-12s%s%s -> %s\n", name, properties_json ? " " : "", properties_json ? properties_json : "",
           stored ? "on disk" : "dropped (no consent)");
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s API_URL APP_ID DATA_DIR\n", argv[0]);
        return 2;
    }
    const char *api_url = argv[1], *app_id = argv[2], *data_dir = argv[3];
    int status = 1;
    appnorth_error err;
    appnorth_events *events = NULL;
    appnorth_client *client = new_client(api_url, app_id);
    if (!client) return 1;

    printf("track_events: %s, app %s, data in %s\n", api_url, app_id, data_dir);
    events = open_events(client, data_dir);
    if (!events) goto done;
    long left = queued(events);
    if (left > 0) printf("(%ld events left by an earlier run are queued too)\n", left);

    printf("1. Offline: track three events\n");
    lose_connectivity(api_url);
    if (track(events, "app_open", NULL) || track(events, "screen_view", "{\"screen\":\"home\"}") ||
        track(events, "purchase", "{\"price\":9.99,\"currency\":\"EUR\"}"))
        goto done;
    int32_t rc = appnorth_events_flush(events, 5000, &err);
    printf("   flush: %s (%s)\n", appnorth_status_str(rc), rc == APPNORTH_OK ? "sent" : err.message);
    printf("   queued: %ld\n", queued(events));

    printf("2. Restart: close the queue without flushing, open it again\n");
    appnorth_events_free(events); /* stops the upload thread; the queue stays on disk */
    events = open_events(client, data_dir);
    if (!events) goto done;
    printf("   queued after reopening: %ld\n", queued(events));

    printf("3. Reconnect and flush\n");
    reconnect(api_url);
    /* Back in the foreground: uploads resume (even if 5 failures in a row
     * had paused them) and a flush starts. */
    if (appnorth_events_foreground(events, &err) != APPNORTH_OK) {
        fail("resuming", &err);
        goto done;
    }
    if (appnorth_events_flush(events, 10000, &err) != APPNORTH_OK) {
        fail("flushing", &err);
        goto done;
    }
    printf("   flush: delivered; queued: %ld\n", queued(events));

    char *stats = NULL;
    if (appnorth_events_stats(events, &stats, &err) != APPNORTH_OK) {
        fail("reading the statistics", &err);
        goto done;
    }
    printf("stats: %s\n", stats);
    appnorth_string_free(stats);

    /* At exit: flush for at most 2 s, then stop the upload thread. */
    if (appnorth_events_close(events, 2000, &err) != APPNORTH_OK) {
        fail("closing", &err);
        goto done;
    }
    status = 0;

done:
    appnorth_events_free(events);
    appnorth_client_free(client);
    return status;
}
