"""The short round of the Python binding's memory probe (issue #42, item 6):
bench/py/leak_probe.py, which ``make bench`` runs with 10^6 calls of each
kind, runs here with 10^5 track() calls, 10^5 config reads and 10^4
non-blocking reads (one in ten cancelled), each after a warm-up of a fifth,
in a process of its own.

The RSS bound is the bench's goal, 1 MiB, not scaled down with the calls:
RSS moves in 4 KiB pages and the allocators' arenas (up to +56 KiB per
kind at this size, +420 KiB in all at 10^6 calls, measured on 2026-12-07),
so a tenth of it would fail on noise. 1 MiB fails on a leak of about 5
bytes or more per track() or config read, or 100 bytes per non-blocking
read. The count of Python objects' blocks (``sys.getallocatedblocks()``
after a collection) is exact: +26 in all here; its bound, 1,000, fails on
one Python object kept per 200 calls (keeping each read's result: +17,819,
caught by both). And no operation may be left pending."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from appnorth_test_support import REPO_ROOT

PROBE = REPO_ROOT / "bench" / "py" / "leak_probe.py"
BOUND_KIB = 1024
BLOCKS_BOUND = 1000


def test_short_round_grows_less_than_a_mebibyte(server_url: str, tmp_path: Path) -> None:
    out = tmp_path / "leak_python.json"
    result = subprocess.run(
        [sys.executable, str(PROBE), server_url, "--calls", "100000", "--warmup", "20000",
         "--bound-kib", str(BOUND_KIB), "--blocks-bound", str(BLOCKS_BOUND), "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    print(result.stderr)
    assert result.returncode == 0, result.stderr
    probe = json.loads(out.read_text())
    assert [r["kind"] for r in probe["rows"]] == ["track", "config", "async"]
    assert probe["growth_kib"] <= BOUND_KIB and probe["blocks_growth"] <= BLOCKS_BOUND
    assert probe["pending_operations"] == 0
