#!/usr/bin/env bash
# Runs ffi_luajit.lua on the shipped cdef with the names and values of
# dist/share/appnorth/appnorth.api.json. Needs a working luajit
# (scripts/toolchains.sh installs Debian's as root; skipped with the command
# to run otherwise). Usage: ffi_luajit.sh DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dist="$(cd "$1" && pwd)"
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
if ! toolchain luajit '{} -e "require(\"ffi\")"' luajit; then
    echo "luajit: skipped the cdef test ($TOOL_WHY)"
    exit 0
fi
expected="$(mktemp)"
trap 'rm -f "$expected"' EXIT
python3 - "$dist/share/appnorth/appnorth.api.json" > "$expected" <<'PY'
import json, sys
api = json.load(open(sys.argv[1]))
values = {c["name"]: c["value"] for c in api["constants"] if c["type"] != "string"}
values.update({v["name"]: v["value"] for e in api["enums"] for v in e["values"]})
print("return {functions = {" + ", ".join(json.dumps(f["name"]) for f in api["functions"]) + "},")
print(" constants = {" + ", ".join(f"{k} = {v}" for k, v in sorted(values.items())) + "}}")
PY
"$TOOL" "$root/Tests/hosts/ffi_luajit.lua" "$dist" "$expected"
