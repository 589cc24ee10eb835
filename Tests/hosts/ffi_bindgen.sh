#!/usr/bin/env bash
# bindgen reads the header the way a Rust user runs it (no special flags):
# the status, network, consent and tier constants must come out as signed
# 32-bit values, so `rc == APPNORTH_OK` compiles against an int32_t status.
# A small program over the generated bindings is built with rustc (no cargo,
# no crates) and run against dist/: the first rustc that works
# (scripts/toolchains.sh: a rustup proxy with no default toolchain, as in a
# fresh HOME, is passed over for Debian's). Skipped, with a message, without
# bindgen, libclang or a working rustc. Usage: ffi_bindgen.sh DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dist="$(cd "$1" && pwd)"
# shellcheck source=scripts/toolchains.sh
source "$root/scripts/toolchains.sh"
command -v bindgen >/dev/null || { echo "bindgen: skipped (bindgen is not installed; Debian: apt-get install bindgen libclang1-14)"; exit 0; }
toolchain rustc '{} --version' rustc || { echo "bindgen: skipped ($TOOL_WHY)"; exit 0; }
rustc="$TOOL"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! bindgen "$dist/include/appnorth.h" --allowlist-function 'appnorth_.*' --allowlist-type 'appnorth_.*' \
        --allowlist-var 'APPNORTH_.*' -o "$work/appnorth_sys.rs" 2>"$work/bindgen.log"; then
    if grep -q "Unable to find libclang" "$work/bindgen.log"; then
        echo "bindgen: skipped (libclang is missing; Debian: apt-get install libclang1-14)"; exit 0
    fi
    cat "$work/bindgen.log"; echo "bindgen: could not read include/appnorth.h"; exit 1
fi
cp "$root/Tests/hosts/ffi_bindgen_check.rs" "$work/main.rs"
"$rustc" --edition 2021 -O -o "$work/check" "$work/main.rs" -L "$dist/lib" -C link-arg=-Wl,-rpath,"$dist/lib" \
    2>"$work/rustc.log" || { cat "$work/rustc.log"; echo "bindgen: the generated bindings do not type-check as int32"; exit 1; }
"$work/check"
