#!/usr/bin/env python3
"""The lock classes gate (make test-size; make test-docs checks the table).

Every `Lock` states its place in the lock order, a `LockClass`, declared
beside the lock's owner (Support/LockOrder.swift says how):

    extension LockClass {
        /// `Owner.lock`: what it guards.
        static let ownerLock = LockClass(rank: 45, "Owner.lock")      // ordered
        static let other = LockClass.leaf("Other.lock")              // a leaf
        static let inner = LockClass.leaf("Inner.lock", takenInside: ["Other.lock"])
    }

This script collects every declaration under Sources/ and Tests/ and checks:
- each lock name and each class name is declared once;
- ordered ranks are unique and within 1...127;
- `takenInside` names declared leaves (only a leaf needs a pair), and the
  pairs make no cycle (leaves that nest in a cycle could deadlock);
- every `level:` of a `Lock` or `ForkLocal` names a declared class (never a
  number; `LockClass.gate`, unchecked, is OperationGate's alone);
- every class declared is used by a lock;
- the table in docs/architecture.md ("Lock classes") is the one the code
  gives: `--write` rewrites it, otherwise a stale table fails.
`--self-test` checks that each of these finds what it must.
Exit status 1, with each problem, when one is found.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
BEGIN = "<!-- lock classes: written by scripts/lock_classes.py --write from the declarations; do not edit -->"
END = "<!-- end of lock classes -->"
MAX_RANK = 127

DECLARATION = re.compile(
    r'((?:^[ \t]*///[^\n]*\n)*)(?:^|(?<=\{))[ \t]*(?:(?:package|public|private|fileprivate)[ \t]+)?static[ \t]+let[ \t]+(\w+)'
    r'\s*=\s*LockClass(?:\(rank:\s*(\d+),\s*"([^"]+)"|\.leaf\(\s*"([^"]+)")'
    r'(?:,\s*takenInside:\s*\[([^\]]*)\])?\s*\)', re.M)
LEVEL = re.compile(r"\blevel:\s*([^,)\s]+)")
WHAT_TO_WRITE = ("declare it beside its owner: extension LockClass { /// `Owner.lock`: what it guards. "
                 "static let name = LockClass.leaf(\"Owner.lock\") } (a leaf: takes no lock inside), or "
                 "LockClass(rank: N, \"Owner.lock\") with a free rank (the table in docs/architecture.md lists the "
                 "ranks taken); then python3 scripts/lock_classes.py --write")


@dataclass
class Declared:
    ident: str
    name: str
    rank: int | None  # None: a leaf
    taken_inside: list[str]
    path: str
    line: int
    doc: str = ""
    uses: int = field(default=0)


def sources() -> dict[str, str]:
    files = {}
    for base in ("Sources", "Tests"):
        for path in sorted((ROOT / base).rglob("*.swift")):
            files[path.relative_to(ROOT).as_posix()] = path.read_text(encoding="utf-8")
    return files


def collect(files: dict[str, str]) -> list[Declared]:
    found = []
    for path, text in files.items():
        for m in DECLARATION.finditer(text):
            doc = " ".join(line.strip()[3:].strip() for line in m.group(1).splitlines())
            pairs = re.findall(r'"([^"]+)"', m.group(6) or "")
            rank = int(m.group(3)) if m.group(3) else None
            line = text.count("\n", 0, m.start(2)) + 1
            found.append(Declared(m.group(2), m.group(4) or m.group(5), rank, pairs, path, line, doc))
    return found


def check_declarations(declared: list[Declared]) -> list[str]:
    problems = []
    by_name: dict[str, Declared] = {}
    by_ident: dict[str, Declared] = {}
    by_rank: dict[int, Declared] = {}
    for d in declared:
        for key, table, what in ((d.name, by_name, "lock"), (d.ident, by_ident, "class")):
            if key in table:
                problems.append(f"{d.path}:{d.line}: the {what} {key} is declared twice "
                                f"(also {table[key].path}:{table[key].line})")
            table.setdefault(key, d)
        if d.rank is None:
            continue
        if not 1 <= d.rank <= MAX_RANK:
            problems.append(f"{d.path}:{d.line}: {d.name}: rank {d.rank} is outside 1...{MAX_RANK}")
        elif d.rank in by_rank:
            other = by_rank[d.rank]
            problems.append(f"{d.path}:{d.line}: {d.name}: rank {d.rank} is {other.name}'s ({other.path}:{other.line}); "
                            f"pick a free rank between the locks it nests between (docs/architecture.md, \"Lock classes\")")
        by_rank.setdefault(d.rank, d)
    for d in declared:
        for outer in d.taken_inside:
            if outer not in by_name:
                problems.append(f"{d.path}:{d.line}: {d.name} is taken inside {outer}, which no LockClass declares")
            elif by_name[outer].rank is not None:
                problems.append(f"{d.path}:{d.line}: {d.name} is taken inside {outer}, an ordered class: only a leaf "
                                f"needs a pair (give {d.name} a higher rank than {outer}'s, or make it a leaf)")
    return problems + check_cycles(declared)


def check_cycles(declared: list[Declared]) -> list[str]:
    """The pairs, as edges outer -> inner, make no cycle."""
    inner_of: dict[str, list[str]] = {}
    for d in declared:
        for outer in d.taken_inside:
            inner_of.setdefault(outer, []).append(d.name)
    state: dict[str, int] = {}
    problems = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for inner in inner_of.get(name, []):
            if state.get(inner) == 1:
                cycle = path[path.index(inner):] + [inner] if inner in path else [name, inner]
                problems.append("the takenInside pairs make a cycle (two threads could each hold one and wait "
                                "for the other): " + " -> ".join(cycle))
            elif inner not in state:
                visit(inner, path + [inner])
        state[name] = 2

    for name in sorted(inner_of):
        if name not in state:
            visit(name, [name])
    return problems


def check_uses(files: dict[str, str], declared: list[Declared]) -> list[str]:
    idents = {d.ident: d for d in declared}
    problems = []
    for path, text in files.items():
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("//", 1)[0]
            if not re.search(r"\b(Lock|ForkLocal)\b", code):
                continue
            for value in LEVEL.findall(code):
                m = re.fullmatch(r"(?:LockClass)?\.(\w+)", value)
                if value in ("level", "lockClass") and path.endswith(("Support/Lock.swift", "Support/ForkLocal.swift")):
                    continue
                if m and m.group(1) == "gate":
                    if not path.endswith("Support/OperationGate.swift"):
                        problems.append(f"{path}:{number}: LockClass.gate (unchecked) is OperationGate's alone: "
                                        + WHAT_TO_WRITE)
                elif m and m.group(1) in idents:
                    idents[m.group(1)].uses += 1
                else:
                    problems.append(f"{path}:{number}: level: {value} is no LockClass declared: " + WHAT_TO_WRITE)
    everything = "\n".join(files.values())
    for d in declared:
        if d.uses == 0 and not re.search(rf"\bLockClass\.{d.ident}\b", everything):
            problems.append(f"{d.path}:{d.line}: the class {d.ident} ({d.name}) is used by no lock: delete it")
    return problems


def table(declared: list[Declared]) -> str:
    def where(d: Declared) -> str:
        return d.path.removeprefix("Sources/AppNorthCore/").removeprefix("Sources/")

    def what(d: Declared) -> str:
        text = re.sub(r"^`[^`]+`:\s*", "", d.doc).strip()
        return text.replace("|", "\\|")

    rows = ["| rank | lock | declared in | what it guards |", "|---|---|---|---|",
            "| unchecked | `OperationGate` | Support/OperationGate.swift | a queue's or cache's turn, held while its "
            "host storage callbacks run (host code may call any handle, so any lock, another gate too, nests "
            "inside it) |"]
    for d in sorted((d for d in declared if d.rank is not None), key=lambda d: d.rank):
        rows.append(f"| {d.rank} | `{d.name}` | {where(d)} | {what(d)} |")
    for d in sorted((d for d in declared if d.rank is None), key=lambda d: d.name.lower()):
        inside = f" (taken inside {', '.join(f'`{o}`' for o in d.taken_inside)})" if d.taken_inside else ""
        rows.append(f"| leaf | `{d.name}` | {where(d)} | {what(d)}{inside} |")
    return "\n".join(rows)


def written(text: str, declared: list[Declared]) -> str | None:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return text[:start] + BEGIN + "\n" + table(declared) + "\n" + text[end:]


def check_table(declared: list[Declared], write: bool) -> list[str]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    new = written(text, declared)
    if new is None:
        return [f"docs/architecture.md: no lock classes table (the lines {BEGIN!r} and {END!r})"]
    if new == text:
        return []
    if write:
        ARCHITECTURE.write_text(new, encoding="utf-8")
        print("lock-classes: docs/architecture.md's table rewritten")
        return []
    return ["docs/architecture.md: the lock classes table is not the code's: run python3 scripts/lock_classes.py --write"]


def problems(files: dict[str, str], write: bool = False) -> list[str]:
    declared = collect(files)
    return check_declarations(declared) + check_uses(files, declared) + check_table(declared, write)


def self_test() -> list[str]:
    """Each check finds what it must, on made-up sources."""
    good = ('extension LockClass {\n    /// `A.lock`: a.\n    static let a = LockClass(rank: 5, "A.lock")\n'
            '    static let b = LockClass.leaf("B.lock")\n'
            '    static let c = LockClass.leaf("C.lock", takenInside: ["B.lock"])\n}\n'
            'let x = Lock(0, level: .a)\nlet y = Lock(0, level: LockClass.b)\nlet z = Lock(0, level: .c)\n')
    cases = {
        "a clean set": (good, None),
        "a rank twice": (good + 'extension LockClass { static let d = LockClass(rank: 5, "D.lock") }\n'
                         'let w = Lock(0, level: .d)\n', "rank 5 is A.lock's"),
        "a rank out of range": (good.replace("rank: 5", "rank: 128"), "outside 1...127"),
        "a name twice": (good + 'extension LockClass { static let d = LockClass.leaf("B.lock") }\n'
                         'let w = Lock(0, level: .d)\n', "the lock B.lock is declared twice"),
        "a pair naming nothing": (good.replace('["B.lock"]', '["Nope.lock"]'), "which no LockClass declares"),
        "a pair inside an ordered lock": (good.replace('["B.lock"]', '["A.lock"]'), "an ordered class"),
        "a cycle": (good.replace('LockClass.leaf("B.lock")', 'LockClass.leaf("B.lock", takenInside: ["C.lock"])'),
                    "make a cycle"),
        "a bare number": (good + "let w = Lock(0, level: 3)\n", "level: 3 is no LockClass declared"),
        "an unknown class": (good + "let w = Lock(0, level: .nope)\n", "level: .nope is no LockClass"),
        "the gate elsewhere": (good + "let w = Lock(0, level: .gate)\n", "OperationGate's alone"),
        "a class no lock uses": (good + 'extension LockClass { static let e = LockClass.leaf("E.lock") }\n',
                                 "used by no lock"),
    }
    failures = []
    for what, (text, expected) in cases.items():
        declared = collect({"Sources/X.swift": text})
        found = check_declarations(declared) + check_uses({"Sources/X.swift": text}, declared)
        if expected is None and found:
            failures.append(f"{what}: found {found}")
        elif expected is not None and not any(expected in p for p in found):
            failures.append(f"{what}: expected a problem with {expected!r}, found {found}")
    if len(collect(sources())) < 20:
        failures.append("the library's declarations were not read")
    table_text = table(collect({"Sources/X.swift": good}))
    if "| 5 | `A.lock` | X.swift | a. |" not in table_text or "(taken inside `B.lock`)" not in table_text:
        failures.append(f"the table is not written as expected: {table_text}")
    return failures


def main(argv: list[str]) -> int:
    if "--self-test" in argv:
        failures = self_test()
        for f in failures:
            print(f"lock-classes self-test: {f}")
        if failures:
            return 1
        print("lock-classes self-test: each check finds what it must")
        return 0
    found = problems(sources(), write="--write" in argv)
    for p in found:
        print(f"lock-classes: {p}")
    if found:
        return 1
    declared = collect(sources())
    ordered = sum(1 for d in declared if d.rank is not None)
    print(f"lock-classes: {ordered} ordered classes and {len(declared) - ordered} leaves, each declared once, "
          "used, and in docs/architecture.md's table")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
