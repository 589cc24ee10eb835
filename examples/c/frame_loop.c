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
 *   - it reads the boards without blocking a frame
 *     (appnorth_client_list_boards_async), the first time from a server that
 *     takes 1.5 s to answer (a dev-server fault): the frames keep their pace
 *     and the completion arrives in a later frame's dispatch;
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
static int callbacks, off_main, changes, log_lines, reads_done, reads_ok;
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

/* A non-blocking read's completion: runs inside a frame's dispatch. */
static void on_boards(uint64_t op, int32_t status, const appnorth_error *err, const char *result_json,
                      void *user_data) {
    (void)op, (void)user_data;
    on_any_callback();
    reads_done++;
    if (status == APPNORTH_OK) {
        reads_ok++;
        printf("  frame callback: boards read without blocking (%zu bytes)\n", result_json ? strlen(result_json) : 0);
    } else {
        printf("  frame callback: boards read failed: %s\n", err->message);
    }
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

    /* The first read meets a server 1.5 s slow (dev server only). */
    char fault[256];
    snprintf(fault, sizeof fault, "{\"delay_ms\":1500,\"count\":1,\"path_prefix\":\"/v1/apps/%s/boards\"}", app);
    if (dev_admin(api_url, "POST", "/admin/faults", fault) != 201) fprintf(stderr, "frame_loop: no slow-server fault\n");

    /* The frame loop: 60 frames a second, at most 10 s. The game publishes
     * level 1, then level 2 once level 1 arrived, and stops at level 2. */
    const double frame_ms = 1000.0 / 60;
    int frames = 0, ran_total = 0, published = 0, reads_started = 0;
    double longest_frame = 0;
    double start = now_ms(), next_frame = start;
    while (now_ms() - start < 10000) {
        frames++;
        double frame_start = now_ms();
        int32_t ran = 0;
        if (appnorth_dispatch(client, 0, &ran, &err) != APPNORTH_OK) return fail("dispatch", &err);
        ran_total += ran;
        /* A read each time the last one completed: it returns at once. */
        if (reads_started == reads_done && reads_started < 3) {
            if (appnorth_client_list_boards_async(client, on_boards, NULL, NULL, &err) != APPNORTH_OK)
                return fail("list_boards_async", &err);
            reads_started++;
        }
        double took = now_ms() - frame_start;
        if (took > longest_frame) longest_frame = took;
        if (published == 0 || (published == 1 && last_level == 1)) publish_level(api_url, app, ++published);
        if (last_level == 2 && reads_done == 3) break;
        /* Sleep until the next frame, or until a callback is queued. */
        next_frame += frame_ms;
        double wait = next_frame - now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (wait > 0) poll(&p, 1, (int)wait);
    }
    printf("frame loop: %d frames, %d callbacks run by appnorth_dispatch() (%d config changes, %d reads, "
           "%d log lines); the longest frame's library calls took %.1f ms\n",
           frames, ran_total, changes, reads_done, log_lines, longest_frame);

    appnorth_config_free(config);
    appnorth_dispatch(client, 0, NULL, NULL); /* the lines the config's close logged */
    appnorth_client_free(client);
    if (last_level != 2) {
        fprintf(stderr, "frame_loop: the live config never reached level 2\n");
        return 1;
    }
    if (reads_ok != 3) {
        fprintf(stderr, "frame_loop: %d of 3 non-blocking reads succeeded\n", reads_ok);
        return 1;
    }
    if (longest_frame > 250) {
        fprintf(stderr, "frame_loop: a frame spent %.0f ms in the library (a blocking call?)\n", longest_frame);
        return 1;
    }
    if (off_main != 0) {
        fprintf(stderr, "frame_loop: %d of %d callbacks ran off the main thread\n", off_main, callbacks);
        return 1;
    }
    printf("frame loop: all %d callbacks ran on the main thread\n", callbacks);
    return 0;
}
