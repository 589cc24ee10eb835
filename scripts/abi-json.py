#!/usr/bin/env python3
"""Writes the machine-readable description of the C ABI, appnorth.api.json,
from include/appnorth.h (standard library only):

    scripts/abi-json.py include/appnorth.h > dist/share/appnorth/appnorth.api.json

Everything in it comes from the header: the declarations give names and
types; the doc comments give nullability, ownership, threads and blocking,
read by the rules of the header's "Conventions" block (scripts/abi_rules.py).
A comment that leaves one of those open is an error here, naming the
function: the fix is a clearer comment in the header, which is the manual.
The format is described in docs/hosts.md ("The ABI description").
"""
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import abi_rules  # noqa: E402

FORMAT = 1


def strip_comment(text):
    """The words of a /* */ comment, without its stars."""
    body = re.sub(r"^/\*+|\*+/$", "", text.strip())
    lines = [re.sub(r"^\s*\*(?!/) ?", "", line) for line in body.splitlines()]
    return " ".join(" ".join(lines).split())


def items(header):
    """(kind, text, doc, section) for each top-level item, in order.
    kind: define, enum, typedef, function. doc: the comment right before it."""
    token = re.compile(
        r"(?P<comment>/\*.*?\*/)|(?P<define>^#define[^\n]*)|(?P<pre>^#[^\n]*)"
        r"|(?P<enum>^enum\s*\{.*?\};)|(?P<struct>^typedef struct \w+\s*\{.*?\}\s*\w+;)|(?P<decl>^(?:typedef|APPNORTH_API)\b[^;]*;)|(?P<other>\S)",
        re.S | re.M)
    doc, section, group_doc = "", ("", ""), ""
    for match in token.finditer(header):
        kind = match.lastgroup
        text = match.group(kind)
        if kind == "comment":
            words = strip_comment(text)
            if re.match(r"/\*\s*-{8,}", text):
                lines = [strip_comment("/*" + line + "*/") for line in text.splitlines()]
                lines = [line for line in lines if line and not re.fullmatch(r"[-/* ]*", line)]
                section = (lines[0], " ".join(lines[1:]))
                doc = ""
            else:
                doc = words
            continue
        if kind == "define":
            yield "define", text, doc, section
        elif kind == "enum":
            yield "enum", text, doc, section
        elif kind == "struct":
            yield "typedef", text, doc, section
        elif kind == "decl" and text.startswith("APPNORTH_API"):
            yield "function", text, doc, section
        elif kind == "decl":
            # Callback types declared together share the comment above the first.
            if "(*" in text:
                doc = group_doc = doc or group_doc
            yield "typedef", text, doc, section
        elif kind == "other" and text in "{}":
            pass
        if kind != "decl" or "(*" not in text:
            group_doc = ""
        doc = "" if kind != "other" else doc


def parse_param(text):
    text = " ".join(text.split())
    if text == "void":
        return None
    match = re.match(r"(.*?[\s*])(\w+)$", text)
    return {"name": match.group(2), "type": " ".join(match.group(1).replace("*", " * ").split()).replace("* *", "**")}


def split_params(text):
    return [p for p in (parse_param(part) for part in text.split(",")) if p]


def c_type(text):
    return " ".join(text.replace("*", " * ").split()).replace("* *", "**")


def evaluate(expression):
    if not re.fullmatch(r"[-0-9 ()*+<]+", expression):
        return None
    return int(eval(expression, {"__builtins__": {}}))  # digits and operators only


