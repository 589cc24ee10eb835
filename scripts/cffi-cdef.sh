#!/bin/sh
# Turns appnorth.h into a cffi cdef with every constant kept:
#   scripts/cffi-cdef.sh include/appnorth.h > appnorth.cdef
#   ffi.cdef(open("appnorth.cdef").read()); lib = ffi.dlopen("libappnorth.so.0")
# The integer #defines come first (cffi reads "#define NAME 123"); the rest
# is the header run through the C preprocessor without its #include lines
# (cffi knows int32_t, int64_t and size_t; INT32_MIN is spelled out) and with
# APPNORTH_API empty.
# make dist ships the result as dist/share/appnorth/appnorth.cdef.
set -eu
header="${1:-include/appnorth.h}"
echo "/* cffi cdef generated from appnorth.h by scripts/cffi-cdef.sh */"
# Integer constants, literal or arithmetic such as (256 * 1024), evaluated
# here because cffi only reads plain numbers.
sed -n -E 's|^#define (APPNORTH_[A-Z0-9_]+) +([-0-9 ()*+<]+)( */[*].*)?$|\1 \2|p' "$header" |
    while read -r name value; do echo "#define $name $(( $value ))"; done
sed '/^#[ \t]*include/d' "$header" \
    | ${CC:-cc} -E -P -DAPPNORTH_API= -DAPPNORTH_DEPRECATED\(msg\)= -D'INT32_MIN=(-2147483647 - 1)' -x c - \
    | sed '/^[[:space:]]*$/d'
