/* The one clock of the C tests.
 *  - mono_ms(): CLOCK_MONOTONIC, for every deadline and measured duration;
 *  - wall_ms(): CLOCK_REALTIME, only to compare with times the library
 *    stores (it reads that clock too, and time() may lag it);
 *  - sleep_ms(): pacing a poll or a negative check's window, never waiting
 *    for a result;
 *  - cond_init_mono() and cond_wait_until(): condition variables wait on
 *    CLOCK_MONOTONIC, so a clock step never ends or stretches a wait.
 * scripts/check-test-clock.py (make test-size) refuses time(),
 * CLOCK_REALTIME and pthread_cond_timedwait in Tests/c outside this file. */
#ifndef APPNORTH_TEST_CLOCK_H
#define APPNORTH_TEST_CLOCK_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline int64_t clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Monotonic milliseconds, for deadlines and measured durations. */
static inline int64_t mono_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

/* Wall-clock milliseconds since the epoch, as the library stores times. */
static inline int64_t wall_ms(void) { return clock_ms(CLOCK_REALTIME); }

/* Sleeps `ms` milliseconds, through signals. */
static inline void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
}

/* Makes `cv` a condition variable whose timed waits use CLOCK_MONOTONIC. */
static inline void cond_init_mono(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* Waits on `cv` (made by cond_init_mono; `mu` held) until signalled or the
 * mono_ms() time `deadline`: 0, or ETIMEDOUT once the deadline passed. */
static inline int cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline) {
    if (deadline < 0) deadline = 0;
    struct timespec ts = {(time_t)(deadline / 1000), (long)(deadline % 1000) * 1000000L};
    return pthread_cond_timedwait(cv, mu, &ts);
}

#endif
