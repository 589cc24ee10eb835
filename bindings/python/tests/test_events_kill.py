"""A Python host killed (SIGKILL) while it tracks and uploads loses no event
whose track() returned, and the server stores none twice.

Each round a child process tracks numbered events on one shared data
directory with a busy flush policy (uploads run all the time) and prints
each number after track() returned; the parent SIGKILLs it at a random
moment. The next child's open imports the journals the dead ones left.
At the end the parent opens the queue, flushes it, and every printed event
must be on the server exactly once. The C campaign (test_events_crash.c)
runs 200 rounds in make test-soak; here 3 rounds, 10 in make test-soak, and
APPNORTH_CRASH_ROUNDS makes both longer.
"""

from __future__ import annotations

import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import appnorth
from appnorth_test_support import APP, Admin, campaign

CHILD = r"""
import sys
import appnorth
url, app, data_dir, first = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = appnorth.Client(url, app, api_timeout_ms=3000)
events = appnorth.Events(client, data_dir, flush_interval_ms=50, batch_threshold=20,
                         max_events=1000000, max_bytes=1 << 30)
n = first
while True:
    assert events.track(f"kill-{n}", {"n": n})
    print(n, flush=True)
    n += 1
"""


def read_lines(child: subprocess.Popen, until: float, printed: List[int]) -> None:
    """Collects the numbers the child printed until `until` (monotonic)."""
    assert child.stdout is not None
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return
        ready, _, _ = select.select([child.stdout], [], [], left)
        if not ready:
            return
        line = child.stdout.readline()
        if not line:
            return
        printed.append(int(line))


def test_killed_hosts_lose_and_duplicate_no_event(tmp_path: Path, server_url: str, admin: Admin) -> None:
    admin.reset()
    rng = random.Random()
    data_dir = tmp_path / "events"
    printed: List[int] = []
    first = 0
    rounds = campaign("APPNORTH_CRASH_ROUNDS", 3, 10)
    for _ in range(rounds):
        child = subprocess.Popen([sys.executable, "-c", CHILD, server_url, APP, str(data_dir), str(first)],
                                 stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        before = len(printed)
        # Wait for the first event (a loaded machine may start the child late),
        # then kill at a random moment while it tracks and uploads.
        read_lines_until_first = time.monotonic() + 60
        while len(printed) == before and time.monotonic() < read_lines_until_first:
            read_lines(child, min(read_lines_until_first, time.monotonic() + 0.05), printed)
        assert len(printed) > before, "the child tracked"
        read_lines(child, time.monotonic() + rng.uniform(0.0, 0.2), printed)
        child.send_signal(signal.SIGKILL)
        # What it printed before dying still counts.
        assert child.stdout is not None
        printed.extend(int(line) for line in child.stdout.read().split())
        child.wait()
        child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        first = max(printed) + 10  # a tracked but unprinted number is never reused

    with appnorth.Client(server_url, APP) as client, \
            appnorth.Events(client, str(data_dir), max_events=1000000, max_bytes=1 << 30) as events:
        events.set_network_type(appnorth.NETWORK_WIFI)
        events.flush(30000)
        assert events.stats()["queued"] == 0

    names = Counter(e["name"] for e in admin.state(APP)["events"])
    duplicates = [name for name, count in names.items() if count > 1]
    missing = [n for n in printed if f"kill-{n}" not in names]
    assert duplicates == [], f"stored twice: {duplicates[:5]}"
    assert missing == [], f"{len(missing)} of {len(printed)} printed events lost, e.g. {missing[:5]}"
    assert len(names) - len(printed) <= rounds, "at most one unprinted event per round"


CHILD_IN_PARTS = r"""
import sys
import appnorth
url, app, data_dir, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
client = appnorth.Client(url, app, api_timeout_ms=30000)
events = appnorth.Events(client, data_dir, flush_interval_ms=3600000, batch_threshold=10000,
                         max_events=1000000, max_bytes=1 << 30)
events.set_network_type(appnorth.NETWORK_WIFI)
for n in range(count):
    assert events.track(f"part-{n}", {"n": n})
print("tracked", flush=True)
events.flush(120000)
"""


def test_a_host_killed_between_journal_parts_sends_the_rest_once(tmp_path: Path, server_url: str,
                                                                 admin: Admin) -> None:
    """The upload cycle imports the journal a part at a time while its
    requests are in flight (docs/events.md): a host killed between two
    parts leaves its file with a progress mark, and the next open imports
    only the rest. Every event arrives; the only copies the server sees
    are the batches in flight or delivered and not yet deleted (at most
    two), never a part imported again."""
    admin.reset()
    count = 5000
    data_dir = tmp_path / "events"
    # Slow uploads, so that the kill lands while parts remain.
    admin.add_fault(delay_ms=100, path_prefix=f"/v1/apps/{APP}/events", count=1000000)
    child = subprocess.Popen([sys.executable, "-c", CHILD_IN_PARTS, server_url, APP, str(data_dir), str(count)],
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], 60)
    assert ready and child.stdout.readline().strip() == "tracked"
    # 5 batches delivered (5,000 events take 20 parts, one per request).
    uploads: List[Dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while len(uploads) < 5 and time.monotonic() < deadline:
        uploads = [r for r in admin.requests(timeout=0) if r["path"] == f"/v1/apps/{APP}/events"]
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert len(uploads) >= 5, "the child uploaded"
    with sqlite3.connect(str(data_dir / "appnorth.sqlite3")) as db:
        marks = db.execute("SELECT COUNT(*) FROM kv WHERE namespace = 'events_journal_progress'").fetchone()[0]
    assert marks == 1, "killed between two parts of its journal"
    admin.clear_faults()

    with appnorth.Client(server_url, APP) as client, \
            appnorth.Events(client, str(data_dir), max_events=1000000, max_bytes=1 << 30) as events:
        events.set_network_type(appnorth.NETWORK_WIFI)
        events.flush(60000)
        assert events.stats()["queued"] == 0

    names = Counter(e["name"] for e in admin.state(APP)["events"])
    assert sorted(names) == sorted(f"part-{n}" for n in range(count))
    copies = sum(r.get("events_duplicates", 0) for r in admin.requests(timeout=0)
                 if r["path"] == f"/v1/apps/{APP}/events")
    assert copies <= 200, f"{copies} events sent again"
