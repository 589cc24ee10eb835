#!/usr/bin/env bash
# Runs each C test program and sums their "N passed, N failed" lines into one.
# With APPNORTH_TEST set (make test-c TEST='name,prefix*'), only the named
# RUN() tests run: a program whose source has no RUN() registry runs only
# when its own name is picked, and a pick that matches nothing fails.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
picked=${APPNORTH_TEST:-}
passed=0; failed=0; status=0; ran=0
for t in "$@"; do
    name=$(basename "$t")
    env=()
    if [ -n "$picked" ]; then
        if [[ ",$picked," == *",$name,"* ]]; then env=(env -u APPNORTH_TEST)
        elif ! grep -q 'RUN(\|RUN_WITH(' "$root/Tests/c/$name.c" 2>/dev/null; then continue
        fi
    fi
    out=$("${env[@]}" "$t" 2>&1); rc=$?
    if [ -n "$picked" ]; then
        n=$(printf '%s\n' "$out" | grep -c '^run: ')
        [ ${#env[@]} -eq 0 ] && [ "$n" = 0 ] && continue
        ran=$((ran + (n > 0 ? n : 1)))
    fi
    printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed, [0-9]+ failed$'
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1)); status=1; continue; fi
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
    passed=$((passed + p)); failed=$((failed + f))
    [ "$rc" = 0 ] || status=1
done
if [ -n "$picked" ] && [ "$ran" = 0 ]; then
    echo "C: no test matches '$picked' (names: the RUN() lines of Tests/c/test_*.c, or a program name)"; exit 1
fi
echo "C: $passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$status" = 0 ]
