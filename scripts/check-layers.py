#!/usr/bin/env python3
"""The layering gate (make test, with the size gate): the folders of
Sources/AppNorthCore depend on each other in one direction only, as
docs/architecture.md says. Each rule is (lowers, upper): no Swift file of a
lower folder names a type declared at the top level of the upper one (in
code: comments and string literals do not count). The rules:
- Transport -> Engine: HTTP (easy handles, requests, TLS, answers) knows
  nothing of the transfer engine that runs it without a thread waiting;
- Transport, Engine -> Async: the engine knows nothing of operations;
- only Async names Engine: every other folder of the core, the C layer
  (Sources/AppNorthC) and the Swift product (Sources/AppNorth) reach the
  engine through Async (AsyncTransfers, AsyncWait, the operation workers).

Exit status 1, with each offending line, when one is found.
`--self-test` runs the check on a small made-up tree where it must fail
and on one where it must pass.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "Sources" / "AppNorthCore"

#: Stands for every folder of the core but the upper one and those listed,
#: plus the C layer and the Swift product.
class AllBut:
    def __init__(self, *allowed: str) -> None:
        self.allowed = allowed

    def folders(self, core: Path, upper: str) -> list[str]:
        inside = sorted(p.name for p in core.iterdir() if p.is_dir() and p.name not in (upper, *self.allowed))
        outside = [f"../{name}" for name in ("AppNorthC", "AppNorth") if (core.parent / name).is_dir()]
        return inside + outside


#: (lower folders, upper folder): no lower one may name the upper one's types.
RULES = [
    (["Transport"], "Engine"),
    (["Transport", "Engine"], "Async"),
    (AllBut("Async"), "Engine"),
]


def describe(rule) -> str:
    lowers, upper = rule
    if isinstance(lowers, AllBut):
        return f"only {', '.join(lowers.allowed)}/ names a type of {upper}/"
    return f"{', '.join(l + '/' for l in lowers)} name{'s' if len(lowers) == 1 else ''} no type of {upper}/"

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


def check(core: Path, rules) -> list[str]:
    problems: list[str] = []
    seen: set[tuple[str, int, str]] = set()  # one problem per name on a line, under its first rule
    for rule in rules:
        lowers, upper = rule
        names = lowers.folders(core, upper) if isinstance(lowers, AllBut) else lowers
        for lower in names:
            upper_types = declared(core / upper) - declared(core / lower)
            for path in sorted((core / lower).rglob("*.swift")):
                for number, line in enumerate(code_only(path.read_text(encoding="utf-8")).split("\n"), 1):
                    for name in sorted(set(IDENTIFIER.findall(line)) & upper_types):
                        where = os.path.relpath(path, core)
                        if (where, number, name) in seen:
                            continue
                        seen.add((where, number, name))
                        problems.append(f"{where}:{number}: names {name}, a type of {upper}/: {describe(rule)} "
                                        f"(move the type, or go through the layer between)")
    return problems


def self_test() -> int:
    """Each rule on a small made-up tree: clean it passes (comments, strings
    and nested names may name anything), and one offending line fails it
    with exactly one problem."""
    clean = {
        "Async/Op.swift": "package final class Operation {\n    struct Inner {}\n}\nenum Scope {}\n"
                          "func go(_ e: Engine) {}\n",
        "Engine/Engine.swift": "/// Not `Operation`: a comment may name it.\nstruct Engine {\n"
                               "    let label = \"Scope\"\n    struct Inner {}\n}\n",
        "Transport/Easy.swift": "/// Runs on the `Engine`.\nstruct Easy {}\n",
        "Client/Client.swift": "struct Client { let label = \"Engine\" }\n",
        "../AppNorthC/API.swift": "// Engine, Operation\nfunc api(_ o: Operation) {}\n",
    }
    offences = [
        ("Transport/Easy.swift", "func f(_ e: Engine) {}\n", "Transport/Easy.swift:3: names Engine"),
        ("Engine/Engine.swift", "func f(_ o: Operation) {}\n", "Engine/Engine.swift:6: names Operation"),
        ("Transport/Easy.swift", "func f(_ s: Scope) {}\n", "Transport/Easy.swift:3: names Scope"),
        ("Client/Client.swift", "func f(_ e: Engine) {}\n", "Client/Client.swift:2: names Engine"),
        ("../AppNorthC/API.swift", "func g(_ e: Engine) {}\n", "../AppNorthC/API.swift:3: names Engine"),
    ]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        core = Path(tmp) / "AppNorthCore"

        def write(files: dict[str, str]) -> None:
            for name, text in files.items():
                (core / name).parent.mkdir(parents=True, exist_ok=True)
                (core / name).write_text(text, encoding="utf-8")

        write(clean)
        if passed := check(core, RULES):
            failures.append(f"clean tree: {passed}")
        for name, line, expected in offences:
            write(clean)
            write({name: clean[name] + line})
            failed = check(core, RULES)
            if len(failed) != 1 or not failed[0].startswith(expected):
                failures.append(f"{name} + {line.strip()!r}: {failed}")
    if failures:
        print("check-layers self-test failed: " + "; ".join(failures))
        return 1
    print(f"check-layers self-test: {len(offences)} offending lines fail the rules "
          "(Transport -> Engine, Engine -> Async, Transport -> Async, only Async names Engine, the C layer too); "
          "comments, strings, nested names do not")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems = check(CORE, RULES)
    for problem in problems:
        print(problem)
    if problems:
        return 1
    print("layers: " + "; ".join(describe(rule) for rule in RULES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
