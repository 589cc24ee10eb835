"""A host killed in the middle of an offline-queue flush loses no entry, and
the server applies each entry once.

The parent queues comments while the server is unreachable, then a child
process opens the same SQLite-backed queue and flushes it while the server
answers slowly; the parent SIGKILLs the child at a random moment, reopens
the queue and finishes the flush. Every comment must be on the server
exactly once: an entry sent by the dead child but not yet removed is
replayed with its original idempotency key, which the server deduplicates.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import appnorth
from appnorth_test_support import APP, Admin

CHILD = r"""
import sys
import appnorth
url, data_dir = sys.argv[1], sys.argv[2]
with appnorth.Client(url, "pytest-app", api_timeout_ms=5000) as client, \
     appnorth.Storage.sqlite(data_dir, "queue") as storage, \
     appnorth.OfflineQueue(storage) as queue:
    print("flushing", flush=True)
    queue.flush(client)
    print("done", flush=True)
"""

ENTRIES = 12


def test_a_host_killed_during_a_flush_loses_no_entry(tmp_path: Path, server_url: str, admin: Admin) -> None:
    rng = random.Random(7)
    # APPNORTH_CRASH_ROUNDS makes a longer kill -9 campaign of the same test.
    for round_number in range(int(os.environ.get("APPNORTH_CRASH_ROUNDS", "3"))):
        admin.reset()
        board = admin.add_board(APP, "Features")
        idea = admin.add_idea(APP, board["id"], "Dark mode")
        data_dir = tmp_path / f"round{round_number}"
        bodies = [f"r{round_number}-c{i}" for i in range(ENTRIES)]

        with appnorth.Client(server_url, APP) as client, \
                appnorth.Storage.sqlite(str(data_dir), "queue") as storage, \
                appnorth.OfflineQueue(storage) as queue:
            admin.outage(count=1000)
            for body in bodies:
                assert queue.submit_comment(client, idea["id"], body) is False
            admin.clear_faults()
            assert queue.pending_count() == ENTRIES

        # Each replayed request takes 60 ms, so the flush runs ~0.7 s.
        admin.add_fault(delay_ms=60, count=1000, path_prefix=f"/v1/apps/{APP}/ideas")
        child = subprocess.Popen([sys.executable, "-c", CHILD, server_url, str(data_dir)],
                                 stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "flushing"
        # Kill mid-flush: after the first entry reached the server (a loaded
        # machine may start the child late), while the other 11 still take
        # at least 60 ms each.
        deadline = time.monotonic() + 60
        while not admin.state(APP)["comments"] and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        admin.clear_faults()

        with appnorth.Client(server_url, APP) as client, \
                appnorth.Storage.sqlite(str(data_dir), "queue") as storage, \
                appnorth.OfflineQueue(storage) as queue:
            stored_before = len(admin.state(APP)["comments"])
            assert 0 < stored_before < ENTRIES, f"the kill landed mid-flush ({stored_before} sent)"
            assert queue.pending_count() + stored_before >= ENTRIES, "no entry was lost"
            queue.flush(client)
            assert queue.pending_count() == 0

        stored = [c["body"] for c in admin.state(APP)["comments"]]
        assert sorted(stored) == sorted(bodies), "every entry arrived exactly once"
