#!/usr/bin/env python3
"""The shipped ABI description (dist/share/appnorth/appnorth.api.json)
against the header, read by another parser: the header through the C
preprocessor (cc -E for the declarations, cc -dM -E for the constants) and
pycparser (cffi's parser, in the test venv). Every function, callback type,
handle, struct, enum value and constant must be present in both, with the
same C types; every ownership, thread and blocking fact a binding needs
must be filled in; the nullability the description gives each string
argument must be what the C layer (Sources/AppNorthC) does with NULL; and
the file must be what scripts/abi-json.py makes from today's header.

Usage: check_api_json.py DIST_DIR   (run with the test venv's python)
"""
import json
import re
import subprocess
import sys
from pathlib import Path

from pycparser import c_ast, c_generator, c_parser

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "appnorth.h"
dist = Path(sys.argv[1])
api = json.loads((dist / "share" / "appnorth" / "appnorth.api.json").read_text())
failures = []
CC = ["cc"]


def norm(text):
    return " ".join(text.replace("*", " * ").split()).replace("* *", "**")


# --- The header, as the C preprocessor and pycparser see it -------------------------------
source = "".join(line for line in HEADER.read_text().splitlines(True) if not line.lstrip().startswith("#include"))
pre = subprocess.run(CC + ["-E", "-P", "-DAPPNORTH_API=", "-DAPPNORTH_DEPRECATED(m)=", "-DINT32_MIN=(-2147483647-1)",
                           "-x", "c", "-"], input=source, capture_output=True, text=True, check=True).stdout
prelude = "typedef int int32_t; typedef long int64_t; typedef unsigned long uint64_t; typedef unsigned long size_t;\n"
ast = c_parser.CParser().parse(prelude + pre)
gen = c_generator.CGenerator()


def type_text(node):
    return norm(gen.visit(node))


def params_of(funcdecl):
    out = []
    for param in (funcdecl.args.params if funcdecl.args else []):
        if isinstance(param, c_ast.Typename):  # (void)
            continue
        name = param.name
        copy = param.type
        # Render the parameter's type without its name.
        text = gen.visit(c_ast.Typename(None, [], None, copy)) if not isinstance(copy, c_ast.TypeDecl) else None
        text = norm(gen._generate_type(copy, emit_declname=False))
        out.append({"name": name, "type": text})
    return out


header_functions, header_callbacks, header_handles, header_structs, header_enums = {}, {}, set(), {}, {}
for node in ast.ext:
    if isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
        if not node.name.startswith("appnorth_"):
            continue
        ret = norm(gen._generate_type(node.type.type, emit_declname=False))
        header_functions[node.name] = {"return": ret, "params": params_of(node.type)}
    elif isinstance(node, c_ast.Typedef) and node.name.startswith("appnorth_"):
        t = node.type
        if isinstance(t, c_ast.PtrDecl) and isinstance(t.type, c_ast.FuncDecl):
            ret = norm(gen._generate_type(t.type.type, emit_declname=False))
            header_callbacks[node.name] = {"return": ret, "params": params_of(t.type)}
        elif isinstance(t, c_ast.TypeDecl) and isinstance(t.type, c_ast.Struct):
            if t.type.decls is None:
                header_handles.add(node.name)
            else:
                header_structs[node.name] = [(d.name, norm(gen._generate_type(d.type, emit_declname=False)))
                                             for d in t.type.decls]
    elif isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.Enum):
        for member in node.type.values.enumerators:
            value = int(eval(gen.visit(member.value), {"__builtins__": {}}))  # integer arithmetic only
            if not member.name.endswith("_INT32_MIN_"):
                header_enums[member.name] = value

macros = subprocess.run(CC + ["-dM", "-E", "-x", "c", str(HEADER)], capture_output=True, text=True, check=True).stdout
header_constants = {}
for name, value in re.findall(r"^#define (APPNORTH_\w+) (.+)$", macros, flags=re.M):
    if value.startswith('"'):
        header_constants[name] = json.loads(value)
    elif re.fullmatch(r"[-0-9 ()*+<]+", value):
        header_constants[name] = int(eval(value, {"__builtins__": {}}))

# --- Present in both, with the same types ----------------------------------------------
def compare(kind, header_side, described):
    for name in sorted(set(header_side) - set(described)):
        failures.append(f"{kind} {name} is in the header but not in appnorth.api.json")
    for name in sorted(set(described) - set(header_side)):
        failures.append(f"{kind} {name} is in appnorth.api.json but not in the header")
    for name in sorted(set(header_side) & set(described)):
        if header_side[name] != described[name]:
            failures.append(f"{kind} {name}: the header has {header_side[name]}, appnorth.api.json {described[name]}")


def signature(entry, ret):
    return {"return": norm(ret), "params": [{"name": p["name"], "type": norm(p["type"])} for p in entry["params"]]}


