#!/usr/bin/env python3
"""The layering gate (make test, with the size gate): the folders of
Sources/AppNorthCore depend on each other in one direction only, as
docs/architecture.md says. Each rule is (lower, upper): no Swift file of the
lower folder names a type declared at the top level of the upper one (in
code: comments and string literals do not count). Today's rule: Transport
is below Async (the non-blocking operations start transfers and waits on
the transfer engine; the engine knows nothing of operations).

Exit status 1, with each offending line, when one is found.
`--self-test` runs the check on a small made-up tree where it must fail
and on one where it must pass.
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "Sources" / "AppNorthCore"

#: (lower folder, upper folder): the lower one must not name the upper one's types.
RULES = [("Transport", "Async")]

DECLARATION = re.compile(
    r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|fileprivate|private|final|indirect|nonisolated)\s+)*"
    r"(?:class|struct|enum|protocol|actor|typealias)\s+([A-Z]\w*)", re.M)
IDENTIFIER = re.compile(r"\b[A-Z]\w*\b")


def code_only(text: str) -> str:
    """`text` with comments and string literals blanked (line breaks kept)."""
    text = re.sub(r'"""[\s\S]*?"""', lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"/\*[\s\S]*?\*/", lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def declared(folder: Path) -> set[str]:
    """The type names declared at the top level (no indentation) of folder's Swift files."""
    names: set[str] = set()
    for path in sorted(folder.rglob("*.swift")):
        names.update(DECLARATION.findall(code_only(path.read_text(encoding="utf-8"))))
    return names


def check(core: Path, rules: list[tuple[str, str]]) -> list[str]:
    problems = []
    for lower, upper in rules:
        upper_types = declared(core / upper) - declared(core / lower)
        for path in sorted((core / lower).rglob("*.swift")):
            for number, line in enumerate(code_only(path.read_text(encoding="utf-8")).split("\n"), 1):
                for name in sorted(set(IDENTIFIER.findall(line)) & upper_types):
                    problems.append(f"{path.relative_to(core)}:{number}: names {name}, a type of {upper}/: "
                                    f"{lower}/ is below {upper}/ (move the type down, or pass it in)")
    return problems


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        core = Path(tmp)
        (core / "Async").mkdir()
        (core / "Transport").mkdir()
        (core / "Async" / "Op.swift").write_text(
            "package final class Operation {\n    struct Inner {}\n}\nenum Scope {}\n", encoding="utf-8")
        clean = ("/// Not `Operation`: a comment may name it.\nstruct Engine {\n"
                 "    let label = \"Scope\"\n    struct Inner {}\n}\n")
        (core / "Transport" / "Engine.swift").write_text(clean, encoding="utf-8")
        passed = check(core, RULES)
        (core / "Transport" / "Engine.swift").write_text(clean + "func f(_ o: Operation) {}\n", encoding="utf-8")
        failed = check(core, RULES)
    if passed or len(failed) != 1 or "names Operation" not in failed[0]:
        print(f"check-layers self-test failed: clean tree {passed}, bad tree {failed}")
        return 1
    print("check-layers self-test: a Transport file naming an Async type fails; comments, strings, nested names do not")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems = check(CORE, RULES)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("layers: " + ", ".join(f"{lower}/ names no type of {upper}/" for lower, upper in RULES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
