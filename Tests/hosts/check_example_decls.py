#!/usr/bin/env python3
"""The C# and Java examples' hand-written declarations against the ABI
description (dist/share/appnorth/appnorth.api.json): every declared
appnorth_* function exists, with as many parameters, each of a host type
that marshals that C type the way docs/hosts.md says (a char ** is an
`out IntPtr` / PointerByReference freed with appnorth_string_free, a
returned const char * an IntPtr / String that is never freed, ...); every
callback parameter is a delegate or Callback type of the same arity as the
C callback type. The Ruby example attaches its functions from the
description and the LuaJIT one reads the shipped cdef, so neither has
declarations that could drift.

Usage: check_example_decls.py DIST_DIR
"""
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
api = json.loads((Path(sys.argv[1]) / "share" / "appnorth" / "appnorth.api.json").read_text())
functions = {f["name"]: f for f in api["functions"]}
callbacks = {c["name"]: c for c in api["callbacks"]}
failures = []

# C type (or parameter kind) -> the host spellings that marshal it correctly.
CSHARP = {"int32_t": {"int"}, "int64_t": {"long"}, "uint64_t": {"ulong"}, "double": {"double"}, "size_t": {"UIntPtr"},
          "void": {"void"}, "const char *": {"byte[]"}, "char *": {"IntPtr"}, "char **": {"out IntPtr"}, "int32_t *": {"out int"},
          "int64_t *": {"out long"}, "uint64_t *": {"out ulong"}, "double *": {"out double"},
          "appnorth_error *": {"out Error", "ref Error"}, "void *": {"IntPtr"}, "const void *": {"byte[]", "IntPtr"},
          "handle": {"IntPtr"}, "handle_out": {"out IntPtr"}, "return const char *": {"IntPtr"}, "return handle": {"IntPtr"}}
JAVA = {"int32_t": {"int"}, "int64_t": {"long"}, "uint64_t": {"long"}, "double": {"double"}, "size_t": {"long"},
        "void": {"void"}, "const char *": {"String"}, "char *": {"Pointer"}, "char **": {"PointerByReference"},
        "int32_t *": {"IntByReference"}, "int64_t *": {"LongByReference"}, "uint64_t *": {"LongByReference"},
        "double *": {"DoubleByReference"}, "appnorth_error *": {"Error"}, "void *": {"Pointer"},
        "const void *": {"Pointer", "byte[]"}, "handle": {"Pointer"}, "handle_out": {"PointerByReference"},
        "return const char *": {"String", "Pointer"}, "return handle": {"Pointer"}}


def expected(table, c_type, kind, returned=False):
    if returned:
        if c_type == "const char *":
            return table["return const char *"]
        if c_type.endswith("*"):
            return table["return handle"]
    if kind in ("handle", "handle_out"):
        return table[kind]
    return table.get(c_type, set())


def check(host, path, table, declarations, callback_arity):
    declared = 0
    for ret, name, params in declarations:
        declared += 1
        where = f"{path.relative_to(ROOT)}: {name}"
        if name not in functions:
            failures.append(f"{where} is not a function of the header")
            continue
        function = functions[name]
        if ret not in expected(table, function["return"]["type"], None, returned=True):
            failures.append(f"{where} returns {ret}; for {function['return']['type']} use one of "
                            f"{sorted(expected(table, function['return']['type'], None, True))}")
        host_params = [p for p in (" ".join(x.split()) for x in params.split(",")) if p]
        if len(host_params) != len(function["params"]):
            failures.append(f"{where} has {len(host_params)} parameters, the header {len(function['params'])}")
            continue
        for host_param, c_param in zip(host_params, function["params"]):
            host_type = host_param.rsplit(" ", 1)[0]
            if c_param["kind"] == "callback":
                arity = callback_arity.get(host_type)
                if arity != len(callbacks[c_param["type"]]["params"]):
                    failures.append(f"{where}({c_param['name']}): {host_type} is not a callback type with "
                                    f"{len(callbacks[c_param['type']]['params'])} parameters")
                continue
            allowed = expected(table, c_param["type"], c_param["kind"])
            if host_type not in allowed:
                failures.append(f"{where}({c_param['name']}): {host_type} for {c_param['type']}; use one of {sorted(allowed)}")
    if declared < 20:
        failures.append(f"{path}: only {declared} declarations found")
    print(f"{host}: {declared} declarations match appnorth.api.json")


cs = ROOT / "examples" / "csharp" / "AppNorthNative.cs"
cs_text = cs.read_text()
cs_arity = {name: len([p for p in params.split(",") if p.strip()])
            for name, params in re.findall(r"public delegate void (\w+)\(([^)]*)\);", cs_text)}
check("C#", cs, CSHARP, re.findall(r"static extern ([\w\[\]]+) (appnorth_\w+)\(([^)]*)\);", cs_text), cs_arity)

java = ROOT / "examples" / "java" / "AppNorth.java"
java_text = java.read_text()
java_arity = {name: len([p for p in params.split(",") if p.strip()])
              for name, params in re.findall(r"interface (\w+) extends Callback \{\s*void invoke\(([^)]*)\)", java_text)}
check("Java", java, JAVA, re.findall(r"^\s+(\w+) (appnorth_\w+)\(([^)]*)\);", java_text, flags=re.M), java_arity)

ruby = (ROOT / "examples" / "ruby" / "appnorth.rb").read_text()
if 'API["functions"].each' not in ruby or "blocking: f[\"blocks\"]" not in ruby:
    failures.append("examples/ruby/appnorth.rb no longer attaches its functions from appnorth.api.json")
lua = (ROOT / "examples" / "luajit" / "walkthrough.lua").read_text()
if "/share/appnorth/appnorth.cdef" not in lua:
    failures.append("examples/luajit/walkthrough.lua no longer reads the shipped cdef")

if failures:
    print("example declarations: they do not match appnorth.api.json:\n  - " + "\n  - ".join(failures))
    sys.exit(1)
print("example declarations: Ruby attaches from appnorth.api.json (blocking: as described), LuaJIT reads the shipped cdef")
