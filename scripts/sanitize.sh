#!/usr/bin/env bash
# `make sanitize`: swift test and the C tests under AddressSanitizer (plus
# UBSan for the C tests) and under ThreadSanitizer. Each sanitizer gets its
# own build folder (.build/sanitize-<name>); the C tests are compiled with
# the Swift toolchain's clang, so they share one sanitizer runtime with the
# library. Logs go to build/sanitize/. Prints one line per run and fails
# when a test fails or a sanitizer reports anything.
#
#   scripts/sanitize.sh [address|thread]...   (both by default)
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
swift="${SWIFT:-swift}"
clang="$(dirname "$(readlink -f "$(command -v swiftc)")")/clang"
swiftlib="$(dirname "$(dirname "$(readlink -f "$(command -v swiftc)")")")/lib/swift/linux"
logs="$root/build/sanitize"
mkdir -p "$logs"
status=0
sanitizers=("$@")
[ ${#sanitizers[@]} -gt 0 ] || sanitizers=(address thread)

# Sanitizer reports in a log: ASan/LSan errors, UBSan runtime errors, TSan warnings.
reports() { grep -c -E '^(==[0-9]+==ERROR: (Address|Leak)Sanitizer|.*runtime error: |WARNING: ThreadSanitizer)' "$1"; }

for san in "${sanitizers[@]}"; do
    case "$san" in
        address) cflags="-fsanitize=address,undefined -fno-omit-frame-pointer"
                 c_tests=$(ls Tests/c/test_*.c | xargs -n1 basename | sed 's/\.c$//')
                 export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0"
                 export UBSAN_OPTIONS="print_stacktrace=1" ;;
        # fork(): TSan does not support new threads in the child of a
        # multi-threaded parent, which test_fork and test_fork_async do on purpose; they run
        # under ASan and in make test.
        # test_cloexec lists an exec'd copy's descriptors: the TSan runtime's
        # own pipes show there (it runs under ASan and in make test).
        # test_timeouts runs itself under libfaketime (LD_PRELOAD), whose
        # start-up dlsym allocates before TSan's allocator is ready: the
        # process deadlocks before main (gdb: FutexWait in TSan's
        # allocator under _dl_lookup_symbol_x from libfaketime). It runs
        # under ASan and in make test.
        # The toolchain's TSan runtime intercepts libdispatch: link it.
        # -rdynamic: test_dlclose dlopen()s the TSan library, whose __tsan_*
        # references resolve against the test's own (static) TSan runtime
        # only if the executable exports it (before: "undefined symbol:
        # __tsan_external_write").
        thread)  cflags="-fsanitize=thread -rdynamic -L$swiftlib -ldispatch -lBlocksRuntime -Wl,-rpath,$swiftlib"
                 c_tests=$(ls Tests/c/test_*.c | xargs -n1 basename | sed 's/\.c$//' | grep -v -E '^test_(fork|fork_async|cloexec|timeouts)$')
                 export TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1" ;;
        *) echo "unknown sanitizer: $san (address or thread)" >&2; exit 2 ;;
    esac
    scratch="$root/.build/sanitize-$san"
    start=$(date +%s)
    if ! "$swift" build --build-tests --sanitize="$san" --scratch-path "$scratch" >"$logs/$san-build.log" 2>&1; then
        tail -n 30 "$logs/$san-build.log"; echo "sanitize $san: swift build failed"; status=1; continue
    fi
    # swift test
    scripts/with-devserver.sh "$swift" test --skip-build --sanitize="$san" --scratch-path "$scratch" \
        >"$logs/$san-swift.log" 2>&1
    rc=$?
    summary=$(grep -E 'Executed [0-9]+ tests' "$logs/$san-swift.log" | tail -n 1 | sed 's/^[[:space:]]*//')
    n=$(reports "$logs/$san-swift.log")
    echo "sanitize $san: swift test: ${summary:-no summary} (exit $rc); $n sanitizer reports"
    [ "$rc" = 0 ] && [ "$n" = 0 ] || status=1

    # The C tests through an instrumented libappnorth.so.
    if ! "$swift" build --product appnorth --sanitize="$san" --scratch-path "$scratch" >>"$logs/$san-build.log" 2>&1; then
        tail -n 30 "$logs/$san-build.log"; echo "sanitize $san: library build failed"; status=1; continue
    fi
    lib="$scratch/debug"
    bins=()
    for t in $c_tests; do
        CC="$clang" CFLAGS="-O1 -g -Wall -Werror $cflags -Iinclude" \
            scripts/build-c-test.sh "$scratch/$t" "Tests/c/$t.c" "$(cd "$lib" && pwd)" \
            >>"$logs/$san-build.log" 2>&1 \
            || { tail -n 20 "$logs/$san-build.log"; echo "sanitize $san: cannot compile $t"; status=1; continue; }
        bins+=("$scratch/$t")
    done
    APPNORTH_TEST_TIMEOUT=900 APPNORTH_TEST_FORKS=50 \
        scripts/with-devserver.sh scripts/run-c-tests.sh "${bins[@]}" >"$logs/$san-c.log" 2>&1
    rc=$?
    n=$(reports "$logs/$san-c.log")
    echo "sanitize $san: $(tail -n 1 "$logs/$san-c.log") (exit $rc); $n sanitizer reports; $(( $(date +%s) - start )) s"
    [ "$rc" = 0 ] && [ "$n" = 0 ] || status=1
done
[ "$status" = 0 ] && echo "sanitize: clean" || echo "sanitize: reports or failures; logs in $logs"
exit $status
