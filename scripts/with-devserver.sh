#!/usr/bin/env bash
# Runs a command with the local API server up on a free loopback port, then
# stops the server. The command sees APPNORTH_TEST_SERVER=http://127.0.0.1:PORT.
# DEVSERVER_COUNT=N (default 1) starts N plain servers, each with its own
# database, for test processes that run in parallel: the command also sees
# APPNORTH_TEST_SERVERS (their URLs, space-separated; the first is
# APPNORTH_TEST_SERVER) and APPNORTH_TEST_SERVER_LOCKS, a directory where a
# test process takes server K by holding an flock on K.lock (TestServer.swift).
# Extra server flags come from DEVSERVER_FLAGS (for instance --seed-demo).
# DEVSERVER_TLS=1 also makes a throwaway test PKI and starts an HTTPS dev
# server, TLS listeners with bad certificates and a forward proxy; it exports
#   APPNORTH_TEST_TLS_SERVER   https://127.0.0.1:PORT (cert for 127.0.0.1/localhost)
#   APPNORTH_TEST_TLS_CA       the test CA's PEM file (nothing else trusts it)
#   APPNORTH_TEST_TLS_PIN      the sha256// pin of the HTTPS server's key
#   APPNORTH_TEST_TLS_EXPIRED, APPNORTH_TEST_TLS_WRONG_HOST, APPNORTH_TEST_TLS_SELF_SIGNED
#                              https URLs of listeners that must fail the handshake
#   APPNORTH_TEST_PROXY        http://127.0.0.1:PORT, a forward proxy
#   APPNORTH_TEST_PROXY_LOG    the file where it appends each request it forwards
#   APPNORTH_TEST_H2_SERVER    https://127.0.0.1:PORT, an HTTP/2 front (devserver/h2front,
#                              built with go) forwarding to the plain dev server
#   APPNORTH_TEST_H2_LOG       the file where it appends "HTTP/2.0 GET /path conn=N" per request
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
pids=""
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    for pid in $pids; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
# wait_for FILE PID LOG: until the process wrote FILE (about 30 s at most).
wait_for() {
    for _ in $(seq 1 600); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; echo "$3: process failed to start" >&2; exit 1; }
        sleep 0.05
    done
    echo "$1 was not written in time" >&2; exit 1
}
count="${DEVSERVER_COUNT:-1}"
urls=""
for k in $(seq 1 "$count"); do
    python3 "$root/devserver/appnorth_devserver.py" --host 127.0.0.1 --port 0 \
        --db "$work/server$k.sqlite3" --port-file "$work/port$k" ${DEVSERVER_FLAGS:-} >"$work/server$k.log" 2>&1 &
    eval "server$k=$!"; pids="$pids $!"
done
for k in $(seq 1 "$count"); do
    eval "pid=\$server$k"
    wait_for "$work/port$k" "$pid" "$work/server$k.log"
    urls="$urls http://127.0.0.1:$(cat "$work/port$k")"
done
urls="${urls# }"
export APPNORTH_TEST_SERVER="${urls%% *}"
if [ "$count" -gt 1 ]; then
    mkdir -p "$work/locks"
    export APPNORTH_TEST_SERVERS="$urls" APPNORTH_TEST_SERVER_LOCKS="$work/locks"
fi

if [ "${DEVSERVER_TLS:-0}" = 1 ]; then
    pki="$work/pki"
    "$root/scripts/make-test-certs.sh" "$pki"
    python3 "$root/devserver/appnorth_devserver.py" --host 127.0.0.1 --port 0 --port-file "$work/tls-port" \
        --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" >"$work/tls-server.log" 2>&1 &
    tls_server=$!; pids="$pids $tls_server"
    python3 "$root/devserver/appnorth_tls_listeners.py" --ports-file "$work/bad-ports" \
        "expired=$pki/expired.pem:$pki/expired.key" "wronghost=$pki/wronghost.pem:$pki/wronghost.key" \
        "selfsigned=$pki/selfsigned.pem:$pki/selfsigned.key" >"$work/listeners.log" 2>&1 &
    listeners=$!; pids="$pids $listeners"
    : > "$work/proxy.log"
    python3 "$root/devserver/appnorth_proxy.py" --port 0 --port-file "$work/proxy-port" \
        --log-file "$work/proxy.log" >"$work/proxy.out" 2>&1 &
    proxy=$!; pids="$pids $proxy"
    go build -o "$work/h2front" "$root/devserver/h2front/main.go"
    : > "$work/h2front.log"
    "$work/h2front" --upstream "$APPNORTH_TEST_SERVER" --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" \
        --port-file "$work/h2-port" --log-file "$work/h2front.log" >"$work/h2front.out" 2>&1 &
    h2front=$!; pids="$pids $h2front"
    wait_for "$work/tls-port" "$tls_server" "$work/tls-server.log"
    wait_for "$work/bad-ports" "$listeners" "$work/listeners.log"
    wait_for "$work/proxy-port" "$proxy" "$work/proxy.out"
    wait_for "$work/h2-port" "$h2front" "$work/h2front.out"
    bad_port() { awk -v n="$1" '$1 == n { print $2 }' "$work/bad-ports"; }
    export APPNORTH_TEST_TLS_SERVER="https://127.0.0.1:$(cat "$work/tls-port")"
    export APPNORTH_TEST_TLS_CA="$pki/ca.pem"
    APPNORTH_TEST_TLS_PIN="$(cat "$pki/server.pin")"; export APPNORTH_TEST_TLS_PIN
    export APPNORTH_TEST_TLS_EXPIRED="https://127.0.0.1:$(bad_port expired)"
    export APPNORTH_TEST_TLS_WRONG_HOST="https://127.0.0.1:$(bad_port wronghost)"
    export APPNORTH_TEST_TLS_SELF_SIGNED="https://127.0.0.1:$(bad_port selfsigned)"
    export APPNORTH_TEST_PROXY="http://127.0.0.1:$(cat "$work/proxy-port")"
    export APPNORTH_TEST_PROXY_LOG="$work/proxy.log"
    export APPNORTH_TEST_H2_SERVER="https://127.0.0.1:$(cat "$work/h2-port")"
    export APPNORTH_TEST_H2_LOG="$work/h2front.log"
fi
"$@"
