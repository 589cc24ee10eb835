#!/usr/bin/env python3
"""The concurrency toolkit gate (make test, with the size gate): every lock,
thread and per-process object of the library (Sources/AppNorthCore and
Sources/AppNorthC, what libappnorth.so is made of) goes through its one
helper (docs/architecture.md, "Locks, threads and per-process objects"):

- a mutex or condition variable only through `Lock` (Support/Lock.swift),
  which registers it with ForkGuard; no pthread_mutex_init, pthread_cond_init,
  rwlock, spinlock, `Synchronization.Mutex` or NSLock anywhere else;
- a thread only through `LibraryThread` (no pthread_create elsewhere);
- a process-wide object only through `ForkLocal` (no `static let x = Lock`
  or `static let shared =` elsewhere), so a fork() child makes its own;
- every lock with a level of the registry (`LockLevel`): `Lock.init` has no
  default, and a bare number or level 0 (unchecked: `OperationGate`'s) is
  refused anywhere else.

Exit status 1, with each offending line, when one is found.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "Sources" / "AppNorthCore", ROOT / "Sources" / "AppNorthC"]

RULES = [
    (re.compile(r"\bpthread_(mutex|cond|rwlock|spin)_init\b|\bMutex<|\bNSLock\b|\bos_unfair_lock\b"),
     "a lock outside the toolkit: use Lock (Support/Lock.swift)",
     {"Support/Lock.swift", "Support/ForkGuard.swift"}),
    (re.compile(r"\bpthread_create\b"),
     "a thread outside the toolkit: use LibraryThread.spawn (Support/LibraryThread.swift)",
     {"Support/LibraryThread.swift"}),
    (re.compile(r"\bstatic\s+(let|var)\s+\w+\s*(:\s*Lock\b|=\s*Lock\b)|\bstatic\s+let\s+shared\s*="),
     "a process-wide object outside ForkLocal: a fork() child would inherit the parent's",
     # The random pool checks ForkGuard.generation itself on every draw (a
     # ForkLocal's extra lock would be a second global lock on track()'s path).
     # RuntimeWarmUp's flag is about the Swift runtime's metadata, which a
     # child does inherit: its "done" must be inherited too.
     {"Support/Random.swift", "Support/RuntimeWarmUp.swift"}),
    (re.compile(r"\blevel:\s*(\d|LockLevel\.gate\b)"),
     "a lock without a place in the order: give it a level of LockLevel (Support/LockOrder.swift); "
     "level 0 (unchecked) is OperationGate's alone",
     {"Support/OperationGate.swift"}),
]


def code(line: str) -> str:
    return line.split("//", 1)[0]


def main() -> int:
    found = []
    for base in SOURCES:
        for path in sorted(base.rglob("*.swift")):
            rel = path.relative_to(ROOT / "Sources" / "AppNorthCore") if base.name == "AppNorthCore" else None
            key = str(rel) if rel else ""
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for pattern, why, allowed in RULES:
                    if key not in allowed and pattern.search(code(line)):
                        found.append(f"{path.relative_to(ROOT)}:{number}: {why}: {line.strip()}")
    for line in found:
        print(line)
    if found:
        print(f"check-toolkit: {len(found)} line(s) outside the concurrency toolkit")
        return 1
    print("check-toolkit: every lock, thread and process-wide object goes through Lock, LibraryThread and ForkLocal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
