#!/usr/bin/env bash
# Installs what building and testing libappnorth needs, or says exactly what
# to install. Debian packages through apt-get when run as root; the Python
# test tools in a virtualenv (.venv) through pip.
set -euo pipefail
cd "$(dirname "$0")/.."

# cmake: the CMake consumer test; bindgen + libclang1-14: the Rust FFI check;
# g++ and golang-go: the C++ and Go examples; faketime: the 30 s / 60 s
# network timeouts observed on fast clocks (Tests/c/test_timeouts.c);
# abigail-tools: the ABI check against the last release (scripts/abi-check.py);
# mandoc: the man pages' lint (scripts/man-pages.py). The
# other host examples' toolchains (cargo, mono, luajit, java with JNA, ruby
# with ffi) are checked by running them, below.
packages=(libjansson-dev libsqlite3-dev libcurl4-openssl-dev zlib1g-dev pkg-config valgrind cmake bindgen libclang1-14
          g++ golang-go faketime debootstrap abigail-tools mandoc)
# dpkg-dev and lintian: make deb builds and checks the Debian packages.
packages+=(dpkg-dev lintian)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "ensure-deps: installing ${missing[*]}"
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
    else
        echo "ensure-deps: missing Debian packages: ${missing[*]}" >&2
        echo "  run: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# Each host example's toolchain must run (`cargo --version`, `go version`,
# ...), not only be on PATH: as root a broken or missing one is replaced by
# Debian's package; otherwise its example is skipped and this says what to run.
# shellcheck source=scripts/toolchains.sh
source scripts/toolchains.sh
host_toolchains
for skipped in "${TC_SKIPPED[@]}"; do echo "ensure-deps: the $skipped (its example is skipped)" >&2; done

command -v swift >/dev/null || { echo "ensure-deps: swift (6.3 or later) is not on PATH" >&2; exit 1; }

if [ "${1:-}" = "--python" ]; then
    if [ ! -x .venv/bin/pytest ]; then
        echo "ensure-deps: creating .venv with the Python test tools"
        python3 -m venv .venv
    fi
    # Again whenever the requirements change (a copy marks what is installed).
    if ! cmp -s bindings/python/requirements-test.txt .venv/requirements-test.txt; then
        .venv/bin/pip install -q --disable-pip-version-check -r bindings/python/requirements-test.txt
        cp bindings/python/requirements-test.txt .venv/requirements-test.txt
    fi
    # The binding itself, editable, so tests and subprocesses import it.
    .venv/bin/python -c "import appnorth" 2>/dev/null \
        || .venv/bin/pip install -q --disable-pip-version-check -e bindings/python
fi