compare("function", header_functions, {f["name"]: signature(f, f["return"]["type"]) for f in api["functions"]})
compare("callback type", header_callbacks, {c["name"]: signature(c, c["return"]) for c in api["callbacks"]})
compare("handle", {h: True for h in header_handles}, {h["name"]: True for h in api["handles"]})
# An array field's size may be a constant's name: compared by value, as pycparser spells it.
sizes = {c["name"]: c["value"] for c in api["constants"]}
compare("struct", header_structs, {s["name"]: [(f["name"], norm(f["type"]) + (f" [{sizes.get(f['array'], f['array'])}]"
                                                                              if f.get("array") else ""))
                                                for f in s["fields"]] for s in api["structs"]})
compare("enum value", header_enums, {v["name"]: v["value"] for e in api["enums"] for v in e["values"]})
compare("constant", header_constants, {c["name"]: c["value"] for c in api["constants"]})
for enum in api["enums"]:
    if not enum.get("name") or enum.get("type") != "int32_t":
        failures.append(f"an enum has no int32_t typedef: {enum}")

# --- Every fact a binding needs is there ---------------------------------------------
names = {f["name"] for f in api["functions"]}
for function in api["functions"]:
    where = function["name"]
    for key in ("thread", "blocks", "doc"):
        if key not in function or function[key] in (None, ""):
            failures.append(f"{where}: no {key}")
    ret = function["return"]
    if ret["type"] == "const char *" and ret.get("ownership") != "static":
        failures.append(f"{where}: returns const char * without 'static' ownership")
    if ret["type"].endswith("*") and ret["type"] != "const char *" and ret.get("free_with") not in names:
        failures.append(f"{where}: returns {ret['type']} without a free function")
    for param in function["params"]:
        kind = param.get("kind")
        if kind is None or (kind != "value" and "nullable" not in param):
            failures.append(f"{where}({param['name']}): no kind or nullability")
        if kind == "string_out" and param.get("free_with") != "appnorth_string_free":
            failures.append(f"{where}({param['name']}): a char ** not freed with appnorth_string_free")
        if kind == "handle_out" and param.get("free_with") not in names:
            failures.append(f"{where}({param['name']}): a handle out-parameter without its _free function")
        if kind == "callback" and not param.get("lifetime"):
            failures.append(f"{where}({param['name']}): a callback without its lifetime")
        if kind == "error" and not param.get("nullable"):
            failures.append(f"{where}: err must be optional")
for callback in api["callbacks"]:
    if not callback.get("thread"):
        failures.append(f"callback type {callback['name']}: no thread")
for network_call in ("appnorth_client_list_boards", "appnorth_queue_flush", "appnorth_config_refresh",
                     "appnorth_events_flush", "appnorth_client_free", "appnorth_config_remove_listener"):
    if network_call in names and not next(f for f in api["functions"] if f["name"] == network_call)["blocks"]:
        failures.append(f"{network_call} can wait, but appnorth.api.json says it does not block")

# --- Nullability as the C layer implements it ------------------------------------------------
described = {(f["name"], p["name"]): p.get("nullable") for f in api["functions"] for p in f["params"]}
checked = 0
for path in sorted((ROOT / "Sources" / "AppNorthC").glob("*.swift")):
    current, both_null = None, False
    for line in path.read_text().splitlines():
        found = re.search(r"\bfunc (appnorth_\w+)\(", line)
        if found:
            current, both_null = found.group(1), False
        # "case (nil, nil):" accepts two arguments NULL together (a credential's email and token).
        both_null = both_null or "case (nil, nil)" in line
        for helper, name in re.findall(r"\b(optionalString|requiredString|optionalPath)\([^,()]+, \"(\w+)\"", line):
            key = (current, name)
            if key not in described:
                continue
            checked += 1
            if described[key] != (helper != "requiredString" or both_null):
                failures.append(f"{current}({name}): the C layer reads it with {helper} ({path.name}), "
                                f"appnorth.api.json says nullable={described[key]}; fix the header's comment")
if checked < 20:
    failures.append(f"only {checked} string arguments of the C layer were matched to the description")

# --- Made from today's header -------------------------------------------------------------
fresh = subprocess.run([sys.executable, str(ROOT / "scripts" / "abi-json.py"), str(HEADER)],
                       capture_output=True, text=True)
if fresh.returncode != 0:
    failures.append("scripts/abi-json.py fails on the header:\n" + fresh.stderr)
elif json.loads(fresh.stdout) != api:
    failures.append("dist/share/appnorth/appnorth.api.json is older than include/appnorth.h: run make dist")

if failures:
    print("api.json: the ABI description does not match the header:\n  - " + "\n  - ".join(failures))
    sys.exit(1)
blocking = sum(1 for f in api["functions"] if f["blocks"])
print(f"api.json: {len(api['functions'])} functions ({blocking} that block), {len(api['callbacks'])} callback types, "
      f"{len(api['handles'])} handles, {len(header_enums)} enum values and {len(header_constants)} constants match "
      f"the header under pycparser; {checked} string arguments' nullability matches the C layer")
