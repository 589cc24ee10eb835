#!/usr/bin/env bash
# Checks the C test harness (Tests/c/check.h, support.h) with
# harness_selftest: a name picks one test, a prefix several, an unknown name
# none, and a hung test is named by the watchdog.
set -uo pipefail
bin=$1
fail=0
expect() { # expect WHAT OUTPUT PATTERN
    if printf '%s\n' "$2" | grep -qE "$3"; then :; else echo "harness: $1: no '$3' in: $2"; fail=1; fi
}
refuse() {
    if printf '%s\n' "$2" | grep -qE "$3"; then echo "harness: $1: unexpected '$3' in: $2"; fail=1; fi
}
all=$(env -u APPNORTH_TEST "$bin" 2>&1)
expect "every test by default" "$all" "^ran first$"
expect "every test by default" "$all" "^ran with 7$"
expect "every test by default" "$all" "^4 passed, 0 failed$"
one=$(APPNORTH_TEST=test_second "$bin" 2>&1)
expect "one by name" "$one" "^run: test_second$"
expect "one by name" "$one" "^ran second$"
refuse "one by name" "$one" "ran first|ran with"
prefix=$(APPNORTH_TEST='test_fir*,test_with_argument' "$bin" 2>&1)
expect "a prefix and a name" "$prefix" "^ran first$"
expect "a prefix and a name" "$prefix" "^ran with 7$"
refuse "a prefix and a name" "$prefix" "ran second"
none=$(APPNORTH_TEST=test_nothing "$bin" 2>&1)
refuse "an unknown name" "$none" "^run: "
hung=$(APPNORTH_TEST=test_that_hangs HARNESS_HANG=1 APPNORTH_TEST_TIMEOUT=1 "$bin" 2>&1); rc=$?
expect "the watchdog" "$hung" "harness_selftest: watchdog fired in test_that_hangs"
[ "$rc" = 3 ] || { echo "harness: the watchdog exited $rc, not 3"; fail=1; }
[ "$fail" = 0 ] && echo "harness: RUN() picks tests by name and prefix; the watchdog names the hung test"
exit $fail
