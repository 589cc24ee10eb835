/* The C test harness tested: RUN() picks by $APPNORTH_TEST, and the
 * watchdog names the test that hung. Driven by Tests/harness/check.sh. */
#define _XOPEN_SOURCE 700
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../c/support.h"

static void test_first(void) { CHECK(1, "first"); printf("ran first\n"); }
static void test_second(void) { CHECK(1, "second"); printf("ran second\n"); }
static void test_with_argument(int n) { CHECK(n == 7, "argument %d", n); printf("ran with %d\n", n); }
static void test_that_hangs(void) {
    CHECK(1, "hang");
    if (getenv("HARNESS_HANG")) pause(); /* the watchdog ends it */
    printf("ran hang (did not hang)\n");
}

int main(void) {
    test_name = "harness_selftest";
    if (getenv("APPNORTH_TEST_TIMEOUT")) {
        signal(SIGALRM, test_watchdog);
        alarm((unsigned)atoi(getenv("APPNORTH_TEST_TIMEOUT")));
    }
    RUN(test_first);
    RUN(test_second);
    RUN_WITH(test_with_argument, 7);
    RUN(test_that_hangs);
    return check_summary();
}
