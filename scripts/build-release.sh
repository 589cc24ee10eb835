#!/usr/bin/env bash
# The release library, compiled against the floor root's headers and linked
# against its libraries (Debian 11: glibc 2.31, GCC 10's libstdc++, curl
# 7.74, SQLite 3.34, jansson 2.13; docs/platforms.md), with the Swift
# runtime linked in statically. Whatever machine builds it, the symbol
# versions it needs are those the floor has; scripts/check-floor.sh proves it.
# Usage: scripts/build-release.sh SONAME   (prints the unstripped library's path)
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
cd "$top"
soname="$1"
sysroot="$(scripts/platform-roots.sh ensure debian11)"
multiarch="$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)"
toolchain="$(dirname "$(dirname "$(readlink -f "$(command -v swiftc)")")")"
# With -sdk the driver looks for the static Swift runtime under the sysroot:
# it is this toolchain's, whichever root the C side comes from.
ln -sfn "$toolchain/lib/swift_static" "$sysroot/usr/lib/swift_static"
ln -sfn "$toolchain/lib/swift" "$sysroot/usr/lib/swift"
# -z defs: every symbol resolves against the floor's libraries, or the link
# fails (without it a symbol only a newer library has would fail at load).
# The static Swift runtime calls std::__throw_bad_array_new_length, which
# GCC 11 added (GLIBCXX_3.4.29); GCC 10's libstdc++ has its base case,
# std::__throw_bad_alloc (bad_array_new_length is a bad_alloc):
# scripts/floor-shims.c.
mkdir -p .build/floor
shims="$top/.build/floor/floor-shims.o"
cc -O2 -fPIC -c -o "$shims" scripts/floor-shims.c
# The version script: each function in the node of the release that added it
# (docs/abi-policy.md), generated from abi/appnorth.symbols. SwiftPM relinks
# on a changed object, not on a changed script: a new script drops the link.
map="$top/.build/floor/appnorth.map"
python3 scripts/version-script.py abi/appnorth.symbols > "$map.new"
if cmp -s "$map.new" "$map"; then rm "$map.new"; else mv "$map.new" "$map"; rm -f .build/floor/release/libappnorth.so; fi
# The C target (Sources/CThreadCalls) is compiled against the same root
# (-Xcc reaches clang; -sdk only swiftc), with DWARF 4 debug info:
# valgrind 3.19 (Debian 12), which bench/profile_track.py runs on this
# unstripped library, cannot read clang's default DWARF 5 and gives up.
# SwiftPM reads the system libraries' .pc files itself: the root's, with
# their paths moved under it. Its own scratch folder: modules built against
# one sysroot's headers must not meet the debug build's.
PKG_CONFIG_SYSROOT_DIR="$sysroot" \
PKG_CONFIG_PATH="$sysroot/usr/lib/$multiarch/pkgconfig:$sysroot/usr/share/pkgconfig" \
    swift build -c release --product appnorth --scratch-path .build/floor \
    -Xswiftc -static-stdlib -Xswiftc -sdk -Xswiftc "$sysroot" -Xcc --sysroot="$sysroot" -Xcc -gdwarf-4 \
    -Xlinker -soname="$soname" -Xlinker --version-script="$map" \
    -Xlinker -z -Xlinker nodelete -Xlinker -z -Xlinker defs -Xlinker "$shims" >&2
echo "$top/.build/floor/release/libappnorth.so"
