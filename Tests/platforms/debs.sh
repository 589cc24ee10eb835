#!/usr/bin/env bash
# The Debian packages (make deb) installed the way the README shows. In a
# throwaway overlay of ROOT (a platform root from scripts/platform-roots.sh,
# or / for this machine), whose writes go to a tmpfs that ends with this
# script's mount namespace, so the cached root is never written:
#   - the README's "Debian packages" block runs as written: apt installs
#     libappnorth0 and libappnorth-dev from their files (dpkg refuses a
#     Depends the root cannot meet) and `cc app.c $(pkg-config --cflags --libs
#     appnorth)` builds the README's C quickstart with nothing else;
#   - the program loads libappnorth.so.0 from /usr/lib/<multiarch> with every
#     symbol bound at load (LD_BIND_NOW=1) and finds the seeded idea;
#   - on this machine (it has cmake) the CMake consumer (Tests/hosts/
#     cmake_consumer) builds through find_package(appnorth 0.2) and runs;
#   - dpkg --purge removes both packages and leaves none of their files.
# Usage: debs.sh ROOT   (as root, through scripts/with-devserver.sh with
# DEVSERVER_FLAGS=--seed-demo; the packages are dist/*.deb)
set -euo pipefail
top="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$top"
root="$(cd "$1" && pwd)"
: "${APPNORTH_TEST_SERVER:?run through scripts/with-devserver.sh}"
debs=(dist/libappnorth0_*.deb dist/libappnorth-dev_*.deb)
[ -f "${debs[0]}" ] && [ -f "${debs[1]}" ] || { echo "debs: no packages in dist/; run make deb" >&2; exit 1; }
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/ov" build
log="$top/build/debs-$( [ "$root" = / ] && echo host || basename "$root").log"

# What runs inside: the files it needs, in the overlay's /tmp/appnorth-deb.
mkdir -p "$scratch/files/dist" "$scratch/files/cmake_consumer"
cp "${debs[@]}" "$scratch/files/dist/"
scripts/readme-block.py README.md "Quickstart: C" c >"$scratch/files/app.c"
scripts/readme-block.py README.md "Debian packages" sh >"$scratch/files/readme.sh"
cp Tests/hosts/cmake_consumer/* "$scratch/files/cmake_consumer/"
cat >"$scratch/files/check.sh" <<'CHECK'
set -eu
cd /tmp/appnorth-deb
url="$1" ma="$(gcc -dumpmachine)"
# Only the installed packages count: no search path from the caller.
unset PKG_CONFIG_PATH LD_LIBRARY_PATH CMAKE_PREFIX_PATH
! dpkg -s libappnorth0 >/dev/null 2>&1 || { echo "libappnorth0 is installed before the test"; exit 1; }
# The README's block as written; root needs no sudo, and apt asks nothing.
export DEBIAN_FRONTEND=noninteractive
echo 'APT::Get::Assume-Yes "true";' >/etc/apt/apt.conf.d/99appnorth-test
sh -ec 'sudo() { "$@"; }; . ./readme.sh' >apt.log 2>&1 || { cat apt.log; echo "the README's Debian block failed"; exit 1; }
[ "$(dpkg-query -W -f='${Status}\n' libappnorth0 libappnorth-dev | grep -c 'install ok installed')" = 2 ] \
    || { cat apt.log; echo "apt did not install both packages"; exit 1; }
# /lib is /usr/lib on a merged-/usr system: the loader may name either.
ldd ./a.out | grep -qE "libappnorth.so.0 => (/usr)?/lib/$ma/libappnorth.so.0 " \
    || { ldd ./a.out; echo "a.out does not load the package's library"; exit 1; }
LD_BIND_NOW=1 ./a.out "$url" | grep -q '"title": *"Dark mode"' || { echo "the quickstart found no Dark mode idea"; exit 1; }
if command -v cmake >/dev/null; then
    cmake -S cmake_consumer -B cmake-build >cmake.log 2>&1 && cmake --build cmake-build >>cmake.log 2>&1 \
        || { cat cmake.log; echo "the CMake consumer did not build"; exit 1; }
    cmake-build/consumer >/dev/null && cmake-build/consumer_cpp >/dev/null
    grep -q "/usr/lib/$ma/cmake/appnorth" cmake-build/CMakeCache.txt || { echo "CMake found another appnorth package"; exit 1; }
    echo "cmake consumer: ran"
fi
pages="$(dpkg -L libappnorth-dev | grep -c '/usr/share/man/' || true)"
dpkg --purge libappnorth-dev libappnorth0 >/dev/null
left="$(ls -d /usr/lib/$ma/libappnorth* /usr/lib/$ma/pkgconfig/appnorth.pc /usr/lib/$ma/cmake/appnorth \
    /usr/include/appnorth.h* /usr/share/appnorth /usr/share/doc/libappnorth* 2>/dev/null || true)"
[ -z "$left" ] || { echo "dpkg --purge left: $left"; exit 1; }
echo "man pages: $pages"
cat apt.log
CHECK

unshare -m sh -c '
    set -e
    mount --make-rprivate /
    mount -t tmpfs tmpfs "$2"/ov
    mkdir "$2"/ov/upper "$2"/ov/work "$2"/ov/merged
    mount -t overlay overlay -o lowerdir="$1",upperdir="$2"/ov/upper,workdir="$2"/ov/work "$2"/ov/merged
    m="$2"/ov/merged
    mount --rbind /dev "$m/dev"
    mount -t proc proc "$m/proc"
    rm -rf "$m/tmp/appnorth-deb"
    cp -r "$2"/files "$m/tmp/appnorth-deb"
    exec chroot "$m" /bin/sh /tmp/appnorth-deb/check.sh "$3"
' debs "$root" "$scratch" "$APPNORTH_TEST_SERVER" >"$log" 2>&1 \
    || { cat "$log"; echo "debs: the packages failed in $root" >&2; exit 1; }
extra=""
grep -qx "cmake consumer: ran" "$log" && extra=", the CMake consumer built through find_package"
echo "debs: in $root the README's apt line installed both packages, the C quickstart built with pkg-config alone and ran$extra, dpkg --purge left nothing ($(grep '^man pages' "$log"))"
