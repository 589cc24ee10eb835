#!/usr/bin/env bash
# Runs a command with the local API server up on a free loopback port, then
# stops the server. The command sees APPNORTH_TEST_SERVER=http://127.0.0.1:PORT.
# Extra server flags come from DEVSERVER_FLAGS (for instance --seed-demo).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
portfile="$work/port"
python3 "$root/devserver/appnorth_devserver.py" --host 127.0.0.1 --port 0 \
    --db "$work/server.sqlite3" --port-file "$portfile" ${DEVSERVER_FLAGS:-} >"$work/server.log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 1 100); do
    [ -s "$portfile" ] && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; echo "dev server failed to start" >&2; exit 1; }
    sleep 0.05
done
[ -s "$portfile" ] || { echo "dev server did not report its port" >&2; exit 1; }
export APPNORTH_TEST_SERVER="http://127.0.0.1:$(cat "$portfile")"
"$@"
