/* A minimal check harness for the C tests: count, report, summarise. */
#ifndef APPNORTH_TEST_CHECK_H
#define APPNORTH_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            check_passed++;                                                     \
        } else {                                                                \
            check_failed++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* A status check that prints the library's message when it differs. */
#define CHECK_STATUS(rc, expected, err)                                         \
    CHECK((rc) == (expected), "got %d (%s), want %d (%s): %s", (int)(rc),       \
          appnorth_status_str(rc), (int)(expected), appnorth_status_str(expected), \
          (err).message)

static int check_summary(void) {
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
