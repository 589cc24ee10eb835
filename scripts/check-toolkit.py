#!/usr/bin/env python3
"""The concurrency toolkit gate (make test, with the size gate): every lock,
thread and per-process object of the library (Sources/AppNorthCore and
Sources/AppNorthC, what libappnorth.so is made of) goes through its one
helper (docs/architecture.md, "Locks, threads and per-process objects"):

- a mutex or condition variable only through `Lock` (Support/Lock.swift),
  which registers it with ForkGuard; no pthread_mutex_init, pthread_cond_init,
  rwlock, spinlock, `Synchronization.Mutex` or NSLock anywhere else;
- a thread only through `LibraryThread` (no pthread_create elsewhere);
- every lock with a class (`LockClass`): `Lock.init` has no default, and
  scripts/lock_classes.py checks each `level:` names a declared class;
- process-wide state only through `ForkLocal`, whatever its spelling. A
  stored `static let`/`static var` (any modifiers: private, package,
  nonisolated(unsafe), lazy...) or a global `let`/`var` (at a file's top
  level) is refused when it is mutable (`var`), or holds a `Lock`, an
  `Atomic`, a pointer, an instance of a class of Sources/, or a value made
  once by code (an immediately called closure, a C call). Constants
  (literals, value types, enum cases), computed properties and `ForkLocal`s
  pass. A process-wide object that must not be a `ForkLocal` says why on
  its line or right above it: `// process-wide, not a ForkLocal: <why>`
  (docs/architecture.md lists them).

`--self-test` checks that each spelling is caught and each constant passes.
Exit status 1, with each offending line, when one is found.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "Sources" / "AppNorthCore", ROOT / "Sources" / "AppNorthC"]
EXEMPT = "process-wide, not a ForkLocal:"

RULES = [
    (re.compile(r"\bpthread_(mutex|cond|rwlock|spin)_init\b|\bMutex<|\bNSLock\b|\bos_unfair_lock\b"),
     "a lock outside the toolkit: use Lock (Support/Lock.swift)",
     {"Support/Lock.swift", "Support/ForkGuard.swift"}),
    (re.compile(r"\bpthread_create\b"),
     "a thread outside the toolkit: use LibraryThread.spawn (Support/LibraryThread.swift)",
     {"Support/LibraryThread.swift"}),
]

MODIFIERS = r"(?:(?:@\w+(?:\([^)]*\))?|public|package|internal|private|fileprivate|final|nonisolated(?:\(unsafe\))?|lazy)\s+)*"
STATIC = re.compile(rf"^\s*{MODIFIERS}(?:static|class)\s+{MODIFIERS}(let|var)\s+`?(\w+)`?(.*)$")
GLOBAL = re.compile(rf"^{MODIFIERS}(let|var)\s+`?(\w+)`?(.*)$")
STATE = re.compile(r"\b(Lock|Atomic|AtomicLazyReference|ManagedAtomic|Mutex|UnsafeMutablePointer|UnsafeMutableRawPointer)\b")
WHY = ("process-wide state outside ForkLocal (a fork() child would inherit the parent's): make it a "
       "ForkLocal (`private static let x = ForkLocal<T, Never> { T() }`, Support/ForkLocal.swift), or, if it "
       f"must not be one, say why in a comment on its line or right above it: `// {EXEMPT} <why>`")


def code(line: str) -> str:
    return re.sub(r'"(?:\\.|[^"\\])*"', '""', line.split("//", 1)[0])


def blank_multiline_strings(text: str) -> str:
    """The text with the insides of its \"\"\" strings blanked (lines kept)."""
    return re.sub(r'"""(.*?)"""', lambda m: '""' + "\n" * m.group(1).count("\n") + '""', text, flags=re.S)


def class_names(texts: list[str]) -> set[str]:
    names = set()
    for text in texts:
        names.update(re.findall(r"\bclass\s+([A-Z]\w*)", text))
    return names


