#!/usr/bin/env bash
# LuaJIT's compiled frame loop: the shipped walkthrough (examples/luajit)
# runs 300 idle frames in a game-shaped loop, then a read whose completion
# runs in the same, by then compiled, loop. It must pass: the example turns
# compilation off for frame(), the function that calls appnorth_dispatch().
# The same file with that one jit.off line removed must abort with LuaJIT's
# "bad callback" panic, which proves the run reaches the case it guards.
# Needs the dev server ($APPNORTH_TEST_SERVER, --seed-demo) and a working
# luajit (skipped with the command to run otherwise). Usage: luajit_idle_frames.sh DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dist="$(cd "$1" && pwd)"
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
if ! toolchain luajit '{} -e "require(\"ffi\")"' luajit; then
    echo "luajit idle frames: skipped ($TOOL_WHY)"
    exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
example="$root/examples/luajit/walkthrough.lua"
grep -qx 'jit.off(frame)' "$example" || { echo "luajit idle frames: $example has no 'jit.off(frame)' line"; exit 1; }

if ! APPNORTH_IDLE_FRAMES=300 LANG=C "$TOOL" "$example" "$dist" "$APPNORTH_TEST_SERVER" demo "$work/on" \
        > "$work/off.log" 2>&1; then
    cat "$work/off.log"; echo "luajit idle frames: the shipped example failed after 300 idle frames"; exit 1
fi
grep -q '^0\. 300 idle frames, then a read completed' "$work/off.log" \
    || { cat "$work/off.log"; echo "luajit idle frames: no completion after the idle frames"; exit 1; }

grep -vx 'jit.off(frame)' "$example" > "$work/compiled.lua"
if APPNORTH_IDLE_FRAMES=300 LANG=C "$TOOL" "$work/compiled.lua" "$dist" "$APPNORTH_TEST_SERVER" demo "$work/compiled" \
        > "$work/compiled.log" 2>&1; then
    echo "luajit idle frames: without jit.off(frame) the example did not abort: the test no longer reaches the compiled loop"
    exit 1
fi
grep -q 'bad callback' "$work/compiled.log" \
    || { cat "$work/compiled.log"; echo "luajit idle frames: without jit.off it failed, but not with 'bad callback'"; exit 1; }
echo "luajit idle frames: 300 idle frames then a completion pass with jit.off(frame); without it LuaJIT aborts (bad callback)"
