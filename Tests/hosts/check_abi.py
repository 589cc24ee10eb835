#!/usr/bin/env python3
"""The header's exported functions against abi/appnorth.symbols.

Each line of abi/appnorth.symbols is "VERSION PROTOTYPE": the release that
introduced the function and its declaration as the header spells it (one
line, single spaces). The rules (docs/abi-policy.md):

- every APPNORTH_API function of include/appnorth.h has a line;
- a new function is listed with the header's version, and the header's
  version must be newer than the last release in CHANGELOG.md (so adding a
  function with the version macros unchanged fails);
- a released function (listed with an older version) keeps its prototype
  and stays in the header until the major version changes;
- every line's major version is the header's (a major bump starts a new list);
- with a library given, its exported symbols are exactly the header's, each
  in the version node of the release that introduced it (APPNORTH_0.2 for
  0.2.0; scripts/version-script.py).

Usage: check_abi.py [--library dist/lib/libappnorth.so]
Every failure says which line to add, change or remove.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "include" / "appnorth.h"
SYMBOLS = ROOT / "abi" / "appnorth.symbols"
CHANGELOG = ROOT / "CHANGELOG.md"


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


def header_version(header):
    parts = [re.search(rf"#define APPNORTH_VERSION_{name} (\d+)", header) for name in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        sys.exit("abi: the APPNORTH_VERSION_MAJOR/MINOR/PATCH macros are missing from include/appnorth.h")
    return tuple(int(p.group(1)) for p in parts)


def header_prototypes(header):
    """name -> normalised prototype, for every APPNORTH_API declaration."""
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    prototypes = {}
    for decl in re.findall(r"^\s*APPNORTH_API\b([^;]*);", text, flags=re.M):
        decl = re.sub(r"APPNORTH_DEPRECATED\s*\([^)]*\)", " ", decl)
        decl = " ".join(decl.split())
        decl = re.sub(r"\s*\(\s*", "(", decl, count=1).replace(" )", ")").replace(" ,", ",")
        name = re.search(r"(\w+)\(", decl).group(1)
        prototypes[name] = decl
    return prototypes


def listed_symbols(path):
    """name -> (version tuple, version text, prototype, line number)."""
    listed = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"(\d+\.\d+\.\d+) (.+\b(\w+)\(.*\))$", line)
        if not match:
            sys.exit(f"abi: {path.name}:{number}: expected 'VERSION PROTOTYPE', got: {line}")
        version, prototype, name = match.groups()
        if name in listed:
            sys.exit(f"abi: {path.name}:{number}: {name} is listed twice")
        listed[name] = (version_tuple(version), version, prototype, number)
    return listed


def last_release(changelog):
    """The newest released version in CHANGELOG.md ("## [x.y.z]" headings)."""
    versions = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, flags=re.M)
    return max((version_tuple(v) for v in versions), default=None)


# Every place that spells the version, and how to read it there.
VERSION_PLACES = [
    ("Makefile", r"^VERSION\s*:=\s*(\d+\.\d+\.\d+)"),
    ("Sources/AppNorthC/Library.swift", r'versionString: StaticString = "(\d+\.\d+\.\d+)"'),
    ("bindings/python/pyproject.toml", r'^version = "(\d+\.\d+\.\d+)"'),
    ("bindings/python/appnorth/__init__.py", r'^__version__ = "(\d+\.\d+\.\d+)"'),
]


def version_place_errors(header, version_text):
    errors = []
    string = re.search(r'#define APPNORTH_VERSION_STRING "([^"]*)"', header)
    number = re.search(r"#define APPNORTH_VERSION_NUMBER (\d+)", header)
    major, minor, patch = version_tuple(version_text)
    if not string or string.group(1) != version_text:
        errors.append(f"APPNORTH_VERSION_STRING should be \"{version_text}\"")
    if not number or int(number.group(1)) != major * 10000 + minor * 100 + patch:
        errors.append(f"APPNORTH_VERSION_NUMBER should be {major * 10000 + minor * 100 + patch}")
    swift = (ROOT / "Sources/AppNorthCore/Version.swift").read_text()
    parts = [re.search(rf"static let {name} = (\d+)", swift) for name in ("major", "minor", "patch")]
    if not all(parts) or tuple(int(p.group(1)) for p in parts) != (major, minor, patch):
        errors.append(f"Sources/AppNorthCore/Version.swift should say major {major}, minor {minor}, patch {patch}")
    for path, pattern in VERSION_PLACES:
        found = re.search(pattern, (ROOT / path).read_text(), flags=re.M)
        if not found or found.group(1) != version_text:
            errors.append(f"{path} should give version {version_text}, like the header")
    return errors


def exported_symbols(library):
    """name -> version node ("" for none) of each symbol the library exports."""
    out = subprocess.run(["nm", "-D", "--defined-only", library], check=True, capture_output=True, text=True).stdout
    symbols = [line.split()[-1] for line in out.splitlines() if line.split() and line.split()[1] in "TWViDBR"]
    return {symbol.split("@")[0]: symbol.split("@")[-1] if "@" in symbol else "" for symbol in symbols}


def library_errors(library, prototypes, listed):
    """The library exports exactly the header's functions, each in its node."""
    errors = []
    exported = exported_symbols(library)
    for name in sorted(set(prototypes) - set(exported)):
        errors.append(f"{library} does not export {name}, which the header declares")
    for name in sorted(set(exported) - set(prototypes)):
        errors.append(f"{library} exports {name}, which the header does not declare")
    for name in sorted(set(exported) & set(listed)):
        node = "APPNORTH_{}.{}".format(*listed[name][0][:2])
        if exported[name] != node:
            errors.append(f"{library} exports {name} in version node '{exported[name]}', not {node} "
                          f"(abi/appnorth.symbols; scripts/version-script.py)")
    return errors


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", help="a built libappnorth.so whose exports must equal the header's")
    args = parser.parse_args()

    header = HEADER.read_text()
    version = header_version(header)
    version_text = ".".join(map(str, version))
    prototypes = header_prototypes(header)
    listed = listed_symbols(SYMBOLS)
    released = last_release(CHANGELOG.read_text())
    errors = version_place_errors(header, version_text)

    for name, prototype in sorted(prototypes.items()):
        if name not in listed:
            if released is not None and version <= released:
                next_minor = f"{version[0]}.{version[1] + 1}.0"
                errors.append(f"{name} is new, but the header's version {version_text} is already released "
                              f"(CHANGELOG.md): raise the version to {next_minor} (every place in "
                              f"docs/abi-policy.md), then add to abi/appnorth.symbols:\n"
                              f"    {next_minor} {prototype}")
            else:
                errors.append(f"{name} is not in abi/appnorth.symbols; add this line:\n    {version_text} {prototype}")
            continue
        since, since_text, listed_prototype, number = listed[name]
        if since > version:
            errors.append(f"abi/appnorth.symbols:{number}: {name} is listed as new in {since_text}, "
                          f"newer than the header's {version_text}")
        elif listed_prototype != prototype:
            if since == version and (released is None or since > released):
                errors.append(f"abi/appnorth.symbols:{number}: {name} changed before its release; "
                              f"replace the line with:\n    {since_text} {prototype}")
            else:
                errors.append(f"{name} was released in {since_text} and its prototype changed. A released "
                              f"function never changes within major version {version[0]}: add a new "
                              f"function instead (docs/abi-policy.md).\n    listed: {listed_prototype}\n"
                              f"    header: {prototype}")

    for name, (since, since_text, _, number) in sorted(listed.items(), key=lambda item: item[1][3]):
        if since[0] != version[0]:
            errors.append(f"abi/appnorth.symbols:{number}: {name} is listed for major version {since[0]}, "
                          f"the header is {version_text}; a major bump starts a new list")
        elif name not in prototypes:
            if since == version and (released is None or since > released):
                errors.append(f"{name} is no longer in the header; remove line {number} of abi/appnorth.symbols "
                              f"(it was never released)")
            else:
                errors.append(f"{name} was released in {since_text} and is gone from the header. Removing a "
                              f"released function needs a major version bump (and a new SONAME); deprecate it "
                              f"with APPNORTH_DEPRECATED instead (docs/abi-policy.md).")

    if args.library:
        errors += library_errors(args.library, prototypes, listed)

    if errors:
        print("abi: the header's function list and abi/appnorth.symbols disagree:", file=sys.stderr)
        for error in errors:
            print(f"  - {error}", file=sys.stderr)
        return 1
    new = sum(1 for since, *_ in listed.values() if released is None or since > released)
    print(f"abi: {len(prototypes)} functions match abi/appnorth.symbols (header {version_text}, "
          f"{new} new since the last release)" + (", and the library exports exactly them, each in its release's node" if args.library else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
