#!/usr/bin/env python3
"""The size gate of the tests (make test-size), beside scripts/check-size.py
for Sources/: no file under Tests/ over MAX_FILE_LINES lines and no function
over MAX_FUNC_LINES, in C, C++, Swift and Python (a shell script counts as
a file only).

What was over the limits when the gate came is listed in
scripts/test-size-baseline.txt with the size it had; it may shrink but not
grow, and an entry back under the limit must leave the list (so the list
only ever gets shorter). `--update` rewrites the list from the tree (only
for shrinking it: review the diff). `--self-test` measures made-up files
of each language.
"""
from __future__ import annotations

import ast
import importlib.util
import re
import sys
import tempfile
from pathlib import Path

MAX_FILE_LINES = 600
MAX_FUNC_LINES = 60
ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "Tests"
BASELINE = ROOT / "scripts" / "test-size-baseline.txt"
SUFFIXES = {".c", ".h", ".cpp", ".swift", ".py", ".sh", ".rb", ".lua", ".cs", ".rs"}

# A C function's head: at column 0, not a declaration ending in ';'.
C_HEAD = re.compile(r"^(?:[A-Za-z_][\w \t\*]*[\s\*])?([A-Za-z_]\w*)\s*\([^;]*$")


def _swift_functions():
    spec = importlib.util.spec_from_file_location("check_size", ROOT / "scripts" / "check-size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.functions


def c_functions(lines: list[str]) -> list[tuple[str, int]]:
    """(name, lines) of each function defined at column 0: from its head to the
    `}` at column 0 that closes it (the style of Tests/c)."""
    found, index = [], 0
    while index < len(lines):
        m = C_HEAD.match(lines[index])
        if not m or lines[index].startswith(("#", "typedef", "struct", "enum", "union")) \
                or m.group(1) in ("if", "for", "while", "switch", "return", "sizeof"):
            index += 1
            continue
        end = index
        while end < len(lines) and "{" not in lines[end] and ";" not in lines[end]:
            end += 1
        if end >= len(lines) or ";" in lines[end].split("{")[0]:
            index += 1
            continue
        close = end
        while close < len(lines) and not (lines[close].startswith("}") or (close == end and lines[end].rstrip().endswith("}"))):
            close += 1
        found.append((m.group(1), close - index + 1))
        index = close + 1
    return found


def py_functions(text: str) -> list[tuple[str, int]]:
    return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def functions(path: Path, swift) -> list[tuple[str, int]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in (".c", ".h", ".cpp"):
        return c_functions(text.splitlines())
    if path.suffix == ".py":
        return py_functions(text)
    if path.suffix == ".swift":
        return [(name, length) for name, _, length in swift(path)]
    return []


def measure(tests: Path) -> dict[str, int]:
    swift = _swift_functions()
    sizes: dict[str, int] = {}
    for path in sorted(p for p in tests.rglob("*") if p.is_file() and p.suffix in SUFFIXES):
        rel = path.relative_to(tests.parent).as_posix()
        count = len(path.read_text(encoding="utf-8", errors="replace").splitlines())
        if count > MAX_FILE_LINES:
            sizes[rel] = count
        for name, length in functions(path, swift):
            if length > MAX_FUNC_LINES:
                key = f"{rel}:{name}"
                sizes[key] = max(sizes.get(key, 0), length)
    return sizes


def read_baseline() -> dict[str, int]:
    baseline = {}
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.rsplit(None, 1)
            baseline[key] = int(value)
    return baseline


def compare(sizes: dict[str, int], baseline: dict[str, int]) -> list[str]:
    problems = []
    for key, size in sorted(sizes.items()):
        limit = MAX_FUNC_LINES if ":" in key else MAX_FILE_LINES
        if key not in baseline:
            problems.append(f"{key}: {size} lines, over the limit of {limit} (fixtures, table-driven cases)")
        elif size > baseline[key]:
            problems.append(f"{key}: grew to {size} lines from {baseline[key]} (over {limit}: it may only shrink)")
    for key in sorted(set(baseline) - set(sizes)):
        problems.append(f"{key}: now within the limit; remove its line from {BASELINE.relative_to(ROOT)}")
    return problems


def self_test() -> int:
    long_c = "static int\nlong_one(int a,\n         int b) {\n" + "    a++;\n" * 70 + "}\n"
    short_c = "static void f(void);\nstatic void g(void) { f(); }\nint main(void) {\n    if (x) {\n    }\n}\n"
    long_py = "def long_one():\n" + "    x = 1\n" * 70 + "\n\ndef short():\n    pass\n"
    long_swift = "final class T {\n    func testLongOne() {\n" + "        _ = 1\n" * 70 + "    }\n}\n"
    with tempfile.TemporaryDirectory() as tmp:
        tests = Path(tmp) / "Tests"
        (tests / "c").mkdir(parents=True)
        (tests / "c" / "a.c").write_text(short_c + long_c, encoding="utf-8")
        (tests / "c" / "b.py").write_text(long_py, encoding="utf-8")
        (tests / "c" / "c.swift").write_text(long_swift, encoding="utf-8")
        (tests / "c" / "d.sh").write_text("echo\n" * 601, encoding="utf-8")
        got = measure(tests)
    want = {"Tests/c/a.c:long_one": 73, "Tests/c/b.py:long_one": 71, "Tests/c/c.swift:testLongOne": 72,
            "Tests/c/d.sh": 601}
    problems = compare({**want, "Tests/c/d.sh": 602, "Tests/c/new.c": 700}, {**want, "Tests/c/gone.c": 650})
    if got != want or len(problems) != 3:
        print(f"check-test-size self-test failed: measured {got}, want {want}; problems {problems}")
        return 1
    print("check-test-size self-test: long C, Python and Swift functions and long files are found; "
          "a new, a grown and a gone entry fail")
    return 0


def main() -> int:
    if "--self-test" in sys.argv:
        return self_test()
    sizes = measure(TESTS)
    if "--update" in sys.argv:
        BASELINE.write_text("# path or path:function under Tests/, and the lines it had; see scripts/check-test-size.py\n"
                            + "".join(f"{k} {v}\n" for k, v in sorted(sizes.items())))
        print(f"test size: {len(sizes)} entries written to {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = read_baseline()
    problems = compare(sizes, baseline)
    for p in problems:
        print(f"test size: {p}")
    if problems:
        return 1
    print(f"test size: no file under Tests/ over {MAX_FILE_LINES} lines and no function over {MAX_FUNC_LINES}, "
          f"but {len(baseline)} listed in {BASELINE.relative_to(ROOT)} (they may only shrink)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
