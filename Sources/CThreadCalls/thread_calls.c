/* The definition of the thread-local record (include/thread_calls.h) and
 * its slow path: growing the handle list, and freeing it when the thread
 * exits. */
#include "thread_calls.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

__thread appnorth_thread_calls appnorth_thread_calls_record;

static pthread_key_t exit_key;
static int exit_key_made; /* 1: made; -1: the system had none */
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* Runs on the exiting thread, before its thread-local memory goes. The
 * record is reset, so that a later destructor (another library's) calling
 * in on this thread starts from an empty list (and registers again). */
static void release_entered(void *value) {
    appnorth_thread_calls *calls = &appnorth_thread_calls_record;
    if (calls->entered == value) {
        calls->entered = NULL;
        calls->capacity = 0;
        calls->count = 0;
    }
    free(value);
}

static void make_exit_key(void) {
    exit_key_made = pthread_key_create(&exit_key, release_entered) == 0 ? 1 : -1;
}

int appnorth_thread_calls_grow(appnorth_thread_calls *calls) {
    if (pthread_once(&exit_key_once, make_exit_key) != 0 || exit_key_made != 1) return -1;
    long capacity = calls->capacity < 8 ? 8 : calls->capacity * 2;
    const void **grown = malloc((size_t)capacity * sizeof *grown);
    if (grown == NULL) return -1;
    /* Registered before the old list goes: the key always holds the list
     * the record points at, or the record has none. */
    if (pthread_setspecific(exit_key, grown) != 0) {
        free(grown);
        return -1;
    }
    if (calls->count > 0) memcpy(grown, calls->entered, (size_t)calls->count * sizeof *grown);
    free(calls->entered);
    calls->entered = grown;
    calls->capacity = capacity;
    return 0;
}
