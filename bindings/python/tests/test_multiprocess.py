"""Several processes on one data directory (issue 10), through the real
library in real processes against the dev server.

- First open of a fresh directory is race-free: 4 processes opening it at
  the same moment all succeed and agree on one anonymous id.
- The built-in SQLite offline queue is shared safely: writes queued by two
  processes at once are all kept, and one process's flush sends them all.
- Events tracked by several processes on one directory arrive exactly once.

Children are fresh interpreters (subprocess), never forks of this process.
``APPNORTH_FIRST_OPEN_TRIALS`` raises the first-open trial count for a
measurement run; the suite's default keeps it quick.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import appnorth
from appnorth_test_support import APP, BINDING_DIR, Admin

#: Children call wait_for_go() where they should start together: the
#: parent creates the file named by their first argument once all run.
CHILD_PRELUDE = r"""
import os, sys, time
import appnorth

def wait_for_go():
    print("ready", flush=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(sys.argv[1]):
        if time.monotonic() > deadline:
            sys.exit("the start signal never came")
        time.sleep(0.001)
"""

FIRST_OPEN_CHILD = CHILD_PRELUDE + r"""
url, data_dir = sys.argv[2], sys.argv[3]
with appnorth.Client(url, "pytest-app") as client:
    wait_for_go()
    events = appnorth.Events(client, data_dir, flush_interval_ms=86_400_000)
    with appnorth.Storage.sqlite(data_dir, "queue") as storage, appnorth.OfflineQueue(storage) as queue:
        queue.pending_count()
    print(events.anonymous_id, flush=True)
    events.close()
"""

QUEUE_CHILD = CHILD_PRELUDE + r"""
url, data_dir, tag, idea = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
with appnorth.Client(url, "pytest-app", api_timeout_ms=2000) as client, \
        appnorth.Storage.sqlite(data_dir, "queue") as storage, appnorth.OfflineQueue(storage) as queue:
    wait_for_go()  # both have the queue open before either writes
    for n in range(5):
        assert queue.submit_comment(client, idea, f"{tag}-{n}") is False, "the server is down: queued"
print("queued", flush=True)
"""

EVENTS_CHILD = CHILD_PRELUDE + r"""
url, data_dir, tag = sys.argv[2], sys.argv[3], sys.argv[4]
with appnorth.Client(url, "pytest-app") as client:
    events = appnorth.Events(client, data_dir, flush_interval_ms=50, batch_threshold=7)
    wait_for_go()
    for n in range(40):
        assert events.track(f"{tag}-{n}")
    events.flush(timeout_ms=30_000)
    events.close(flush_timeout_ms=10_000)
print("tracked", flush=True)
"""


def _run_together(tmp_path: Path, script: str, argument_lists: List[List[str]]) -> List[subprocess.CompletedProcess]:
    """Starts one child per argument list, lets them go at once when all
    are ready, and returns their results (each child has 90 s)."""
    go = tmp_path / f"go-{time.monotonic_ns()}"
    env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), APPNORTH_LIBRARY=appnorth.LIBRARY_PATH)
    children = [subprocess.Popen([sys.executable, "-c", script, str(go), *arguments], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for arguments in argument_lists]
    for child in children:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "ready\n", (line, child.stderr.read() if child.stderr else "")
    go.touch()
    results = []
    for child in children:
        out, err = child.communicate(timeout=90)
        results.append(subprocess.CompletedProcess(child.args, child.returncode, out, err))
    return results


def test_four_processes_open_one_fresh_directory_at_once(tmp_path: Path, server_url: str) -> None:
    trials = int(os.environ.get("APPNORTH_FIRST_OPEN_TRIALS", "8"))
    failures: List[str] = []
    for trial in range(trials):
        data_dir = tmp_path / f"fresh{trial}"
        results = _run_together(tmp_path, FIRST_OPEN_CHILD, [[server_url, str(data_dir)]] * 4)
        failed = [r.stderr.strip().splitlines()[-1:] for r in results if r.returncode != 0]
        if failed:
            failures.append(f"trial {trial}: {failed}")
            continue
        ids = {r.stdout.strip() for r in results}
        if len(ids) != 1:
            failures.append(f"trial {trial}: {len(ids)} different anonymous ids")
    print(f"first open: {trials} trials of 4 processes, {len(failures)} failed")
    assert failures == []


def test_two_processes_queue_into_one_sqlite_queue_and_lose_nothing(tmp_path: Path, server_url: str,
                                                                  admin: Admin) -> None:
    board = admin.add_board(APP, "Features")
    idea = admin.add_idea(APP, board["id"], "Dark mode")
    data_dir = tmp_path / "shared"
    admin.outage(count=100_000)
    results = _run_together(tmp_path, QUEUE_CHILD,
                            [[server_url, str(data_dir), tag, idea["id"]] for tag in ("a", "b")])
    admin.clear_faults()
    assert [r.returncode for r in results] == [0, 0], [r.stderr[-2000:] for r in results]

    with appnorth.Client(server_url, APP) as client, \
            appnorth.Storage.sqlite(str(data_dir), "queue") as storage, appnorth.OfflineQueue(storage) as queue:
        assert queue.pending_count() == 10, "every acknowledged write is pending"
        assert queue.flush(client) == 10
        assert queue.pending_count() == 0
    stored = sorted(c["body"] for c in admin.state(APP)["comments"])
    assert stored == sorted(f"{tag}-{n}" for tag in ("a", "b") for n in range(5))


def test_two_storage_handles_on_one_name_in_one_process(tmp_path: Path, server_url: str, admin: Admin) -> None:
    board = admin.add_board(APP, "Features")
    idea = admin.add_idea(APP, board["id"], "Dark mode")
    with appnorth.Client(server_url, APP, api_timeout_ms=2000) as client, \
            appnorth.Storage.sqlite(str(tmp_path), "queue") as s1, appnorth.OfflineQueue(s1) as q1, \
            appnorth.Storage.sqlite(str(tmp_path), "queue") as s2, appnorth.OfflineQueue(s2) as q2:
        admin.outage(count=1000)
        for n in range(5):
            assert q1.submit_comment(client, idea["id"], f"one-{n}") is False
            assert q2.submit_comment(client, idea["id"], f"two-{n}") is False
        admin.clear_faults()
        assert (q1.pending_count(), q2.pending_count()) == (10, 10)
        assert q2.flush(client) == 10
        assert q1.pending_count() == 0 and q1.flush(client) == 0
    assert len(admin.state(APP)["comments"]) == 10


def test_events_from_several_processes_arrive_exactly_once(tmp_path: Path, server_url: str, admin: Admin) -> None:
    data_dir = tmp_path / "events"
    tags = ["p0", "p1", "p2"]
    results = _run_together(tmp_path, EVENTS_CHILD, [[server_url, str(data_dir), tag] for tag in tags])
    assert [r.returncode for r in results] == [0] * len(tags), [r.stderr[-2000:] for r in results]
    # Every child flushed before it exited; whatever one left queued (its
    # upload thread may have taken a batch another child's flush waited
    # for), a last handle on the directory uploads.
    with appnorth.Client(server_url, APP) as client:
        events = appnorth.Events(client, str(data_dir))
        events.flush(timeout_ms=30_000)
        events.close()
    names = [e["name"] for e in admin.state(APP)["events"]]
    counts: Dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    assert sorted(counts) == sorted(f"{tag}-{n}" for tag in tags for n in range(40))
    assert set(counts.values()) == {1}, "exactly once"
