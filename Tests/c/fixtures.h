/* Fixtures shared by the C tests: the clock and the dev server's state.
 * admin.h (the admin API through plain libcurl) is shared with the
 * benchmarks too; this file adds what needs check.h. */
#ifndef APPNORTH_TEST_FIXTURES_H
#define APPNORTH_TEST_FIXTURES_H

#include <stdint.h>
#include <time.h>

#include "admin.h"
#include "check.h"

/* Monotonic milliseconds, for deadlines and measured durations. */
static inline int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Empties the dev server at `base` (apps, requests log, faults), checked. */
static inline void admin_reset(const char *base) {
    long status = admin_request(base, "POST", "/admin/reset", "{}", NULL);
    CHECK(status == 200, "admin reset: HTTP %ld", status);
}

#endif
