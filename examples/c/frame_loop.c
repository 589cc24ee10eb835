/* A single-threaded frame loop, as a game engine (or LuaJIT, or Unity's
 * main thread) would embed the library, in dispatch mode:
 *
 *   - the client is made with appnorth_client_options_set_dispatch_mode(1),
 *     so no callback ever runs on a library thread;
 *   - each frame calls appnorth_dispatch() once (with nothing pending it is
 *     one atomic load), and sleeps until the next frame on the dispatch
 *     descriptor, so a queued callback wakes the loop early;
 *   - it receives live config (the listener and the log lines of the
 *     library's threads run inside that call, between frames);
 *   - it checks, by thread id, that every callback ran on the main thread.
 *
 *   frame_loop [API_URL [APP_ID]]    API_URL defaults to $APPNORTH_TEST_SERVER
 *
 * Publishing a config version uses the dev server's /admin endpoint, which
 * a real API does not have; everything else is the library's public API.
 */
#define _POSIX_C_SOURCE 200809L

#include <appnorth.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devserver_admin.h"

static pthread_t main_thread;
static int callbacks, off_main, changes, log_lines;
static long last_level = -1;

/* Every callback starts here: count it, and count it again if it is not on
 * the main thread (the frame loop's). */
static void on_any_callback(void) {
    callbacks++;
    if (!pthread_equal(pthread_self(), main_thread)) off_main++;
}

static void on_log(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    on_any_callback();
    log_lines++;
}

static void on_config_change(const char *config_json, const char *changed_keys_json, int32_t tier,
                             void *user_data) {
    (void)tier, (void)user_data;
    on_any_callback();
    changes++;
    const char *p = strstr(config_json, "\"level\":");
    if (p) last_level = strtol(p + 8, NULL, 10);
    printf("  frame callback: config changed %s -> level %ld\n", changed_keys_json, last_level);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static int fail(const char *what, const appnorth_error *err) {
    fprintf(stderr, "frame_loop: %s: %s\n", what, err->message);
    return 1;
}

static void publish_level(const char *api_url, const char *app, int level) {
    char path[256], body[128];
    snprintf(path, sizeof path, "/admin/apps/%s/config", app);
    snprintf(body, sizeof body, "{\"config\":{\"level\":%d,\"title\":\"frame loop\"}}", level);
    if (dev_admin(api_url, "POST", path, body) != 201) fprintf(stderr, "frame_loop: publishing failed\n");
}

int main(int argc, char **argv) {
    const char *api_url = argc > 1 ? argv[1] : getenv("APPNORTH_TEST_SERVER");
    const char *app = argc > 2 ? argv[2] : "demo";
    if (!api_url) {
        fprintf(stderr, "usage: frame_loop [API_URL [APP_ID]] (or set APPNORTH_TEST_SERVER)\n");
        return 2;
    }
    main_thread = pthread_self();
    appnorth_error err;

    appnorth_client_options *options = appnorth_client_options_new();
    if (appnorth_client_options_set_api_url(options, api_url, &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(options, app, &err) != APPNORTH_OK ||
        appnorth_client_options_set_dispatch_mode(options, 1, &err) != APPNORTH_OK ||
        appnorth_client_options_set_logger(options, on_log, APPNORTH_LOG_DEBUG, NULL, &err) != APPNORTH_OK)
        return fail("options", &err);
    appnorth_client *client = NULL;
    if (appnorth_client_new(options, &client, &err) != APPNORTH_OK) return fail("client", &err);
    appnorth_client_options_free(options);
    int32_t fd = -1;
    if (appnorth_dispatch_fd(client, &fd, &err) != APPNORTH_OK) return fail("dispatch_fd", &err);

    appnorth_config_options *config_options = appnorth_config_options_new();
    appnorth_config *config = NULL;
    if (appnorth_config_options_set_client(config_options, client, &err) != APPNORTH_OK ||
        appnorth_config_new(config_options, &config, &err) != APPNORTH_OK)
        return fail("config", &err);
    appnorth_config_options_free(config_options);
    int64_t token = 0;
    if (appnorth_config_add_listener(config, on_config_change, NULL, &token, &err) != APPNORTH_OK ||
        appnorth_config_start_live(config, &err) != APPNORTH_OK)
        return fail("live config", &err);

    /* The frame loop: 60 frames a second, at most 10 s. The game publishes
     * level 1, then level 2 once level 1 arrived, and stops at level 2. */
    const double frame_ms = 1000.0 / 60;
    int frames = 0, ran_total = 0, published = 0;
    double start = now_ms(), next_frame = start;
    while (now_ms() - start < 10000) {
        frames++;
        int32_t ran = 0;
        if (appnorth_dispatch(client, 0, &ran, &err) != APPNORTH_OK) return fail("dispatch", &err);
        ran_total += ran;
        if (published == 0 || (published == 1 && last_level == 1)) publish_level(api_url, app, ++published);
        if (last_level == 2) break;
        /* Sleep until the next frame, or until a callback is queued. */
        next_frame += frame_ms;
        double wait = next_frame - now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (wait > 0) poll(&p, 1, (int)wait);
    }
    printf("frame loop: %d frames, %d callbacks run by appnorth_dispatch() (%d config changes, %d log lines)\n",
           frames, ran_total, changes, log_lines);

    appnorth_config_free(config);
    appnorth_dispatch(client, 0, NULL, NULL); /* the lines the config's close logged */
    appnorth_client_free(client);
    if (last_level != 2) {
        fprintf(stderr, "frame_loop: the live config never reached level 2\n");
        return 1;
    }
    if (off_main != 0) {
        fprintf(stderr, "frame_loop: %d of %d callbacks ran off the main thread\n", off_main, callbacks);
        return 1;
    }
    printf("frame loop: all %d callbacks ran on the main thread\n", callbacks);
    return 0;
}
