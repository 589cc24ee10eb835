#!/usr/bin/env bash
# make deb: the Debian packages of the release build in DIST (docs/platforms.md,
# "Debian packages"):
#   libappnorth0     the library, /usr/lib/<multiarch>/libappnorth.so.VERSION and its SONAME link
#   libappnorth-dev  the headers, the libappnorth.so link, the .pc and CMake files with Debian's
#                    paths, the cdef and API JSON (/usr/share/appnorth), DIST's man pages if any
# made with Debian's tools as debhelper would use them:
#   dpkg-shlibdeps   the library's Depends, from the symbols it binds, looked up in the
#                    Debian 11 root's package database (the floor it is linked against)
#   dpkg-gensymbols  its symbols file (each function at the release abi/appnorth.symbols
#                    gives, none before the first packaged one), checked against the exports
#   dpkg-gencontrol  the control files;  dpkg-deb  root-owned packages
# then lintian must report no error and no warning.
# Usage: scripts/make-deb.sh DIST VERSION
#   -> DIST/libappnorth0_VERSION-1_ARCH.deb, DIST/libappnorth-dev_VERSION-1_ARCH.deb
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
cd "$top"
dist="$(cd "$1" && pwd)" version="$2"
revision=1 first_packaged=0.3.0
umask 022
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
ma="$(dpkg-architecture -qDEB_HOST_MULTIARCH)"
work="$top/build/deb"
lib="$work/debian/libappnorth0" dev="$work/debian/libappnorth-dev"
libdir="usr/lib/$ma"
real="$dist/lib/libappnorth.so.$version"
soname="$(objdump -p "$real" | awk '$1 == "SONAME" { print $2 }')"
[ "libappnorth${soname#libappnorth.so.}" = libappnorth0 ] \
    || { echo "make-deb: the SONAME is $soname: rename libappnorth0 in scripts/deb/control (Debian policy 8.1)" >&2; exit 1; }

rm -rf "$work" "$dist"/libappnorth*.deb
mkdir -p "$work/debian"
cp scripts/deb/control "$work/debian/control"
maintainer="$(sed -n 's/^Maintainer: //p' scripts/deb/control)"
cat >"$work/debian/changelog" <<CHANGES
libappnorth ($version-$revision) unstable; urgency=medium

  * libappnorth $version, packaged by make deb from the release build.
    What changed: /usr/share/doc/libappnorth0/changelog.gz.

 -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")
CHANGES

# The files. The library is 0644 (a shared library is not a program).
install -d "$lib/$libdir" "$dev/usr/include" "$dev/$libdir/pkgconfig" "$dev/$libdir/cmake/appnorth" \
    "$dev/usr/share/appnorth"
install -m 0644 "$real" "$lib/$libdir/"
ln -s "libappnorth.so.$version" "$lib/$libdir/$soname"
install -m 0644 "$dist/include/appnorth.h" "$dist/include/appnorth.hpp" "$dev/usr/include/"
ln -s "$soname" "$dev/$libdir/libappnorth.so"
install -m 0644 "$dist/share/appnorth/appnorth.cdef" "$dist/share/appnorth/appnorth.api.json" "$dev/usr/share/appnorth/"
# dist/'s .pc and CMake files find their prefix from their own place, which
# under /usr/lib/<multiarch> would be wrong: these name Debian's paths. No
# Requires.private: there is no static library to link statically, and
# pkg-config would otherwise need jansson's, SQLite's, curl's and zlib's .pc
# files (their -dev packages) to answer --cflags.
{ echo "# Installed by libappnorth-dev: Debian's paths (multiarch libdir)."
  sed -e '/^#/d' -e '/^Requires.private:/d' -e 's|^prefix=.*|prefix=/usr|' \
      -e "s|^libdir=\${prefix}/lib\$|libdir=\${prefix}/lib/$ma|" "$dist/lib/pkgconfig/appnorth.pc"; } \
    >"$dev/$libdir/pkgconfig/appnorth.pc"
sed -e '/^# Paths are relative/,/^# works wherever/c\# Installed by libappnorth-dev: Debian'"'"'s paths (multiarch libdir).' \
    -e 's|^get_filename_component(_appnorth_prefix .*|set(_appnorth_prefix "/usr")|' \
    -e "s|\${_appnorth_prefix}/lib/|\${_appnorth_prefix}/lib/$ma/|g" \
    "$dist/lib/cmake/appnorth/appnorthConfig.cmake" >"$dev/$libdir/cmake/appnorth/appnorthConfig.cmake"
install -m 0644 "$dist/lib/cmake/appnorth/appnorthConfigVersion.cmake" "$dev/$libdir/cmake/appnorth/"
if grep -rqsE 'pcfiledir|CMAKE_CURRENT_LIST_DIR|Requires' "$dev/$libdir" \
    || ! grep -qx "libdir=\${prefix}/lib/$ma" "$dev/$libdir/pkgconfig/appnorth.pc" \
    || ! grep -q "\"\${_appnorth_prefix}/lib/$ma/libappnorth.so.$version\"" "$dev/$libdir/cmake/appnorth/appnorthConfig.cmake"; then
    echo "make-deb: dist/'s .pc or CMake file changed shape; the rewrite to Debian's paths in $0 missed it" >&2; exit 1