def describe(header_text):
    api = {"format": FORMAT, "library": "libappnorth", "header": "appnorth.h",
           "conventions": abi_rules.CONVENTIONS, "constants": [], "enums": [], "handles": [],
           "structs": [], "callbacks": [], "functions": []}
    typedef_docs = {}
    pending_enum_typedef = None
    problems = []
    for kind, text, doc, section in items(header_text):
        if kind == "define":
            match = re.match(r"#define (APPNORTH_\w+)\s+(.+?)\s*(?:/\*.*)?$", text)
            if not match or match.group(1) == "APPNORTH_H":
                continue
            name, value = match.groups()
            if value.startswith('"'):
                api["constants"].append({"name": name, "type": "string", "value": json.loads(value), "doc": doc})
            elif evaluate(value) is not None:
                api["constants"].append({"name": name, "type": "int32_t", "value": evaluate(value),
                                         "c_expression": value, "doc": doc})
        elif kind == "enum":
            members = []
            for member_doc, name, value in re.findall(r"(?:/\*\*?(.*?)\*/\s*)?(APPNORTH_\w+)\s*=\s*(-?\d+|INT32_MIN)",
                                                      text, flags=re.S):
                if value == "INT32_MIN":
                    continue  # the member that makes the enum signed; never a value
                members.append({"name": name, "value": int(value), "doc": strip_comment("/*" + member_doc + "*/")})
            api["enums"].append({"name": pending_enum_typedef, "type": "int32_t", "values": members})
            pending_enum_typedef = None
        elif kind == "typedef":
            flat = " ".join(text.split())
            callback = re.match(r"typedef (.+?)\s*\(\s*\*\s*(\w+)\)\s*\((.*)\);$", flat)
            opaque = re.match(r"typedef struct (\w+) (\w+);$", flat)
            struct = re.match(r"typedef struct (\w+) \{(.*)\} (\w+);$", flat)
            alias = re.match(r"typedef int32_t (\w+);$", flat)
            if callback:
                returns, name, params = callback.groups()
                entry = {"name": name, "return": c_type(returns), "params": split_params(params), "doc": doc}
                entry.update(abi_rules.callback_facts(name, doc, section[1], problems))
                api["callbacks"].append(entry)
            elif opaque:
                typedef_docs[opaque.group(2)] = doc
                api["handles"].append({"name": opaque.group(2), "doc": doc})
            elif struct:
                fields = []
                for field in re.sub(r"/\*.*?\*/", "", text, flags=re.S).split("{", 1)[1].rsplit("}", 1)[0].split(";"):
                    field = " ".join(field.split())
                    if not field:
                        continue
                    array = re.match(r"(.+?)\s*(\w+)\[(\w+)\]$", field)
                    if array:
                        fields.append({"name": array.group(2), "type": c_type(array.group(1)), "array": array.group(3)})
                    else:
                        fields.append(parse_param(field))
                api["structs"].append({"name": struct.group(3), "fields": fields, "doc": doc})
            elif alias:
                pending_enum_typedef = alias.group(1)
            else:
                problems.append(f"unrecognised typedef: {flat}")
        elif kind == "function":
            flat = " ".join(text.split())
            deprecated = re.search(r'APPNORTH_DEPRECATED\s*\(\s*"([^"]*)"\s*\)', flat)
            flat = re.sub(r"APPNORTH_DEPRECATED\s*\([^)]*\)", "", flat)
            match = re.match(r"APPNORTH_API (.+?)\s*\b(appnorth_\w+)\s*\((.*)\);$", flat)
            returns, name, params = match.groups()
            function = {"name": name, "section": section[0], "section_doc": section[1], "return": {"type": c_type(returns)},
                        "params": split_params(params), "doc": doc}
            if deprecated:
                function["deprecated"] = deprecated.group(1)
            api["functions"].append(function)
    for enum in api["enums"]:
        if enum["name"] is None:
            problems.append(f"an enum without its int32_t typedef before it: {enum['values'][0]['name']}")
    handle_frees = {h["name"]: f"{h['name']}_free" for h in api["handles"]}
    names = {f["name"] for f in api["functions"]}
    for handle in api["handles"]:
        handle["free_with"] = handle_frees[handle["name"]] if handle_frees[handle["name"]] in names else None
        handle["thread_safe"] = not re.search(r"\bNot thread-safe\b", handle["doc"])
    callbacks = {c["name"] for c in api["callbacks"]}
    for function in api["functions"]:
        abi_rules.function_facts(function, api, callbacks, problems)
    abi_rules.inherit_from_blocking(api)
    return api, problems


def main():
    header = Path(sys.argv[1] if len(sys.argv) > 1 else "include/appnorth.h").read_text()
    api, problems = describe(header)
    version = next(c["value"] for c in api["constants"] if c["name"] == "APPNORTH_VERSION_STRING")
    api["version"] = version
    api["soname"] = f"libappnorth.so.{version.split('.')[0]}"
    if problems:
        print("abi-json: the header's comments leave these open (say it in the comment; the header is "
              "the manual):\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 1
    ordered = {key: api[key] for key in ("format", "library", "version", "soname", "header", "conventions",
                                         "constants", "enums", "handles", "structs", "callbacks", "functions")}
    json.dump(ordered, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
