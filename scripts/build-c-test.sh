#!/bin/sh
# The one place the C tests' build lines live: the Makefile (make test-c)
# and scripts/sanitize.sh both build every Tests/c/test_*.c through it.
#
# usage: scripts/build-c-test.sh OUT SOURCE LIBDIR
#   CC, CFLAGS from the environment (CFLAGS holds the include folder);
#   LIBDIR holds libappnorth.so.
#
# Every test links libappnorth.so, with LIBDIR as its rpath, except
# test_dlclose: built without -lappnorth, its only reference to the
# library is its own dlopen() of LIBDIR/libappnorth.so, so a dlclose()
# would unload it (-z nodelete is what keeps it mapped).
set -eu
out=$1 src=$2 libdir=$3
cc=${CC:-cc}
name=$(basename "$src" .c)
# shellcheck disable=SC2086
case "$name" in
test_dlclose)
    exec $cc ${CFLAGS:-} -DAPPNORTH_TEST_LIBRARY="\"$libdir/libappnorth.so\"" -o "$out" "$src" \
        $(pkg-config --libs jansson libcurl) -ldl -lpthread ;;
*)
    exec $cc ${CFLAGS:-} -o "$out" "$src" -L"$libdir" -lappnorth -Wl,-rpath,"$libdir" \
        $(pkg-config --libs jansson libcurl sqlite3) -lpthread ;;
esac
