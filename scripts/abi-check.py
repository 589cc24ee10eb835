#!/usr/bin/env python3
"""The C ABI of a build against the last release's (libabigail's abidw and
abidiff, Debian's abigail-tools). Rules: docs/abi-policy.md ("The ABI check").

The release library carries no C debug info for the header's types (its C
layer is Swift: its DWARF describes appnorth_error as a Swift view with a
size and no members), so the ABI is taken from an ABI stub: a C library
compiled with -g from the header alone, one empty definition per function,
linked with the release's version script (scripts/version-script.py) and
SONAME. It also exports one pointer per public typedef (abi_type_NAME, in a
node of its own), so that a typedef no function uses is compared too.
Tests/hosts/check_abi.py ties the real library to the same list: it exports
exactly the header's functions, each in its node.

    abi-check.py DIST                 compare DIST's header, abi/appnorth.symbols
                                      and DIST's SONAME with the newest abi/appnorth-*.abi
    abi-check.py --write OUT DIST     write a baseline (at a release)
    abi-check.py --self-test DIST     scratch copies of the header that break the
                                      ABI must fail the check; additions must pass
"""
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "hosts"))
sys.path.insert(0, str(ROOT / "scripts"))
import check_abi  # noqa: E402

version_script = __import__("version-script").version_script
SYMBOLS = ROOT / "abi" / "appnorth.symbols"


def typedef_names(header):
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    text = re.sub(r"^#.*$", " ", text, flags=re.M)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    names = []
    for statement in (" ".join(s.split()) for s in text.split(";")):
        if statement.startswith("typedef "):
            names.append((re.search(r"\(\s*\*\s*(\w+)\s*\)", statement) or re.search(r"(\w+)$", statement)).group(1))
    return names


def stub_source(header):
    out = ["#include <stdlib.h>", '#include "appnorth.h"']
    out += [f"{prototype} {{ abort(); }}" for prototype in check_abi.header_prototypes(header).values()]
    out += [f"APPNORTH_API {name} *abi_type_{name};" for name in typedef_names(header)]
    return "\n".join(out) + "\n"


def corpus(header, symbols, soname, work, out):
    """abidw of the ABI stub for this header, symbol list and SONAME."""
    (work / "include").mkdir(parents=True, exist_ok=True)
    (work / "include" / "appnorth.h").write_text(header)
    (work / "stub.c").write_text(stub_source(header))
    (work / "stub.map").write_text(version_script(symbols) + "APPNORTH_ABI_TYPES {\n    global:\n        abi_type_*;\n};\n")
    subprocess.run(["cc", "-g", "-O0", "-fPIC", "-shared", "-fno-eliminate-unused-debug-types",
                    f"-fdebug-prefix-map={work}=.", "-Iinclude", f"-Wl,-soname,{soname}",
                    "-Wl,--version-script=stub.map", "-o", "stub.so", "stub.c"], cwd=work, check=True)
    subprocess.run(["abidw", "--headers-dir", "include", "--load-all-types", "--no-corpus-path",
                    "--no-comp-dir-path", "--no-show-locs", "--out-file", str(out), "stub.so"], cwd=work, check=True)
    return out


def attribute(abi_text, name):
    found = re.search(rf"<abi-corpus [^>]*\b{name}='([^']*)'", abi_text)
    return found.group(1) if found else None


