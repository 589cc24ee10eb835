#!/usr/bin/env bash
# Runs each C test program and sums their "N passed, N failed" lines into one.
set -uo pipefail
passed=0; failed=0; status=0
for t in "$@"; do
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1)); status=1; continue; fi
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
    passed=$((passed + p)); failed=$((failed + f))
    [ "$rc" = 0 ] || status=1
done
echo "C: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$status" = 0 ]
