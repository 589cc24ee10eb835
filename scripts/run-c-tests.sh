#!/usr/bin/env bash
# Runs the C test programs given as arguments and sums their "N passed, N
# failed" lines into one. $APPNORTH_TEST_JOBS lanes (2 by default) run them
# side by side, each lane with its own dev server (scripts/with-devserver.sh,
# DEVSERVER_TLS=1) that runs one program at a time, reset before each:
# programs that reset the server or count its requests never share one. Lanes take the next program
# from one queue, the slowest of the last run first (build/c-test-times.txt);
# the output is printed per program in the order given. $APPNORTH_TEST_WRAPPER
# runs each program under a command (make test-valgrind: valgrind ...).
# With APPNORTH_TEST set (make test-c TEST='name,prefix*'), only the named
# RUN() tests run: a program whose source has no RUN() registry runs only
# when its own name is picked, and a pick that matches nothing fails.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

# One program: its output in $out/NAME.log, then "rc ran ms" in $out/NAME.rc.
run_one() {
    local t=$1 out=$2 name picked=${APPNORTH_TEST:-} env=() rc ran=0 start
    name=$(basename "$t")
    if [ -n "$picked" ]; then
        if [[ ",$picked," == *",$name,"* ]]; then env=(env -u APPNORTH_TEST)
        elif ! grep -q 'RUN(\|RUN_WITH(' "$root/Tests/c/$name.c" 2>/dev/null; then echo "skip 0 0" > "$out/$name.rc"; return
        fi
    fi
    start=$(date +%s%N)
    # shellcheck disable=SC2086 # the wrapper is a command line
    "${env[@]}" ${APPNORTH_TEST_WRAPPER:-} "$t" > "$out/$name.log" 2>&1; rc=$?
    if [ -n "$picked" ]; then
        ran=$(grep -c '^run: ' "$out/$name.log")
        [ ${#env[@]} -gt 0 ] && [ "$ran" = 0 ] && ran=1
        [ "$ran" = 0 ] && rc=skip
    fi
    echo "$rc $ran $((($(date +%s%N) - start) / 1000000))" > "$out/$name.rc"
}

# A lane (inside its own dev server): takes programs off the queue until it
# is empty; each starts on a reset server (no data, faults or held requests
# left by the one before).
if [ "${1:-}" = --lane ]; then
    queue=$2 out=$3
    while :; do
        t=$(flock "$queue.lock" sh -c 'head -n 1 "$1" && sed -i 1d "$1"' _ "$queue")
        [ -n "$t" ] || exit 0
        python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1] + "/admin/reset", b"{}"), timeout=30)' \
            "$APPNORTH_TEST_SERVER" \
            || { echo "$t: the lane's dev server did not reset" > "$out/$(basename "$t").log"; echo "1 1 0" > "$out/$(basename "$t").rc"; continue; }
        run_one "$t" "$out"
    done
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
wrapper=${APPNORTH_TEST_WRAPPER:-}
times="$root/build/c-test-times${wrapper:+-${wrapper%% *}}.txt"
# The queue: slowest first by the last run's times, then the rest as given.
for t in "$@"; do
    ms=$(awk -v n="$(basename "$t")" '$1 == n { print $2 }' "$times" 2>/dev/null)
    echo "${ms:-0} $t"
done | sort -s -k1,1nr | cut -d' ' -f2- > "$out/queue"
jobs=${APPNORTH_TEST_JOBS:-2}
lanes=()
for _ in $(seq 1 "$jobs"); do
    DEVSERVER_TLS=1 "$root/scripts/with-devserver.sh" "$0" --lane "$out/queue" "$out" &
    lanes+=($!)
done
for lane in "${lanes[@]}"; do wait "$lane"; done

passed=0; failed=0; status=0; ran=0
: > "$out/times"
for t in "$@"; do
    name=$(basename "$t")
    [ -f "$out/$name.rc" ] || { echo "$t: not run (a lane failed to start)"; failed=$((failed + 1)); status=1; continue; }
    read -r rc n ms < "$out/$name.rc"
    [ "$rc" = skip ] && continue
    ran=$((ran + n))
    echo "$name $ms" >> "$out/times"
    grep -v -E '^[0-9]+ passed, [0-9]+ failed$' "$out/$name.log"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out/$name.log" | tail -n 1)
    if [ -z "$line" ]; then echo "$t: crashed or printed no summary (exit $rc)"; failed=$((failed + 1)); status=1; continue; fi
    p=${line%% passed*}; f=${line#*, }; f=${f%% failed*}
    passed=$((passed + p)); failed=$((failed + f))
    [ "$rc" = 0 ] || status=1
done
[ -n "${APPNORTH_TEST:-}" ] || cp "$out/times" "$times" 2>/dev/null || true
if [ -n "${APPNORTH_TEST:-}" ] && [ "$ran" = 0 ]; then
    echo "C: no test matches '$APPNORTH_TEST' (names: the RUN() lines of Tests/c/test_*.c, or a program name)"; exit 1
fi
slowest=$(sort -k2,2nr "$out/times" | head -n 3 | awk '{ printf "%s%s %.0f s", sep, $1, $2 / 1000; sep = ", " }')
echo "C: $passed passed, $failed failed ($jobs lanes; slowest: $slowest)"
[ "$failed" = 0 ] && [ "$status" = 0 ]