def case_names(texts: list[str]) -> set[str]:
    """The enum cases of Sources/ (`.wrongState(...)` makes a value, runs no code)."""
    names = set()
    for text in texts:
        for listed in re.findall(r"^\s*(?:indirect\s+)?case\s+([^:=\n]+)", text, re.M):
            names.update(re.findall(r"(?:^|,)\s*`?(\w+)`?", listed))
    return names


def runs_code(initialiser: str, cases: set[str]) -> bool:
    """Whether the initialiser runs code of ours once (a closure called at
    once, a C call, a static method), rather than writing a value."""
    text = initialiser.strip()
    if text.startswith("{") and not re.search(r"\}\s*\(\s*\)\s*$", text):
        return False  # a closure kept as a value, not called
    if re.search(r"\}\s*\(\s*\)\s*$", text) or re.search(r"(?<![\w.])[a-z_]\w*\(", text):
        return True
    # A member call on a literal (`[...].map { }`) computes a constant.
    return any(m not in cases for m in re.findall(r"(?<![\]\"])\.\s*([a-z]\w*)\s*[({]", text))


def declaration_rest(lines: list[str], index: int, rest: str) -> str:
    """The declaration's text after its name: continued while brackets are open."""
    text = code(rest)
    depth = text.count("(") + text.count("{") + text.count("[") - text.count(")") - text.count("}") - text.count("]")
    i = index
    while depth > 0 and i + 1 < len(lines) and i - index < 40:
        i += 1
        more = code(lines[i])
        depth += more.count("(") + more.count("{") + more.count("[") - more.count(")") - more.count("}") - more.count("]")
        text += "\n" + more
    return text


def comment_above(lines: list[str], index: int) -> str:
    """The comment lines (// or ///) right above line `index`."""
    above = []
    while index > 0 and lines[index - 1].lstrip().startswith("//"):
        index -= 1
        above.append(lines[index])
    return " ".join(above)


def process_wide(lines: list[str], classes: set[str], cases: frozenset[str] | set[str] = frozenset()) -> list[tuple[int, str]]:
    """(line number, line) of each stored static or global that holds state."""
    found = []
    for index, line in enumerate(lines):
        m = STATIC.match(line) or (GLOBAL.match(line) if not line[:1].isspace() else None)
        if not m or "func " in code(line):
            continue
        keyword, rest = m.group(1), m.group(3)
        full = declaration_rest(lines, index, rest)
        first = code(rest).strip()
        initialiser = full.split("=", 1)[1] if "=" in code(rest) else ""
        computed = "{" in first and ("=" not in first or first.index("{") < first.index("="))
        if computed:
            continue
        if EXEMPT in line or EXEMPT in comment_above(lines, index):
            continue
        if re.match(r"\s*(ForkLocal|LockClass)\b", initialiser) or re.match(r"\s*:\s*ForkLocal\b", first):
            continue  # a ForkLocal; a lock class (a constant, scripts/lock_classes.py)
        annotation = first.split("=", 1)[0]
        holds_class = any(re.search(rf"(?<![\w.]){re.escape(c)}\s*(?:<[^>]*>)?\s*(?:\(|\.init\b)", initialiser)
                          or re.search(rf":\s*{re.escape(c)}\b", annotation) for c in classes)
        if (keyword == "var" or holds_class or STATE.search(initialiser) or STATE.search(annotation)
                or runs_code(initialiser, set(cases))):
            found.append((index + 1, line.strip()))
    return found


