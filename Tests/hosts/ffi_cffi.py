#!/usr/bin/env python3
"""cffi reads the header: the shipped cdef (dist/share/appnorth/appnorth.cdef,
made by scripts/cffi-cdef.sh) parses, keeps every integer constant with the
header's value, names the int32 types, and the library answers through it.

Usage: ffi_cffi.py DIST_DIR   (run with the test venv's python, which has cffi)
"""
import re
import sys
from pathlib import Path

import cffi

dist = Path(sys.argv[1])
header = (dist / "include" / "appnorth.h").read_text()
ffi = cffi.FFI()
ffi.cdef((dist / "share" / "appnorth" / "appnorth.cdef").read_text())
lib = ffi.dlopen(str(dist / "lib" / "libappnorth.so.0"))
failures = []

# Every integer #define and every enum member of the header, with its value.
def evaluate(expression):
    if not re.fullmatch(r"[-0-9 ()*+<]+", expression):
        raise ValueError(expression)
    return int(eval(expression, {"__builtins__": {}}))  # digits and operators only


defines = {name: evaluate(value) for name, value in
           re.findall(r"^#define (APPNORTH_\w+) +([-0-9 ()*+<]+?)\s*(?:/\*.*)?$", header, flags=re.M)}
# Enum values are integers, or INT32_MIN for the members that make each enum signed.
members = {name: -2**31 if value == "INT32_MIN" else int(value)
           for name, value in re.findall(r"^\s+(APPNORTH_\w+) = (-?\d+|INT32_MIN),?\s*$", header, flags=re.M)}
for name, value in {**defines, **members}.items():
    if getattr(lib, name, None) != int(value):
        failures.append(f"{name}: cffi has {getattr(lib, name, None)!r}, the header says {value}")
if len(defines) < 16:
    failures.append(f"only {len(defines)} integer #defines found in the header; expected at least 16")

for typedef in ("appnorth_status", "appnorth_network_type", "appnorth_consent", "appnorth_config_tier",
                "appnorth_log_level", "appnorth_read_source"):
    if ffi.typeof(typedef) is not ffi.typeof("int32_t"):
        failures.append(f"{typedef} is {ffi.typeof(typedef).cname}, not int32_t")

# Every declared function resolves in the library.
for name in re.findall(r"^APPNORTH_API\b[^;(]*?\b(appnorth_\w+)\(", header, flags=re.M):
    try:
        getattr(lib, name)
    except (AttributeError, NotImplementedError) as error:
        failures.append(f"{name}: {error}")

# A round trip through the library with the constants and the error struct.
if ffi.string(lib.appnorth_version()).decode() != re.search(r'VERSION_STRING "([^"]+)"', header).group(1):
    failures.append("appnorth_version() differs from APPNORTH_VERSION_STRING")
if ffi.string(lib.appnorth_status_str(lib.APPNORTH_E_NETWORK)) != b"network error":
    failures.append("appnorth_status_str(APPNORTH_E_NETWORK) is not 'network error'")
err = ffi.new("appnorth_error *")
options = lib.appnorth_client_options_new()
rc = lib.appnorth_client_options_set_api_url(options, b"ftp://nowhere", err)
lib.appnorth_client_options_free(options)
if rc != lib.APPNORTH_E_INVALID_ARGUMENT or err.code != rc or not ffi.string(err.message):
    failures.append(f"a bad URL gave status {rc}, err.code {err.code}, message {ffi.string(err.message)!r}")
if len(err.message) != lib.APPNORTH_ERROR_MESSAGE_SIZE:
    failures.append("appnorth_error.message does not have APPNORTH_ERROR_MESSAGE_SIZE bytes")

if failures:
    print("cffi: the cdef does not match the header:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"cffi: the shipped cdef keeps the {len(defines)} integer #defines (as enum members) and {len(members)} enum constants; "
      f"statuses, network types, consent and tiers are int32_t; the library answers through it")
