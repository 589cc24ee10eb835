#!/bin/sh
# Builds the libFuzzer harnesses (Swift, -sanitize=fuzzer,address) and runs
# each for FUZZ_SECONDS from the committed seed corpus, one at a time.
# Prints executions and crashes per harness; crash inputs are saved under
# build/fuzz/artifacts/<harness>/.
#
#   fuzz/run.sh [harness ...]        (default: every harness in fuzz/harnesses)
#   FUZZ_SECONDS=60  seconds per harness (default 60)
#   FUZZ_RESTARTS=3  how often a harness is restarted after a crash
#   FUZZ_FLAGS=...   extra libFuzzer flags, e.g. -jobs=1 -dict=...
set -eu
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
RESTARTS=${FUZZ_RESTARTS:-3}
OUT=build/fuzz
SWIFTC=${SWIFTC:-swiftc}
INCLUDES="-I Sources/CJansson -I Sources/CSQLite -I Sources/CCurl -I Sources/CSystem -I Sources/CZlib"
FLAGS="-sanitize=fuzzer,address -parse-as-library -O -g"
mkdir -p "$OUT"

# The core, once, as a static library with its module (-enable-testing, so
# harnesses reach internal parsers with @testable import).
core_sources=$(find Sources/AppNorthCore -name '*.swift' | sort)
if [ ! -f "$OUT/libAppNorthCore.a" ] || [ -n "$(find Sources/AppNorthCore -newer "$OUT/libAppNorthCore.a" -name '*.swift')" ]; then
    echo "fuzz: building the core with -sanitize=fuzzer,address"
    # shellcheck disable=SC2086
    nice -n 10 "$SWIFTC" -swift-version 6 $FLAGS -enable-testing -module-name AppNorthCore -package-name appnorth -wmo \
        -emit-module -emit-module-path "$OUT/AppNorthCore.swiftmodule" -emit-library -static \
        $INCLUDES $core_sources -o "$OUT/libAppNorthCore.a"
fi

if [ $# -gt 0 ]; then harnesses="$*"; else
    harnesses=$(for f in fuzz/harnesses/*.swift; do basename "$f" .swift; done)
fi

for h in $harnesses; do
    src=fuzz/harnesses/$h.swift
    [ -f "$src" ] || { echo "fuzz: no harness $src"; exit 1; }
    if [ ! -x "$OUT/$h" ] || [ "$src" -nt "$OUT/$h" ] || [ "$OUT/libAppNorthCore.a" -nt "$OUT/$h" ] \
       || [ fuzz/support/FuzzInput.swift -nt "$OUT/$h" ]; then
        echo "fuzz: building $h"
        rm -f "$OUT/$h"  # a failed build must not leave an old binary to run
        # shellcheck disable=SC2086
        nice -n 10 "$SWIFTC" -swift-version 5 $FLAGS -module-name "fuzz_$h" -package-name appnorth -I "$OUT" $INCLUDES \
            "$src" fuzz/support/FuzzInput.swift "$OUT/libAppNorthCore.a" \
            -ljansson -lsqlite3 -lcurl -lz -o "$OUT/$h" 2>&1 | grep -v "Cannot export local symbol" || true
        [ -x "$OUT/$h" ] || { echo "fuzz: building $h failed"; exit 1; }
    fi
done

# Swift's own backtracer would run inside ASan's crash handler: leave the
# report to libFuzzer.
export SWIFT_BACKTRACE=enable=no
summary=$OUT/summary.txt
: > "$summary"
total_execs=0
total_crashes=0
for h in $harnesses; do
    work=$OUT/corpus/$h artifacts=$OUT/artifacts/$h
    mkdir -p "$work" "$artifacts" "fuzz/corpus/$h"
    before=$(ls "$artifacts" | wc -l)
    execs=0 runs=0 left=$SECONDS_EACH
    start=$(date +%s)
    while [ "$left" -gt 0 ] && [ "$runs" -le "$RESTARTS" ]; do
        log=$OUT/$h.$$.log
        # New inputs go to the work corpus; the committed seeds stay as they are.
        # shellcheck disable=SC2086
        nice -n 10 "$OUT/$h" -max_total_time="$left" -print_final_stats=1 -timeout=20 -rss_limit_mb=2048 \
            -max_len=65536 -artifact_prefix="$artifacts/" ${FUZZ_FLAGS:-} "$work" "fuzz/corpus/$h" \
            > "$log" 2>&1 || true
        n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        execs=$((execs + ${n:-0}))
        runs=$((runs + 1))
        left=$((SECONDS_EACH - ($(date +%s) - start)))
        if grep -q "^stat::" "$log" && ! grep -qE "ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer)|deadly signal|fuzz invariant broken" "$log"; then
            break
        fi
        grep -E "fuzz invariant broken|ERROR: |Fatal error|SUMMARY" "$log" | head -n 5 | sed "s/^/fuzz: $h: /"
    done
    crashes=$(( $(ls "$artifacts" | wc -l) - before ))
    total_execs=$((total_execs + execs))
    total_crashes=$((total_crashes + crashes))
    printf "fuzz: %-16s %6ss %12s executions %3s crashes\n" "$h" "$(($(date +%s) - start))" "$execs" "$crashes" | tee -a "$summary"
done
printf "fuzz: %-16s %6s  %12s executions %3s crashes\n" "total" "" "$total_execs" "$total_crashes" | tee -a "$summary"
[ "$total_crashes" -eq 0 ]