def main() -> int:
    found = []
    files = [p for base in SOURCES for p in sorted(base.rglob("*.swift"))]
    texts = {p: p.read_text(encoding="utf-8") for p in files}
    classes = class_names(list(texts.values()))
    cases = case_names(list(texts.values()))
    for path in files:
        rel = path.relative_to(ROOT / "Sources" / "AppNorthCore").as_posix() if "AppNorthCore" in path.parts else ""
        lines = texts[path].splitlines()
        for number, line in enumerate(lines, 1):
            for pattern, why, allowed in RULES:
                if rel not in allowed and pattern.search(code(line)):
                    found.append(f"{path.relative_to(ROOT)}:{number}: {why}: {line.strip()}")
        for number, line in process_wide(blank_multiline_strings(texts[path]).splitlines(), classes, cases):
            found.append(f"{path.relative_to(ROOT)}:{number}: {WHY}: {line}")
    for line in found:
        print(line)
    if found:
        print(f"check-toolkit: {len(found)} line(s) outside the concurrency toolkit")
        return 1
    print("check-toolkit: every lock, thread and process-wide object goes through Lock, LibraryThread and ForkLocal")
    return 0


def self_test() -> int:
    caught = [
        "static var count = 0",
        "private static var count: Int = 0",
        "nonisolated(unsafe) static var table: [Int: Int] = [:]",
        "package static let lock = Lock(0, level: .a)",
        "private static let word = Atomic<UInt>(0)",
        "static let shared = Table()",
        "static let registry: Table = .init()",
        "static let once: Bool = {\n    return getenv(\"X\") != nil\n}()",
        "static let started = start_something()",
        "private static let installed: Void = Guard.install { reset() }",
        "static let stamp = Clock.now()",
        "var counter = 0",
        "private var counter = 0",
        "nonisolated(unsafe) var counter = 0",
        "let table = Table()",
        "fileprivate let word = Atomic<Int>(0)",
        "let buffer = UnsafeMutablePointer<Int>.allocate(capacity: 1)",
        "    static let state = Lock(State(), level: .a)",
        "/// A lock, with a comment that gives no reason.\nstatic let lock = Lock(0, level: .a)",
        "    private static let current: Lock<Int> = Lock(0, level: .a)",
    ]
    passed = [
        "static let limit = 5",
        "static let name: StaticString = \"x\"",
        "static let ids: Set<String> = [\"a\", \"b\"]",
        "static var limit: Int { 5 }",
        "static var shared: Table { current.value }",
        "static var what: String { get }",
        "private static let current = ForkLocal<Table, Never> { Table() }",
        "static let empty = Document(bytes: [])",
        "static let error = AppNorthError.wrongState(\"x\")",
        "static let sql: [String] = [\n    \"\"\"\n    SELECT max(length(x))\n    \"\"\",\n]",
        "static let keys: Set<[UInt8]> = Set([\"a\",\n    \"b\"].map { Array($0.utf8) })",
        "static let drain = LockClass.leaf(\"Drain.lock\")",
        "static let sink: Sink = { level, message in\n    fputs(message, stderr)\n}",
        "private let maxBytes = Int(APPNORTH_MAX)",
        "static let word = Atomic<UInt>(0) // process-wide, not a ForkLocal: the fork handler resets it",
        "// process-wide, not a ForkLocal: made once, the same in a child\nstatic let checked: Bool = { true }()",
        "/// The word.\n// process-wide, not a ForkLocal: the fork\n// handler resets it\nstatic let word = Atomic<UInt>(0)",
        "    let local = Lock(0, level: .a)",
        "    var count = 0",
        "static func make() -> Table { Table() }",
    ]
    failures = []
    classes, cases = {"Table"}, {"wrongState"}
    for text in caught:
        if not process_wide(text.splitlines(), classes, cases):
            failures.append(f"not caught: {text!r}")
    for text in passed:
        if process_wide(blank_multiline_strings(text).splitlines(), classes, cases):
            failures.append(f"refused, but fine: {text!r}")
    for f in failures:
        print(f"check-toolkit self-test: {f}")
    if failures:
        return 1
    print(f"check-toolkit self-test: {len(caught)} spellings of process-wide state caught, {len(passed)} constants passed")
    return 0


if __name__ == "__main__":
    sys.exit(self_test() if "--self-test" in sys.argv else main())
