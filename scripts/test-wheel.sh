#!/usr/bin/env bash
# Proves the wheel stands alone: a fresh venv from dist/appnorth-*.whl, no
# APPNORTH_LIBRARY / PYTHONPATH / LD_LIBRARY_PATH, run from an unrelated
# folder, imports appnorth from site-packages and runs the README's Python
# quickstart against the seeded dev server ($APPNORTH_TEST_SERVER), whose
# admin state must then hold the tracked event. As root (unshare), the
# system's libjansson, libcurl and libsqlite3 are hidden meanwhile, so the
# copies auditwheel bundled are the ones used.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
wheel="$(ls "$root"/dist/appnorth-*.whl)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check "$wheel"
"$root/scripts/readme-block.py" "$root/README.md" "Quickstart: Python" python >"$work/quickstart.py"
cat >"$work/run.sh" <<SH
set -eu
cd "$work"
env -u APPNORTH_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH "$work/venv/bin/python" -X importtime -c \
  'import appnorth, sys; print("wheel: loads", appnorth.LIBRARY_PATH); assert "/site-packages/appnorth/" in appnorth.LIBRARY_PATH' \
  2>"$work/importtime.log"
env -u APPNORTH_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH APPNORTH_URL="$APPNORTH_TEST_SERVER" \
  "$work/venv/bin/python" "$work/quickstart.py" >"$work/quickstart.log"
SH
hidden=""
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    libs="$(ls /usr/lib/*/libjansson.so* /usr/lib/*/libcurl.so* /usr/lib/*/libsqlite3.so* 2>/dev/null || true)"
    unshare -m sh -c "for f in $(echo $libs); do mount --bind /dev/null \$f; done; sh $work/run.sh"
    hidden=" with the system's libjansson, libcurl and libsqlite3 hidden"
else
    sh "$work/run.sh"
    hidden=" (system libraries not hidden: needs root and unshare)"
fi
ms=$(awk -F'|' '/ appnorth$/ {gsub(/ /, "", $2); print int($2 / 1000)}' "$work/importtime.log")
python3 - "$APPNORTH_TEST_SERVER" <<'PY'
import json, sys, urllib.request
state = json.load(urllib.request.urlopen(sys.argv[1] + "/admin/apps/demo/state", timeout=10))
names = [e["name"] for e in state["events"]]
assert names.count("purchase") == 1, f"the quickstart's event did not arrive: {names}"
PY
# `pip install bindings/python` from the checkout packages the checkout's
# library (make dist is up to date here); a copy outside any checkout, with
# no APPNORTH_LIBRARY, stops with instructions instead of a library-less wheel.
python3 -m venv "$work/from-source"
"$work/from-source/bin/pip" install -q --disable-pip-version-check "$root/bindings/python" >/dev/null
(cd "$work" && env -u APPNORTH_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH "$work/from-source/bin/python" -c \
    'import appnorth; assert "/site-packages/appnorth/" in appnorth.LIBRARY_PATH, appnorth.LIBRARY_PATH')
cp -r "$root/bindings/python" "$work/outside"
rm -rf "$work/outside/build" "$work/outside"/*.egg-info
if env -u APPNORTH_LIBRARY "$work/from-source/bin/pip" install --disable-pip-version-check "$work/outside" \
        >"$work/outside.log" 2>&1; then
    echo "test-wheel: a source tree outside a checkout installed without a library"; exit 1
fi
grep -q "not inside a libappnorth checkout" "$work/outside.log" && grep -q "APPNORTH_LIBRARY" "$work/outside.log" \
    || { cat "$work/outside.log"; echo "test-wheel: no instructions for the missing library"; exit 1; }
echo "wheel: pip install bindings/python packages the checkout's library; outside a checkout it says what to do"
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes) imports in ${ms} ms from a fresh venv" \
     "and its README quickstart delivered its event$hidden"
