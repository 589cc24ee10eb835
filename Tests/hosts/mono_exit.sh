#!/usr/bin/env bash
# Issue #31's default-mode C# (Mono) exit, run RUNS times (default 20): one
# non-blocking call whose completion runs on the transfer thread, every
# handle freed, Environment.Exit(0) (Tests/hosts/mono_exit.cs). Each run must
# exit 0 within 60 s: a library thread left alive after the last free makes
# Mono's exit wait for ever. Needs the dev server ($APPNORTH_TEST_SERVER),
# mcs and mono (installed as root, else skipped with the command to run).
# Usage: mono_exit.sh DIST_DIR [RUNS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dist="$(cd "$1" && pwd)"
runs="${2:-20}"
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
if ! toolchain mcs '{} --version' mono-mcs; then echo "mono exit: skipped ($TOOL_WHY)"; exit 0; fi
mcs="$TOOL"
if ! toolchain mono '{} --version' mono-runtime; then echo "mono exit: skipped ($TOOL_WHY)"; exit 0; fi
mono="$TOOL"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$mcs" -nologo -warnaserror -out:"$work/mono_exit.exe" "$root/examples/csharp/AppNorthNative.cs" "$root/Tests/hosts/mono_exit.cs"
failed=0
for i in $(seq 1 "$runs"); do
    rc=0
    LANG=C LD_LIBRARY_PATH="$dist/lib" timeout -k 5 60 "$mono" "$work/mono_exit.exe" "$APPNORTH_TEST_SERVER" \
        > "$work/$i.log" 2>&1 || rc=$?
    if [ "$rc" != 0 ] || [ "$(tail -n 1 "$work/$i.log")" != "freed every handle; exiting" ]; then
        failed=$((failed + 1))
        { echo "mono exit: run $i ended with status $rc (124: hung past 60 s):"; tail -n 5 "$work/$i.log"; } >&2
    fi
done
[ "$failed" = 0 ] || { echo "mono exit: $failed of $runs runs did not exit"; exit 1; }
echo "mono exit: $runs of $runs default-mode exits after a non-blocking call and the last free"