def compare(baseline, current):
    """[] when `current` keeps `baseline`'s ABI under docs/abi-policy.md, else the reasons."""
    base_text, current_text = baseline.read_text(), current.read_text()
    changed = subprocess.run(["abidiff", "--non-reachable-types", "--no-added-syms", str(baseline), str(current)],
                             capture_output=True, text=True)
    if changed.returncode & 3:
        return [f"abidiff failed ({changed.returncode}): {changed.stderr.strip()}"]
    problems = []
    old_soname, new_soname = attribute(base_text, "soname"), attribute(current_text, "soname")
    if changed.returncode and old_soname == new_soname and not only_added_types(changed.stdout):
        problems.append(f"a removed or changed function or type, and the SONAME is still {new_soname}; "
                        f"a break needs a major version (new SONAME):\n{changed.stdout.rstrip()}")
    full = subprocess.run(["abidiff", "--non-reachable-types", str(baseline), str(current)],
                          capture_output=True, text=True)
    released = set(re.findall(r"version='(APPNORTH_\d+\.\d+)'", base_text))
    for name, node in re.findall(r"^\s*\[A\] 'function .*\{(\w+)@@?([\w.]+)\}", full.stdout, flags=re.M):
        if node in released:
            problems.append(f"{name} is new but in the released node {node}: list it with the new release's "
                            f"version in abi/appnorth.symbols (docs/abi-policy.md)")
    return problems


def only_added_types(report):
    """abidiff's report holds additions only: new types (a struct or an enum
    that new functions use, in a new node) remove or change nothing."""
    summaries = re.findall(r"(\d+) [Rr]emoved, (\d+) [Cc]hanged", report)
    return (bool(summaries) and all(removed == "0" and changed == "0" for removed, changed in summaries)
            and not re.search(r"^\s*\[[CD]\]", report, flags=re.M))


def soname_of(library):
    dynamic = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dynamic).group(1)


def dist_inputs(dist):
    header = (Path(dist) / "include" / "appnorth.h").read_text()
    library = sorted((Path(dist) / "lib").glob("libappnorth.so.*.*.*"))[-1]
    return header, SYMBOLS.read_text(), soname_of(library)


def baseline_path():
    found = sorted(ROOT.glob("abi/appnorth-*.abi"),
                   key=lambda p: tuple(int(x) for x in re.findall(r"\d+", p.stem)))
    if not found:
        sys.exit("abi-check: no baseline abi/appnorth-*.abi")
    return found[-1]


def check(dist):
    baseline = baseline_path()
    with tempfile.TemporaryDirectory() as work:
        current = corpus(*dist_inputs(dist), Path(work), Path(work) / "current.abi")
        problems = compare(baseline, current)
    if problems:
        print(f"abi-check: the ABI broke against {baseline.relative_to(ROOT)}:\n  - " + "\n  - ".join(problems),
              file=sys.stderr)
        return 1
    print(f"abi-check: the header's ABI keeps {baseline.relative_to(ROOT)} (abidiff: nothing removed or changed, "
          "additions in a new node)")
    return 0


def write(out, dist):
    with tempfile.TemporaryDirectory() as work:
        corpus(*dist_inputs(dist), Path(work), Path(work) / "new.abi")
        shutil.copy(Path(work) / "new.abi", out)
    print(f"abi-check: wrote {out} ({Path(out).stat().st_size} bytes)")
    return 0

NEW_FUNCTION = ("APPNORTH_API int32_t appnorth_version_number(void);",
                "APPNORTH_API int32_t appnorth_version_number(void);\n"
                "typedef int32_t appnorth_abi_selftest;\n"
                "APPNORTH_API int32_t appnorth_abi_selftest_new(appnorth_abi_selftest value);")
