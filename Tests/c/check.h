/* A minimal check harness for the C tests: count, report, summarise. */
#ifndef APPNORTH_TEST_CHECK_H
#define APPNORTH_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

static int check_passed, check_failed;

/* The size of a campaign (forks, kill -9 rounds, children): `quick` in
 * make test, `soak` in make test-soak (APPNORTH_SOAK=1); a positive
 * number in $`env` (when `env` is not NULL) overrides both. */
static inline int test_count(const char *env, int quick, int soak) {
    const char *given = env ? getenv(env) : NULL;
    if (given && atoi(given) > 0) return atoi(given);
    const char *soaking = getenv("APPNORTH_SOAK");
    return soaking && *soaking && strcmp(soaking, "0") != 0 ? soak : quick;
}

/* The named test running now (RUN below): failures and the watchdog name it. */
static const char *test_current = "";

/* Is the test `name` picked by $APPNORTH_TEST? Unset or empty: every test.
 * Otherwise a comma-separated list of names, each matching exactly or, when
 * it ends in '*', as a prefix (make test-c TEST='test_x,test_y*'). */
static inline int test_selected(const char *name) {
    const char *want = getenv("APPNORTH_TEST");
    if (!want || !*want) return 1;
    size_t len = strlen(name);
    for (const char *p = want; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0 && p[n - 1] == '*' ? strncmp(p, name, n - 1) == 0 : (n == len && strncmp(p, name, n) == 0))
            return 1;
        p += n + (end != NULL);
    }
    return 0;
}

/* Starts the named test if $APPNORTH_TEST picks it; with $APPNORTH_TEST
 * set, announces it on stderr ("run: NAME", which scripts/run-c-tests.sh
 * counts). */
static inline int test_begin(const char *name) {
    if (!test_selected(name)) return 0;
    const char *picked = getenv("APPNORTH_TEST");
    if (picked && *picked) fprintf(stderr, "run: %s\n", name);
    test_current = name;
    return 1;
}

/* Runs one named test function of a C test program: the registry is the
 * list of RUN() lines in its main(), so that one test runs alone
 * (make test-c TEST=name). RUN_WITH passes arguments. */
#define RUN(fn)                                                                 \
    do {                                                                        \
        if (test_begin(#fn)) { fn(); test_current = ""; }                       \
    } while (0)
#define RUN_WITH(fn, ...)                                                       \
    do {                                                                        \
        if (test_begin(#fn)) { fn(__VA_ARGS__); test_current = ""; }            \
    } while (0)

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            check_passed++;                                                     \
        } else {                                                                \
            check_failed++;                                                     \
            fprintf(stderr, "FAIL %s:%d: %s%s%s: ", __FILE__, __LINE__,          \
                    test_current, *test_current ? ": " : "", #cond);            \
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