fi
# Man pages, gzipped as policy 12.1 asks; a link page stays a link.
for page in "$dist"/share/man/man*/*; do
    [ -e "$page" ] || [ -L "$page" ] || continue
    section="$(basename "$(dirname "$page")")"
    install -d "$dev/usr/share/man/$section"
    if [ -L "$page" ]; then ln -s "$(readlink "$page").gz" "$dev/usr/share/man/$section/$(basename "$page").gz"
    else gzip -9nc "$page" >"$dev/usr/share/man/$section/$(basename "$page").gz"; chmod 0644 "$dev/usr/share/man/$section/$(basename "$page").gz"; fi
done
for pkg in "$lib" "$dev"; do
    doc="$pkg/usr/share/doc/$(basename "$pkg")"
    install -d "$doc"
    install -m 0644 scripts/deb/copyright "$doc/copyright"
    gzip -9nc "$work/debian/changelog" >"$doc/changelog.Debian.gz"
    install -d "$pkg/usr/share/lintian/overrides"
    sed "s|@PACKAGE@|$(basename "$pkg")|g" scripts/deb/lintian-overrides >"$pkg/usr/share/lintian/overrides/$(basename "$pkg")"
done
gzip -9nc CHANGELOG.md >"$lib/usr/share/doc/libappnorth0/changelog.gz"

# The control area. The symbols file: each function at the release that
# introduced it (abi/appnorth.symbols), none before the first packaged one;
# dpkg-gensymbols -c4 then fails on any difference with what the library exports.
install -d "$lib/DEBIAN" "$dev/DEBIAN"
echo "activate-noawait ldconfig" >"$lib/DEBIAN/triggers"
echo "libappnorth ${soname#libappnorth.so.} libappnorth0 (>= $version)" >"$lib/DEBIAN/shlibs"
cd "$work"
dpkg-gensymbols -q -plibappnorth0 -Pdebian/libappnorth0 -v"$version" -O >debian/symbols.generated
python3 - "$top/abi/appnorth.symbols" "$first_packaged" debian/symbols.generated >debian/libappnorth0.symbols <<'PY'
import re, sys
abi, first, generated = sys.argv[1:4]
key = lambda v: tuple(int(x) for x in v.split("."))
since = {}
for line in open(abi):
    m = re.match(r"(\d+\.\d+\.\d+) .*?\b(appnorth_\w+)\(", line)
    if m:
        since[m.group(2)] = max(m.group(1), first, key=key)
seen = set()
for line in open(generated):
    if not line.startswith(" "):  # the library's line
        sys.stdout.write(line + "* Build-Depends-Package: libappnorth-dev\n")
        continue
    symbol, version = line.split()
    name = symbol.split("@")[0]
    if name in since:
        version = since[name]
        seen.add(name)
    elif name.startswith("appnorth_"):
        sys.exit(f"make-deb: the library exports {name}, which abi/appnorth.symbols lacks")
    sys.stdout.write(f" {symbol} {version}\n")
if set(since) - seen:
    sys.exit(f"make-deb: the library lacks {sorted(set(since) - seen)} of abi/appnorth.symbols")
PY
dpkg-gensymbols -q -c4 -plibappnorth0 -Pdebian/libappnorth0 -v"$version" -Idebian/libappnorth0.symbols
# Depends from the floor the library was linked against (scripts/build-release.sh):
# Debian 11's package database and symbols files, not this machine's (whose
# libc6 and libjansson4 would ask for 2.34 and 2.14, which Debian 11 lacks). A
# symbol no floor library's symbols file has fails here.
floor="$("$top/scripts/platform-roots.sh" ensure debian11)"
dpkg-shlibdeps --admindir="$floor/var/lib/dpkg" --warnings=1 -Tdebian/libappnorth0.substvars \
    "debian/libappnorth0/$libdir/libappnorth.so.$version" 2>debian/shlibdeps.log
if [ -s debian/shlibdeps.log ]; then cat debian/shlibdeps.log >&2; echo "make-deb: dpkg-shlibdeps warned" >&2; exit 1; fi
dpkg-gencontrol -plibappnorth0 -Pdebian/libappnorth0 -Tdebian/libappnorth0.substvars
dpkg-gencontrol -plibappnorth-dev -Pdebian/libappnorth-dev
for pkg in "$lib" "$dev"; do
    (cd "$pkg" && find usr -type f | LC_ALL=C sort | xargs md5sum) >"$pkg/DEBIAN/md5sums"
    chmod 0644 "$pkg"/DEBIAN/*
    dpkg-deb --root-owner-group -Zxz --build "$pkg" "$dist/" >/dev/null
done
cd "$top"
for deb in "$dist"/libappnorth0_*.deb "$dist"/libappnorth-dev_*.deb; do
    echo "deb: ${deb#"$top"/} ($(stat -c %s "$deb") bytes): $(dpkg-deb -f "$deb" Depends)"
done
# Errors and warnings fail; the info tags are counted (lintian -I lists them).
lintian -I --fail-on error,warning "$dist"/libappnorth0_*.deb "$dist"/libappnorth-dev_*.deb >build/deb/lintian.log 2>&1 \
    || { cat build/deb/lintian.log; echo "make-deb: lintian failed (build/deb/lintian.log)" >&2; exit 1; }
grep -v '^I: ' build/deb/lintian.log | grep -v 'running with root privileges' || true
echo "deb: lintian: no errors or warnings, $(grep -c '^I: ' build/deb/lintian.log) info tags (build/deb/lintian.log)"
