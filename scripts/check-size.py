#!/usr/bin/env python3
"""The size gate of the Swift sources (make test), curl's complexity gate
being the model: no file in Sources/ over MAX_FILE_LINES lines and no
function, initializer or closure-free body over MAX_FUNC_LINES lines.

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


def measure() -> dict[str, int]:
    sizes: dict[str, int] = {}
    for path in sorted((ROOT / "Sources").rglob("*.swift")):
        rel = path.relative_to(ROOT).as_posix()
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_FILE_LINES:
            sizes[rel] = count
        for name, line, length in functions(path):
            if length > MAX_FUNC_LINES:
                key = f"{rel}:{name}"
                sizes[key] = max(sizes.get(key, 0), length)
    return sizes


def main() -> int:
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
        limit = MAX_FUNC_LINES if ":" in key else MAX_FILE_LINES
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
    print(f"size: no Swift file over {MAX_FILE_LINES} lines and no function over {MAX_FUNC_LINES}, "
          f"but {len(baseline)} listed in {BASELINE.relative_to(ROOT)} (they may only shrink)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
