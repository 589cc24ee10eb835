#!/usr/bin/env python3
"""The size gate of the Swift sources (make test), curl's complexity gate
being the model: no file in Sources/ over MAX_FILE_LINES lines, no
function, initializer or closure-free body over MAX_FUNC_LINES lines, and
no type over MAX_TYPE_LINES lines counted over its declaration and every
extension of it, in whatever file (`type:Name` in the baseline): splitting
a type into extensions across files does not make it smaller.

Code that was over the limits when the gate came is listed in
scripts/size-baseline.txt with the size it had; it may shrink but not grow,
and an entry that is back under the limit must leave the list (so the list
only ever gets shorter). `--update` rewrites the list from the tree (only
for shrinking it: review the diff).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

MAX_FILE_LINES = 500
MAX_FUNC_LINES = 80
MAX_TYPE_LINES = 500
ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "size-baseline.txt"

DECL = re.compile(r"^\s*(?:@[\w()., ]+\s+)*(?:(?:public|private|fileprivate|internal|package|open|static|class|final|"
                  r"override|mutating|nonmutating|nonisolated|convenience|required|dynamic|borrowing|consuming)"
                  r"(?:\([\w ]+\))?\s+)*(func\s+([^\s(<]+)|init[?!]?|deinit|subscript)\b")


def code_only(line: str, in_block: bool) -> tuple[str, bool]:
    """The line without comments and string contents; whether a /* */ block is still open."""
    out, i, n = [], 0, len(line)
    while i < n:
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
        elif line.startswith("//", i):
            break
        elif line.startswith("/*", i):
            in_block, i = True, i + 2
        elif line[i] == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            out.append('""')
            i = j + 1
        else:
            out.append(line[i])
            i += 1
    return "".join(out), in_block


def functions(path: Path) -> list[tuple[str, int, int]]:
    """(name, first line, line count) of every function-like body in a file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    code, block = [], False
    for line in lines:
        text, block = code_only(line, block)
        code.append(text)
    found = []
    for start, text in enumerate(code):
        m = DECL.match(text)
        if not m:
            continue
        name = m.group(2) or m.group(1).split()[0]
        depth, opened = 0, False
        for end in range(start, len(code)):
            for ch in code[end]:
                if ch == "{":
                    depth, opened = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                found.append((name, start + 1, end - start + 1))
                break
            if not opened and end > start and code[end].strip() and not code[end].strip().startswith(
                    ("->", "throws", "where", "async", "rethrows")) and ")" not in code[end] and "," not in code[end]:
                break  # a protocol requirement: no body
    return found


TYPE_DECL = re.compile(r"^[ \t]*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate|final|open|"
                       r"indirect)\s+)*(?:class|struct|enum|actor|extension)\s+([A-Za-z_]\w*)")


def type_sizes(path: Path) -> dict[str, int]:
    """Lines of each top-level type declaration or extension in a file, by
    the outermost type's name (an `extension A.B` counts toward A); comments
    and strings are ignored when matching braces."""
    code, block = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        text, block = code_only(line, block)
        code.append(text)
    sizes: dict[str, int] = {}
    depth, index = 0, 0
    while index < len(code):
        m = TYPE_DECL.match(code[index]) if depth == 0 else None
        if not m:
            depth += code[index].count("{") - code[index].count("}")
            index += 1
            continue
        level, opened, end = 0, False, index
        while end < len(code):
            for ch in code[end]:
                if ch == "{":
                    level, opened = level + 1, True
                elif ch == "}":
                    level -= 1
            if opened and level <= 0:
                break
            end += 1
        sizes[m.group(1)] = sizes.get(m.group(1), 0) + end - index + 1
        index = end + 1
    return sizes


def measure() -> dict[str, int]:
    sizes: dict[str, int] = {}
    types: dict[str, int] = {}
    for path in sorted((ROOT / "Sources").rglob("*.swift")):
        for name, count in type_sizes(path).items():
            types[name] = types.get(name, 0) + count
        rel = path.relative_to(ROOT).as_posix()
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_FILE_LINES:
            sizes[rel] = count
        for name, line, length in functions(path):
            if length > MAX_FUNC_LINES:
                key = f"{rel}:{name}"
                sizes[key] = max(sizes.get(key, 0), length)
    for name, count in types.items():
        if count > MAX_TYPE_LINES:
            sizes[f"type:{name}"] = count
    return sizes


def limit_of(key: str) -> int:
    if key.startswith("type:"):
        return MAX_TYPE_LINES
    return MAX_FUNC_LINES if ":" in key else MAX_FILE_LINES


def self_test() -> None:
    """The type counter on a known text: braces in strings and comments are
    not counted, extensions add to their type, nested types to the outer one."""
    import tempfile
    text = ('struct A {\n  let s = "}{"\n  // }\n  struct B {\n  }\n}\n'
            'extension A.B {\n  func f() {\n  }\n}\n/* class C { */\nfinal class D: P { }\n')
    with tempfile.NamedTemporaryFile("w", suffix=".swift", delete=False) as f:
        f.write(text)
    try:
        got = type_sizes(Path(f.name))
    finally:
        Path(f.name).unlink()
    assert got == {"A": 6 + 4, "D": 1}, got


def main() -> int:
    self_test()
    sizes = measure()
    if "--update" in sys.argv:
        BASELINE.write_text("# path or path:function, and the lines it had; see scripts/check-size.py\n"
                            + "".join(f"{k} {v}\n" for k, v in sorted(sizes.items())))
        print(f"size: {len(sizes)} entries written to {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = {}
    for line in BASELINE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.rsplit(None, 1)
            baseline[key] = int(value)
    problems = []
    for key, size in sorted(sizes.items()):
        limit = limit_of(key)
        if key not in baseline:
            problems.append(f"{key}: {size} lines, over the limit of {limit} (split it along its seams)")
        elif size > baseline[key]:
            problems.append(f"{key}: grew to {size} lines from {baseline[key]} (over {limit}: it may only shrink)")
    for key in sorted(set(baseline) - set(sizes)):
        problems.append(f"{key}: now within the limit; remove its line from {BASELINE.relative_to(ROOT)}")
    for p in problems:
        print(f"size: {p}")
    if problems:
        return 1
    print(f"size: no Swift file over {MAX_FILE_LINES} lines, no function over {MAX_FUNC_LINES} and no type "
          f"(over all its extensions) over {MAX_TYPE_LINES}, "
          f"but {len(baseline)} listed in {BASELINE.relative_to(ROOT)} (they may only shrink)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
