/* Handles count the calls in flight on them, through the real .so:
 * appnorth_X_free() on one thread waits for a call in progress on another,
 * calls that arrive while it waits fail with APPNORTH_E_WRONG_STATE, and a
 * free from inside one of the handle's own calls (a host callback) returns
 * at once and the handle goes when that call returns. A read cache on host
 * callback storage is the handle: its save callback holds a call open for
 * as long as the test wants, with no server and no timing. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fixtures.h"
#include "support.h"

typedef struct {
    appnorth_cache *cache;
    atomic_int hold;      /* the next save waits for `go` */
    atomic_int entered;   /* a save is waiting */
    atomic_int go;
    atomic_int released;  /* the storage's release callback ran */
    atomic_int sequence;  /* orders the events below */
    atomic_int save_returned_at; /* the held save callback, back into the call */
    atomic_int call_returned_at;
    atomic_int free_returned_at;
    atomic_int release_ran_at;
    int32_t call_status;
    /* free from inside the save callback */
    int free_inside;
    int32_t status_after_free_inside;
    int released_before_call_returned;
    char message[APPNORTH_ERROR_MESSAGE_SIZE];
} fixture;

/* Waits for *flag to become non-zero; 0 when `ms` passed first. */
static int wait_for(atomic_int *flag, int ms) {
    double deadline = mono_ms() + ms;
    while (!atomic_load(flag)) {
        if (mono_ms() > deadline) return 0;
        sleep_ms(1);
    }
    return 1;
}

static int32_t load_nothing(void *user_data, appnorth_buffer *out) {
    (void)user_data;
    (void)out;
    return 0;
}

static int32_t save(void *user_data, const void *bytes, size_t length) {
    (void)bytes;
    (void)length;
    fixture *f = user_data;
    if (f->free_inside) {
        f->free_inside = 0;
        appnorth_cache_free(f->cache); /* returns at once: this call still uses it */
        f->released_before_call_returned = atomic_load(&f->released);
        char *json = NULL;
        appnorth_error err;
        f->status_after_free_inside = appnorth_cache_boards(f->cache, "s", &json, &err);
        snprintf(f->message, sizeof f->message, "%s", err.message);
        appnorth_string_free(json);
        return 0;
    }
    if (atomic_exchange(&f->hold, 0)) {
        atomic_store(&f->entered, 1);
        wait_for(&f->go, 20000);
        atomic_store(&f->save_returned_at, atomic_fetch_add(&f->sequence, 1) + 1);
    }
    return 0;
}

static void release(void *user_data) {
    fixture *f = user_data;
    atomic_store(&f->release_ran_at, atomic_fetch_add(&f->sequence, 1) + 1);
    atomic_store(&f->released, 1);
}

static appnorth_cache *make_cache(fixture *f) {
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_callbacks(load_nothing, save, release, f, &storage, &err), APPNORTH_OK, err);
    appnorth_cache *cache = NULL;
    CHECK_STATUS(appnorth_cache_new(storage, 0, NULL, &cache, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage); /* the cache keeps its own reference */
    return cache;
}

static void *store_in_thread(void *arg) {
    fixture *f = arg;
    appnorth_error err;
    f->call_status = appnorth_cache_store_boards(f->cache, "s", "[]", &err);
    atomic_store(&f->call_returned_at, atomic_fetch_add(&f->sequence, 1) + 1);
    return NULL;
}

static void *free_in_thread(void *arg) {
    fixture *f = arg;
    appnorth_cache_free(f->cache);
    atomic_store(&f->free_returned_at, atomic_fetch_add(&f->sequence, 1) + 1);
    return NULL;
}

static void test_free_waits_for_a_call_in_flight(void) {
    fixture f;
    memset(&f, 0, sizeof f);
    f.cache = make_cache(&f);
    atomic_store(&f.hold, 1);
    pthread_t caller, freer;
    pthread_create(&caller, NULL, store_in_thread, &f);
    CHECK(wait_for(&f.entered, 20000), "the call is inside its save callback");

    pthread_create(&freer, NULL, free_in_thread, &f);
    /* A call arriving once the free has begun is refused cleanly: the
     * handle is alive (the free waits for the held call), so polling it
     * here is safe; before the free begins it succeeds. */
    int32_t rc = APPNORTH_OK;
    appnorth_error err;
    memset(&err, 0, sizeof err);
    double deadline = mono_ms() + 20000;
    while (rc == APPNORTH_OK && mono_ms() < deadline) {
        char *json = NULL;
        rc = appnorth_cache_boards(f.cache, "s", &json, &err);
        appnorth_string_free(json);
        if (rc == APPNORTH_OK) sleep_ms(1);
    }
    CHECK_STATUS(rc, APPNORTH_E_WRONG_STATE, err);
    CHECK(strstr(err.message, "being freed") != NULL, "message: %s", err.message);
    CHECK(atomic_load(&f.free_returned_at) == 0, "the free returned while a call was still inside");
    CHECK(!atomic_load(&f.released), "the storage was released while a call was still inside");

    atomic_store(&f.go, 1);
    pthread_join(caller, NULL);
    pthread_join(freer, NULL);
    CHECK(f.call_status == APPNORTH_OK, "the call in flight completed: %d", f.call_status);
    /* The free returns once the call has left the library, which the host
     * cannot mark; what it can: the call's save callback had returned into
     * the library (the caller's own return may be noted after the free's:
     * the two threads race from the moment the call leaves). */
    CHECK(atomic_load(&f.save_returned_at) != 0 && atomic_load(&f.save_returned_at) < atomic_load(&f.free_returned_at),
          "the free returned after the call's callback (callback %d, free %d)", atomic_load(&f.save_returned_at),
          atomic_load(&f.free_returned_at));
    CHECK(atomic_load(&f.released) && atomic_load(&f.release_ran_at) < atomic_load(&f.free_returned_at),
          "the storage was released before the free returned");
}

static void test_free_from_inside_its_own_call(void) {
    fixture f;
    memset(&f, 0, sizeof f);
    f.cache = make_cache(&f);
    f.free_inside = 1;
    appnorth_error err;
    /* The save callback frees the cache: no deadlock (the watchdog would
     * fire), the call itself completes, and the handle goes after it. */
    CHECK_STATUS(appnorth_cache_store_boards(f.cache, "s", "[]", &err), APPNORTH_OK, err);
    CHECK(!f.released_before_call_returned, "released while its own call was still running");
    CHECK(f.status_after_free_inside == APPNORTH_E_WRONG_STATE, "a call after the free inside: %d (%s)",
          f.status_after_free_inside, f.message);
    CHECK(atomic_load(&f.released), "released once its call returned");
}

static void test_free_with_no_call_in_flight(void) {
    fixture f;
    memset(&f, 0, sizeof f);
    f.cache = make_cache(&f);
    appnorth_error err;
    CHECK_STATUS(appnorth_cache_store_boards(f.cache, "s", "[]", &err), APPNORTH_OK, err);
    appnorth_cache_free(f.cache);
    CHECK(atomic_load(&f.released), "released by the free itself");
    appnorth_cache_free(NULL);
}

int main(void) {
    test_name = "test_handles";
    signal(SIGALRM, test_watchdog);
    const char *override = getenv("APPNORTH_TEST_TIMEOUT");
    alarm(override ? (unsigned)atoi(override) : 120);
    RUN(test_free_with_no_call_in_flight);
    RUN(test_free_waits_for_a_call_in_flight);
    RUN(test_free_from_inside_its_own_call);
    return check_summary();
}
