/* The seed's network timeouts with the library's defaults: an API request
 * gives up after 30 s, a resource download (the config fetch) after 60 s.
 *
 * How this is observed without waiting 60 s: libcurl enforces both limits
 * inside the library on the process's monotonic clock, and no API moves
 * that clock. Reading the constants back would not show what the library
 * does, and sleeping 60 real seconds would break the suite's time budget.
 * So this program runs itself under libfaketime (`faketime -f "+0 x10"`):
 * every clock of this process, the library's and libcurl's included, runs
 * ten times fast, while the dev server (another process) holds each request
 * until it is released, so the server never answers them.
 *
 * Both requests start together and race (measured: 30001 and 60038 ms of
 * the process's clock). What is asserted holds on any load, because it is
 * ordering and lower bounds, never an upper bound on time:
 *   - each gives up with a network error while the server still holds it
 *     (the library ended it, not the server);
 *   - the API request gives up after at least 29.5 s, the download after at
 *     least 59.5 s;
 *   - the API request gives up while the download is still waiting: the two
 *     defaults are not the same limit.
 * A client with the same defaults answers normally when the server does not
 * hang, so the failures below are the timeouts and nothing else. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "fixtures.h"
#include "check.h"
#include "support.h"

#define APP "ttimeouts"

static const char *server;

/* This process's monotonic clock: the fast one under faketime. */
/* A client built with the library's defaults: URL and app id only. */
static appnorth_client *default_client(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, APP, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

/* The server holds the next request under `path` until it is released. */
static void hang(const char *path) {
    char spec[256];
    snprintf(spec, sizeof spec, "{\"delay_ms\":600000,\"count\":1,\"path_prefix\":\"/v1/apps/%s%s\"}", APP, path);
    long status = admin_request(server, "POST", "/admin/faults", spec, NULL);
    CHECK(status == 201, "fault: HTTP %ld", status);
}

typedef struct {
    appnorth_config *config;
    int32_t status;
    int64_t waited;
    atomic_int done;
} download;

static void *refresh_config(void *arg) {
    download *d = arg;
    appnorth_error err;
    int64_t start = mono_ms();
    d->status = appnorth_config_refresh(d->config, &err);
    d->waited = mono_ms() - start;
    atomic_store(&d->done, 1);
    return NULL;
}

static void test_api_requests_give_up_after_30_s_and_downloads_after_60_s(void) {
    long status = admin_request(server, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"v\":1}}", NULL);
    CHECK(status == 201, "publish: HTTP %ld", status);
    appnorth_client *c = default_client();
    appnorth_error err;
    char *json = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err); /* answers when not held */
    appnorth_string_free(json);
    json = NULL;
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, c, &err), APPNORTH_OK, err);
    download d = {.config = NULL, .status = -1, .waited = 0};
    atomic_init(&d.done, 0);
    CHECK_STATUS(appnorth_config_new(o, &d.config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    CHECK_STATUS(appnorth_config_refresh(d.config, &err), APPNORTH_OK, err); /* answers when not held */

    hang("/config");
    pthread_t downloader;
    CHECK(pthread_create(&downloader, NULL, refresh_config, &d) == 0, "thread");
    CHECK(admin_wait_held(server, 1) >= 1, "the config fetch is held at the server");
    hang("/boards");
    int64_t start = mono_ms();
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_E_NETWORK, err);
    int64_t waited = mono_ms() - start;
    int download_done = atomic_load(&d.done);
    int held = admin_held(server);
    printf("API request gave up after %lld ms of its clock\n", (long long)waited);
    CHECK(waited >= 29500, "gave up after %lld ms of the process's clock (default 30000)", (long long)waited);
    CHECK(json == NULL, "no result");
    CHECK(!download_done, "the API request gave up while the config download was still waiting");
    CHECK(held >= 1, "the server still held the download when the API request gave up (held: %d)", held);

    pthread_join(downloader, NULL);
    held = admin_held(server);
    printf("config download gave up after %lld ms of its clock\n", (long long)d.waited);
    CHECK(d.status == APPNORTH_E_NETWORK, "the download gave up with a network error (status %d)", d.status);
    CHECK(d.waited >= 59500, "gave up after %lld ms of the process's clock (default 60000)", (long long)d.waited);
    admin_release(server);
    appnorth_config_free(d.config);
    appnorth_client_free(c);
}

int main(int argc, char **argv) {
    (void)argc;
    if (!getenv("FAKETIME")) {
        /* Run again with fast clocks (see the top of this file). */
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = 0;
            char *args[] = {"faketime", "-f", "+0 x10", self, NULL};
            execvp("faketime", args);
        }
        fprintf(stderr, "%s: cannot run under faketime (%s): install it (Debian: apt-get install faketime), "
                        "or run scripts/ensure-deps.sh\n", argv[0], strerror(errno));
        CHECK(0, "faketime is available");
        return check_summary();
    }
    server = test_start("test_timeouts", 120);
    if (!server) return 2;
    curl_global_init(CURL_GLOBAL_ALL);
    (void)admin_board; /* admin.h helpers this suite does not need */
    (void)admin_idea;
    (void)make_client;
    (void)make_temp_dir;
    (void)remove_tree;

    RUN(test_api_requests_give_up_after_30_s_and_downloads_after_60_s);

    curl_global_cleanup();
    return check_summary();
}
