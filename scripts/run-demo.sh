#!/usr/bin/env bash
# Runs every C example against the local server ($APPNORTH_TEST_SERVER,
# seeded with the "demo" app), each with a fresh data directory.
set -euo pipefail
bin="$1"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
run() {
    echo
    echo "=== $1 ==="
    "$bin/$1" "$APPNORTH_TEST_SERVER" demo "${@:2}"
}
run boards
run offline_comment "$data/offline_comment"
run track_events "$data/track_events"
if [ -x "$bin/remote_config" ]; then run remote_config "$data/remote_config"; fi
run frame_loop
