#!/usr/bin/env bash
# make test-node, after scripts/test-node.sh: the short round of the Node.js
# binding's memory probe (bench/node/leak_probe.js, which make bench runs
# with 10^6 calls of each kind): 10^5 events.track(), 10^5 config reads and
# 2x10^4 awaited non-blocking reads (one in ten aborted), each after a
# warm-up of as many, against $APPNORTH_TEST_SERVER; fails when the RSS
# grew by more than the bound below.
#
# The bound, 3 MiB, is not the bench's goal scaled down with the calls: the
# probe's RSS readings spread over about +-0.7 MB with no memory retained
# (V8 and malloc give pages back late), and 8 rounds of this size grew by
# 0.25 to 1.5 MiB in all with no trend (10^6 tracks grow no more than 10^5).
# A tenth of the goal would fail on that noise. 3 MiB still fails on any
# leak of about 30 bytes or more per track() or config read, or 150 bytes
# per non-blocking read. So it also bounds the JS heap in use after full
# collections, which is exact to a few KiB (+90 to +170 KiB here, from
# compiled code): 512 KiB fails on any leak of a JS object per 10 calls or
# per non-blocking read (keeping each result: +1.3 MiB, caught; the RSS
# bound alone missed it).
# Without a working node it says so and skips, as test-node.sh does.
# Usage: test-node-leak.sh BUILD_DIR DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
host_toolchains
for reason in "${TC_SKIPPED[@]}"; do
    case "$reason" in "Node: "*) echo "test-node-leak: skipped: $reason"; exit 0 ;; esac
done
PATH="$(dirname "$TC_node"):$PATH"
mkdir -p "$1/node-leak"
out="$(cd "$1/node-leak" && pwd)"
"$root/scripts/node-package.sh" "$2" "$out" > "$out/package.log" 2>&1 || { cat "$out/package.log"; exit 1; }
node --expose-gc --max-semi-space-size=1 "$root/bench/node/leak_probe.js" "$APPNORTH_TEST_SERVER" "$out/appnorth" \
    --calls 100000 --warmup 100000 --async-share 0.2 --bound-kib 3072 --heap-bound-kib 512 --out "$out/leak_node.json" > /dev/null
