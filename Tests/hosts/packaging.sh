#!/usr/bin/env bash
# The packages work where they land: `make install PREFIX=...` and a copy of
# dist/ moved somewhere else are each consumed through pkg-config and through
# CMake's find_package(appnorth 0.2), their man pages are found, and nothing
# points back at the tree they came from. Usage: packaging.sh DIST_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dist="$(cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

make -C "$root" --no-print-directory -s install PREFIX="$work/installed" >/dev/null
cp -a "$dist" "$work/copied-dist"

for prefix in "$work/installed" "$work/copied-dist"; do
    name=$(basename "$prefix")
    # pkg-config: the .pc file resolves its prefix from its own location.
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    for dir in includedir:include libdir:lib; do
        got=$(realpath -m "$(pkg-config --variable="${dir%%:*}" appnorth)")
        [ "$got" = "$(realpath "$prefix/${dir#*:}")" ] \
            || { echo "packaging: $name: appnorth.pc's ${dir%%:*} is $got, not under $prefix"; exit 1; }
    done
    flags=$(pkg-config --cflags --libs appnorth)
    if grep -rqs "$dist" "$prefix/lib/pkgconfig" "$prefix/lib/cmake"; then
        echo "packaging: $name: a package file names the build tree $dist"; exit 1
    fi
    ${CC:-cc} -o "$work/$name-boards" "$root/examples/c/boards.c" $flags \
        $(pkg-config --cflags --libs jansson) -Wl,-rpath,"$prefix/lib"
    "$work/$name-boards" --version >/dev/null
    # The man pages: appnorth(3) and one per function of abi/appnorth.symbols.
    for page in appnorth $(grep -oP 'appnorth_\w+(?=\()' "$root/abi/appnorth.symbols"); do
        [ -s "$prefix/share/man/man3/$page.3" ] || { echo "packaging: $name: no man page share/man/man3/$page.3"; exit 1; }
    done
    unset PKG_CONFIG_PATH

    # CMake: find_package(appnorth 0.2 REQUIRED) and appnorth::appnorth.
    cmake -S "$root/Tests/hosts/cmake_consumer" -B "$work/$name-cmake" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_RPATH="$prefix/lib" >"$work/cmake.log" 2>&1 \
        && cmake --build "$work/$name-cmake" >>"$work/cmake.log" 2>&1 \
        || { cat "$work/cmake.log"; echo "packaging: $name: the CMake consumer did not build"; exit 1; }
    "$work/$name-cmake/consumer" >/dev/null
    "$work/$name-cmake/consumer_cpp" >/dev/null
    # The version file refuses another major version.
    if cmake -S "$root/Tests/hosts/cmake_consumer" -B "$work/$name-cmake-v1" \
        -DCMAKE_PREFIX_PATH="$prefix" -DAPPNORTH_MIN_VERSION=1.0 >"$work/cmake.log" 2>&1; then
        echo "packaging: $name: find_package(appnorth 1.0) accepted a 0.x package"; exit 1
    fi
done
echo "packaging: make install and a copied dist/ both work through pkg-config and find_package(appnorth 0.2) (C and C++)"
