#!/usr/bin/env bash
# Runs the four Python walkthroughs against $APPNORTH_TEST_SERVER (the dev
# server seeded with the "demo" app), each with a fresh data directory.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python="${PYTHON:-python3}"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
run() {
    echo
    echo "=== python $1 ==="
    "$python" "$here/$1.py" "$APPNORTH_TEST_SERVER" demo "${@:2}"
}
run boards
run offline_comment "$data/offline_comment"
run track_events "$data/track_events"
run remote_config "$data/remote_config"
