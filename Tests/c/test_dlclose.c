/* The library is never unmapped while its code can run: a host that
 * dlopen()s libappnorth.so, makes handles whose threads run (an events
 * uploader, a live config stream), then dlclose()s it (as Ruby's and
 * LuaJIT's teardown do on their own) keeps running: the threads keep
 * working and the handles can still be freed. Before -z nodelete, 3 runs in
 * 3 crashed with SIGSEGV.
 *
 * Built without -lappnorth (Makefile): the only reference to the library is
 * this program's dlopen(), so dlclose() would unload it.
 *
 *   test_dlclose [LIBRARY_PATH]   (server: $APPNORTH_TEST_SERVER; the path
 *                                  defaults to the dist library it was built for)
 */
#define _GNU_SOURCE
#include <appnorth.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "check.h"
#include "fixtures.h"

static const char *server;

/* The library's functions, looked up with dlsym. */
#define FUNCTIONS(X)                                   \
    X(appnorth_client_options_new)                     \
    X(appnorth_client_options_free)                    \
    X(appnorth_client_options_set_api_url)             \
    X(appnorth_client_options_set_app_id)              \
    X(appnorth_client_options_set_logger)              \
    X(appnorth_client_new)                             \
    X(appnorth_client_free)                            \
    X(appnorth_events_options_new)                     \
    X(appnorth_events_options_free)                    \
    X(appnorth_events_options_set_client)              \
    X(appnorth_events_options_set_data_dir)            \
    X(appnorth_events_options_set_flush_policy)        \
    X(appnorth_events_new)                             \
    X(appnorth_events_track)                           \
    X(appnorth_events_free)                            \
    X(appnorth_config_options_new)                     \
    X(appnorth_config_options_free)                    \
    X(appnorth_config_options_set_client)              \
    X(appnorth_config_new)                             \
    X(appnorth_config_start_live)                      \
    X(appnorth_config_get_int)                         \
    X(appnorth_config_free)

#define DECLARE(name) static __typeof__(&name) p_##name;
FUNCTIONS(DECLARE)

static int lines;
static void on_log(int32_t level, const char *message, void *user_data) {
    (void)level, (void)message, (void)user_data;
    __atomic_add_fetch(&lines, 1, __ATOMIC_RELAXED);
}

static size_t server_event_count(const char *app) {
    char path[256];
    snprintf(path, sizeof path, "/admin/apps/%s/state", app);
    json_t *state = NULL;
    admin_request(server, "GET", path, NULL, &state);
    size_t n = json_array_size(json_object_get(state, "events"));
    json_decref(state);
    return n;
}

#ifndef APPNORTH_TEST_LIBRARY
#define APPNORTH_TEST_LIBRARY "libappnorth.so"
#endif

int main(int argc, char **argv) {
    server = getenv("APPNORTH_TEST_SERVER");
    const char *library = argc > 1 ? argv[1] : APPNORTH_TEST_LIBRARY;
    if (!server) {
        fprintf(stderr, "usage: test_dlclose [LIBRARY_PATH] (with $APPNORTH_TEST_SERVER)\n");
        return 2;
    }
    alarm(60);
    curl_global_init(CURL_GLOBAL_ALL);
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    CHECK(lib != NULL, "dlopen %s: %s", library, dlerror());
    if (!lib) return check_summary();
#define LOOKUP(name) p_##name = (__typeof__(p_##name))dlsym(lib, #name); CHECK(p_##name != NULL, #name);
    FUNCTIONS(LOOKUP)

    char app[64], dir[] = "/tmp/appnorth-dlclose-XXXXXX";
    snprintf(app, sizeof app, "dlclose-%d", (int)getpid());
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], body[128];
    snprintf(path, sizeof path, "/admin/apps/%s/config", app);
    snprintf(body, sizeof body, "{\"config\":{\"v\":1}}");
    CHECK(admin_request(server, "POST", path, body, NULL) == 201, "publish");

    appnorth_error err;
    appnorth_client_options *o = p_appnorth_client_options_new();
    p_appnorth_client_options_set_api_url(o, server, &err);
    p_appnorth_client_options_set_app_id(o, app, &err);
    p_appnorth_client_options_set_logger(o, on_log, APPNORTH_LOG_DEBUG, NULL, &err);
    appnorth_client *client = NULL;
    CHECK(p_appnorth_client_new(o, &client, &err) == APPNORTH_OK, "client: %s", err.message);
    p_appnorth_client_options_free(o);

    appnorth_events_options *eo = p_appnorth_events_options_new();
    p_appnorth_events_options_set_client(eo, client, &err);
    p_appnorth_events_options_set_data_dir(eo, dir, &err);
    p_appnorth_events_options_set_flush_policy(eo, 100, 5, &err);
    appnorth_events *events = NULL;
    CHECK(p_appnorth_events_new(eo, &events, &err) == APPNORTH_OK, "events: %s", err.message);
    p_appnorth_events_options_free(eo);

    appnorth_config_options *co = p_appnorth_config_options_new();
    p_appnorth_config_options_set_client(co, client, &err);
    appnorth_config *config = NULL;
    CHECK(p_appnorth_config_new(co, &config, &err) == APPNORTH_OK, "config: %s", err.message);
    p_appnorth_config_options_free(co);
    CHECK(p_appnorth_config_start_live(config, &err) == APPNORTH_OK, "start_live: %s", err.message);

    /* The uploader works after the dlclose: it has events to send. */
    for (int i = 0; i < 20; i++) p_appnorth_events_track(events, "before_dlclose", NULL, NULL, &err);
    CHECK(dlclose(lib) == 0, "dlclose: %s", dlerror());

    void *still = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    CHECK(still != NULL, "the library is still mapped after dlclose (-z nodelete)");
    if (still) dlclose(still);

    double deadline = mono_ms() + 20000;
    while (server_event_count(app) < 20 && mono_ms() < deadline) sleep_ms(20);
    CHECK(server_event_count(app) == 20, "the uploader sent every event after dlclose: %zu",
          server_event_count(app));
    int64_t v = -1;
    deadline = mono_ms() + 10000;
    while (v != 1 && mono_ms() < deadline) {
        sleep_ms(20);
        p_appnorth_config_get_int(config, "v", -1, &v, NULL);
    }
    CHECK(v == 1, "the config fetched v=1 (%lld)", (long long)v);
    snprintf(body, sizeof body, "{\"config\":{\"v\":2}}");
    CHECK(admin_request(server, "POST", path, body, NULL) == 201, "publish v=2");
    deadline = mono_ms() + 10000;
    while (v != 2 && mono_ms() < deadline) {
        sleep_ms(20);
        p_appnorth_config_get_int(config, "v", -1, &v, NULL);
    }
    CHECK(v == 2, "the live stream kept running after dlclose (v=%lld)", (long long)v);
    CHECK(__atomic_load_n(&lines, __ATOMIC_RELAXED) > 0, "library threads kept logging");

    /* Still callable after dlclose (the host kept its pointers). */
    p_appnorth_config_free(config);
    p_appnorth_events_free(events);
    p_appnorth_client_free(client);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    curl_global_cleanup();
    return check_summary();
}
