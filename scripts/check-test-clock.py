#!/usr/bin/env python3
"""The clock gate of the C tests (make test-size): every clock the C tests
read goes through Tests/c/clock.h. Outside that header no C file under
Tests/c calls time() or names CLOCK_REALTIME (a deadline or a duration is
mono_ms(); a time compared with one the library stores is wall_ms()), and
none calls pthread_cond_timedwait (cond_wait_until waits on a
CLOCK_MONOTONIC condition variable). Comments and string literals do not
count.

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
TESTS = ROOT / "Tests" / "c"
HEADER = "clock.h"

#: (pattern, what to use instead)
REFUSED = [
    (re.compile(r"(?<![\w.>])time\s*\("), "time(): use mono_ms() or wall_ms() from clock.h"),
    (re.compile(r"\bCLOCK_REALTIME\b"), "CLOCK_REALTIME: use wall_ms() from clock.h"),
    (re.compile(r"\bpthread_cond_timedwait\b"), "pthread_cond_timedwait: use cond_wait_until() from clock.h"),
]


def code_only(text: str) -> str:
    """`text` with comments, string and character literals blanked (line breaks kept)."""
    text = re.sub(r"/\*[\s\S]*?\*/", lambda m: "\n" * m.group(0).count("\n"), text)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def check(folder: Path) -> list[str]:
    problems = []
    for path in sorted(list(folder.glob("*.c")) + list(folder.glob("*.h"))):
        if path.name == HEADER:
            continue
        for number, line in enumerate(code_only(path.read_text(encoding="utf-8")).split("\n"), 1):
            for pattern, instead in REFUSED:
                if pattern.search(line):
                    problems.append(f"{path.relative_to(folder.parent.parent)}:{number}: {instead}")
    return problems


def self_test() -> int:
    clean = ('/* time() and CLOCK_REALTIME live in clock.h */\n#include "clock.h"\n'
             'static void f(void) { int64_t t = mono_ms(); printf("woke %d time(s)\\n", 1); s.time(1); (void)t; }\n')
    bad = {
        "time.c": "static long f(void) { return time(NULL); }\n",
        "real.c": "static void f(struct timespec *t) { clock_gettime(CLOCK_REALTIME, t); }\n",
        "wait.h": "static int f(void) { return pthread_cond_timedwait(&cv, &mu, &ts); }\n",
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "Tests" / "c"
        folder.mkdir(parents=True)
        (folder / HEADER).write_text("static long g(void) { return time(NULL) + CLOCK_REALTIME; }\n", encoding="utf-8")
        (folder / "ok.c").write_text(clean, encoding="utf-8")
        passed = check(folder)
        for name, text in bad.items():
            (folder / name).write_text(text, encoding="utf-8")
        failed = check(folder)
    if passed or len(failed) != len(bad) or not all(any(name in f for f in failed) for name in bad):
        print(f"check-test-clock self-test failed: clean tree {passed}, bad tree {failed}")
        return 1
    print("check-test-clock self-test: time(), CLOCK_REALTIME and pthread_cond_timedwait outside clock.h fail; "
          "comments, strings and members do not")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems = check(TESTS)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-test-clock: {len(problems)} clock use(s) outside Tests/c/{HEADER}")
        return 1
    print(f"check-test-clock: Tests/c reads its clocks through {HEADER} only")
    return 0


if __name__ == "__main__":
    sys.exit(main())
