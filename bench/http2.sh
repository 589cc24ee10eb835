#!/usr/bin/env bash
# The HTTP/2 comparison (bench/c/bench_http2.c): makes a throwaway test PKI,
# builds devserver/h2front (Go) and starts two HTTPS fronts of the running
# dev server ($APPNORTH_TEST_SERVER), one speaking HTTP/2 and one with
# --h1-only, runs the program against both and stops them. Prints its JSON.
# usage: bench/http2.sh BUILD_DIR   (BUILD_DIR holds bench_http2)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
work="$(mktemp -d "${BENCH_TMP:-/tmp}/appnorth-bench-h2-XXXXXX")"
pids=""
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    for pid in $pids; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
"$root/scripts/make-test-certs.sh" "$work/pki" >&2
go build -o "$work/h2front" "$root/devserver/h2front/main.go"
for side in h1 h2; do
    flags=""
    [ $side = h1 ] && flags="--h1-only"
    "$work/h2front" --upstream "$APPNORTH_TEST_SERVER" --tls-cert "$work/pki/server.pem" \
        --tls-key "$work/pki/server.key" --port-file "$work/$side.port" --log-file "$work/$side.log" $flags \
        >"$work/$side.out" 2>&1 &
    pids="$pids $!"
done
for side in h1 h2; do
    for _ in $(seq 1 600); do [ -s "$work/$side.port" ] && break; sleep 0.05; done
    [ -s "$work/$side.port" ] || { cat "$work/$side.out" >&2; echo "h2front ($side) did not start" >&2; exit 1; }
done
"$build/bench_http2" "https://127.0.0.1:$(cat "$work/h1.port")" "$work/h1.log" \
    "https://127.0.0.1:$(cat "$work/h2.port")" "$work/h2.log" "$work/pki/ca.pem"