NEW_LINE = "int32_t appnorth_abi_selftest_new(appnorth_abi_selftest value)"
# (what the scratch copy does, header edits, symbols edit, SONAME, must pass)
CASES = [
    ("nothing changed", [], None, None, True),
    ("a function, a typedef and a status code added, in a new node APPNORTH_0.99",
     [NEW_FUNCTION, ("APPNORTH_E_CANCELLED = 17,", "APPNORTH_E_CANCELLED = 17,\n    APPNORTH_E_SELFTEST = 18,")],
     lambda s: s + f"0.99.0 {NEW_LINE}\n", None, True),
    ("a struct and an enum added for a new function, in a new node APPNORTH_0.99",
     [NEW_FUNCTION, ("typedef int32_t appnorth_abi_selftest;",
                     "typedef int32_t appnorth_abi_selftest;\nenum { APPNORTH_ABI_SELFTEST_A = 0 };\n"
                     "typedef struct appnorth_abi_selftest_out { int32_t a; int64_t b; } appnorth_abi_selftest_out;")],
     lambda s: s + f"0.99.0 {NEW_LINE}\n", None, True),
    ("a signature changed: appnorth_status_str(int32_t code) to (int64_t code)",
     [("appnorth_status_str(int32_t code)", "appnorth_status_str(int64_t code)")], None, None, False),
    ("a struct field changed: appnorth_error.http_status int32_t to int64_t",
     [("    int32_t http_status;", "    int64_t http_status;")], None, None, False),
    ("an enum value changed: APPNORTH_E_CANCELLED 17 to 18",
     [("APPNORTH_E_CANCELLED = 17,", "APPNORTH_E_CANCELLED = 18,")], None, None, False),
    ("a typedef no function uses changed: appnorth_status int32_t to int64_t",
     [("typedef int32_t appnorth_status;", "typedef int64_t appnorth_status;")], None, None, False),
    ("a function removed: appnorth_version_number",
     [("APPNORTH_API int32_t appnorth_version_number(void);", "")],
     lambda s: re.sub(r"^.*appnorth_version_number\(.*\n", "", s, flags=re.M), None, False),
    ("a function added to the released node APPNORTH_0.3",
     [NEW_FUNCTION], lambda s: s + f"0.3.0 {NEW_LINE}\n", None, False),
    ("a function moved to another node: appnorth_version_number to APPNORTH_0.3",
     [], lambda s: re.sub(r"^0\.2\.0 (int32_t appnorth_version_number)", r"0.3.0 \1", s, flags=re.M), None, False),
    ("the signature change with a new SONAME (a major release)",
     [("appnorth_status_str(int32_t code)", "appnorth_status_str(int64_t code)")], None, "libappnorth.so.1", True),
]


def self_test(header, symbols, soname):
    """Each case edits scratch copies and runs the check against a baseline
    of the unedited header; an edit that does not apply fails the test."""
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        base = corpus(header, symbols, soname, Path(scratch) / "base", Path(scratch) / "base.abi")
        for number, (what, edits, symbols_edit, new_soname, must_pass) in enumerate(CASES):
            text = header
            for old, new in edits:
                if old not in text:
                    sys.exit(f"abi-check self-test: {what}: the header has no '{old}' to edit")
                text = text.replace(old, new, 1)
            edited = symbols_edit(symbols) if symbols_edit else symbols
            if symbols_edit and edited == symbols:
                sys.exit(f"abi-check self-test: {what}: the symbols edit changed nothing")
            work = Path(scratch) / f"case{number}"
            problems = compare(base, corpus(text, edited, new_soname or soname, work, work / "case.abi"))
            caught = problems[0].splitlines() if problems else []
            first = next((line.strip() for line in caught if re.match(r"\s*\[[CDA]\]", line)), caught[:1] and caught[0])
            deepest = [line.strip() for line in caught if re.search(r"from value|size changed from|name changed from", line)]
            detail = " / ".join(filter(None, [first] + deepest[:1]))
            print(f"  {'passes' if not problems else 'fails '}: {what}" + (f"\n      ({detail})" if detail else ""))
            if bool(problems) == must_pass:
                failures.append(what)
    if failures:
        print("abi-check self-test: wrong verdict for: " + "; ".join(failures), file=sys.stderr)
        return 1
    print(f"abi-check self-test: {len(CASES)} scratch edits, each judged as docs/abi-policy.md says")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) == 1 and not args[0].startswith("-"):
        sys.exit(check(args[0]))
    if len(args) == 3 and args[0] == "--write":
        sys.exit(write(args[1], args[2]))
    if len(args) == 2 and args[0] == "--self-test":
        sys.exit(self_test(*dist_inputs(args[1])))
    sys.exit(__doc__)
