#!/usr/bin/env bash
# Builds and runs the C++, Go and Rust walkthroughs against the local server
# ($APPNORTH_TEST_SERVER, seeded with --seed-demo), each with a fresh data
# directory. A language whose toolchain is missing is skipped with a note.
# The C++ one runs under AddressSanitizer and UndefinedBehaviorSanitizer.
# Usage: run-host-examples.sh BUILD_DIR DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
build="$(cd "$1" && pwd)"
dist="$(cd "$2" && pwd)"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
export PKG_CONFIG_PATH="$dist/lib/pkgconfig"
ran=(); skipped=()

walk() { # NAME BINARY: run the four walkthroughs, output indented
    echo
    echo "=== $1 ==="
    "$2" "$APPNORTH_TEST_SERVER" demo "$data/$1" 2>&1 || { echo "$1: the walkthrough failed"; exit 1; }
    ran+=("$1")
}

if command -v "${CXX:-c++}" >/dev/null; then
    mkdir -p "$build/examples/cpp"
    # ASan's leak check stays on; UBSan findings abort the run.
    "${CXX:-c++}" -std=c++17 -O1 -g -Wall -Wextra -Werror -pedantic -fsanitize=address,undefined \
        -fno-sanitize-recover=all -fno-omit-frame-pointer -I"$dist/include" \
        -o "$build/examples/cpp/walkthrough" "$root/examples/cpp/walkthrough.cpp" \
        -L"$dist/lib" -lappnorth -Wl,-rpath,"$dist/lib"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        walk "C++ (ASan+UBSan)" "$build/examples/cpp/walkthrough"
else skipped+=("C++ (no ${CXX:-c++})"); fi

if command -v go >/dev/null; then
    # Offline and inside the build tree: no module downloads, no ~/go.
    (cd "$root/examples/go" && GOCACHE="$build/go/cache" GOPATH="$build/go/path" GOPROXY=off GOFLAGS=-mod=mod \
        CGO_LDFLAGS="-Wl,-rpath,$dist/lib" go build -o "$build/examples/go/walkthrough" .)
    walk "Go (cgo)" "$build/examples/go/walkthrough"
else skipped+=("Go (no go; Debian: apt-get install golang-go)"); fi

if command -v cargo >/dev/null; then
    cargo build --offline --release -q --manifest-path "$root/examples/rust/Cargo.toml" --target-dir "$build/rust"
    walk "Rust (extern C)" "$build/rust/release/walkthrough"
else skipped+=("Rust (no cargo; Debian: apt-get install cargo)"); fi

echo
echo "host examples: ran ${#ran[@]} (${ran[*]:-none})${skipped:+; skipped: ${skipped[*]}}"
