#!/bin/sh
# Turns appnorth.h into a cdef that LuaJIT's ffi.cdef and Python's cffi both
# accept as is, with every integer constant kept:
#   scripts/cffi-cdef.sh include/appnorth.h > appnorth.cdef
#   LuaJIT: ffi.cdef(io.open("appnorth.cdef"):read("*a")); lib = ffi.load("libappnorth.so.0")
#   cffi:   ffi.cdef(open("appnorth.cdef").read()); lib = ffi.dlopen("libappnorth.so.0")
# No preprocessor lines (LuaJIT reads none): the integer #defines become the
# members of one anonymous enum at the top, their arithmetic such as
# (256 * 1024) evaluated here; the string APPNORTH_VERSION_STRING has no C
# constant form these parsers read, so it is left to appnorth.api.json and
# appnorth_version(). The rest is the header run through the C
# preprocessor without its #include lines (both parsers know int32_t,
# int64_t, uint64_t and size_t; INT32_MIN is spelled out) and with
# APPNORTH_API empty.
# make dist ships the result as dist/share/appnorth/appnorth.cdef.
set -eu
header="${1:-include/appnorth.h}"
echo "/* LuaJIT ffi / cffi cdef generated from appnorth.h by scripts/cffi-cdef.sh */"
echo "enum {"
sed -n -E 's|^#define (APPNORTH_[A-Z0-9_]+) +([-0-9 ()*+<]+)( */[*].*)?$|\1 \2|p' "$header" |
    while read -r name value; do echo "    $name = $(( $value )),"; done
echo "};"
sed '/^#[ \t]*include/d' "$header" \
    | ${CC:-cc} -E -P -DAPPNORTH_API= -DAPPNORTH_DEPRECATED\(msg\)= -D'INT32_MIN=(-2147483647 - 1)' -x c - \
    | sed '/^[[:space:]]*$/d'
