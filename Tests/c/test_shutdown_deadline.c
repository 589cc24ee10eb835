/* appnorth_shutdown() keeps its timeout_ms whatever a host callback does:
 * with a config listener that the test holds inside its call on the stream
 * thread, shutdown returns APPNORTH_E_TIMEOUT while the listener is still
 * held (before, it stopped each handle in turn and joined its thread, so it
 * waited for the listener, for ever); once the listener returns, a second
 * shutdown ends every library thread and returns APPNORTH_OK. The order is
 * checked, not a duration: a releaser thread frees the listener after 30 s
 * if shutdown has not returned by then, and the test fails if it had to.
 * Shutdown is for good: one program, one story. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fixtures.h"
#include "support.h"
#include "threads.h"

static const char *base;
static atomic_int in_listener, returned, released_by_releaser;
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int released;

static void release_listener(void) {
    pthread_mutex_lock(&hold_lock);
    released = 1;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
}

/* Holds the stream thread inside the host's code until released. */
static void held_listener(const char *config, const char *keys, int32_t tier, void *user_data) {
    (void)config, (void)keys, (void)tier, (void)user_data;
    atomic_store(&in_listener, 1);
    pthread_mutex_lock(&hold_lock);
    while (!released) pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
}

/* Frees the listener if shutdown has not returned within 30 s (the library
 * would otherwise hang the test for ever), and says so. */
static void *releaser(void *arg) {
    (void)arg;
    int64_t until = mono_ms() + 30000;
    while (!atomic_load(&returned) && mono_ms() < until) sleep_ms(10);
    if (!atomic_load(&returned)) {
        atomic_store(&released_by_releaser, 1);
        release_listener();
    }
    return NULL;
}

static void test_shutdown_returns_at_its_timeout_while_a_listener_is_held(void) {
    char *dir = make_temp_dir("shutdown-deadline");
    appnorth_error err;
    admin_request(base, "POST", "/admin/apps/shutdown-deadline/config", "{\"config\":{\"v\":1}}", NULL);
    appnorth_client *c = client_with_timeouts(base, "shutdown-deadline", 10000, 10000);
    appnorth_config *config = config_in(c, dir);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, held_listener, NULL, &token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    int64_t deadline = mono_ms() + 15000;
    while (!atomic_load(&in_listener) && mono_ms() < deadline) sleep_ms(5);
    CHECK(atomic_load(&in_listener), "the listener runs on the stream thread");
    CHECK(threads_named("appnorth-config") == 1, "the stream thread runs");

    pthread_t thread;
    CHECK(pthread_create(&thread, NULL, releaser, NULL) == 0, "releaser started");
    int32_t rc = appnorth_shutdown(300, &err);
    atomic_store(&returned, 1);
    pthread_join(thread, NULL);
    CHECK(!atomic_load(&released_by_releaser), "shutdown returned while the listener was still held");
    CHECK(rc == APPNORTH_E_TIMEOUT, "shutdown reports the callback still running: %d %s", rc, err.message);
    CHECK(strstr(err.message, "host callback") != NULL, "message: %s", err.message);
    /* Refused from now on, even before the listener has returned. */
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_E_WRONG_STATE, err);

    release_listener();
    CHECK_STATUS(appnorth_shutdown(30000, &err), APPNORTH_OK, err);
    CHECK(threads_named("appnorth-config") == 0, "the stream thread ended once its listener returned");
    appnorth_config_free(config);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(void) {
    base = test_start("test_shutdown_deadline", 120);
    if (base == NULL) return 2;
    RUN(test_shutdown_returns_at_its_timeout_while_a_listener_is_held);
    return check_summary();
}
