"""fork() from a busy parent, as pre-fork servers do (gunicorn --preload,
Celery's prefork pool, multiprocessing with the fork start method): every
child that uses the parent's objects (they reopen) or makes new ones works,
none hangs or crashes, and every child's events reach the server once."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

import appnorth
from appnorth import _lib
from appnorth_test_support import Admin, campaign, fork_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

APP_FORK = "pyfork"
CHILDREN = campaign("APPNORTH_TEST_FORKS", 20, 200)
CHILD_EVENTS = 3
PARALLEL = 4
HANG_SECONDS = 30.0


def _child(server_url: str, data_dir: Path, inherited: appnorth.Events, index: int) -> int:
    """A forked worker: its first event through the parent's Events (which
    reopens here), the others through handles of its own. Returns an exit
    code naming the step that failed."""
    if not inherited.track("fork child", {"child": index, "k": 0}):
        return 10
    inherited.close()  # frees the child's handle; the parent's stays the parent's
    if not inherited.closed:
        return 11
    client = appnorth.Client(server_url, APP_FORK, api_timeout_ms=5000)
    events = appnorth.Events(client, data_dir)
    for k in range(1, CHILD_EVENTS):
        if not events.track("fork child", {"child": index, "k": k}):
            return 12
    events.flush(20000)
    events.close()
    client.close()
    _lib.close_all_live()  # what the exit hook does: must not touch the parent's handles
    return 0


def test_children_of_a_busy_parent_make_new_handles(server_url: str, admin: Admin,
                                                      tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    client = appnorth.Client(server_url, APP_FORK, api_timeout_ms=5000)
    events = appnorth.Events(client, data_dir, flush_interval_ms=1000, batch_threshold=10)
    stop = threading.Event()
    tracked = [0]

    def track_loop() -> None:
        while not stop.is_set():
            if events.track("parent", {"busy": True}):
                tracked[0] += 1
            time.sleep(0.001)

    tracker = threading.Thread(target=track_loop)
    tracker.start()
    outcomes: Dict[str, int] = {"hung": 0, "crashed": 0, "failed": 0}
    codes: List[int] = []
    try:
        running: List[Tuple[int, float]] = []
        next_index = 0
        while next_index < CHILDREN or running:
            while next_index < CHILDREN and len(running) < PARALLEL:
                index = next_index
                next_index += 1
                pid = fork_child(lambda: _child(server_url, data_dir, events, index))
                running.append((pid, time.monotonic()))
            still: List[Tuple[int, float]] = []
            for pid, started in running:
                got, status = os.waitpid(pid, os.WNOHANG)
                if got == pid:
                    if os.WIFSIGNALED(status):
                        outcomes["crashed"] += 1
                    elif os.WEXITSTATUS(status) != 0:
                        outcomes["failed"] += 1
                        codes.append(os.WEXITSTATUS(status))
                elif time.monotonic() - started > HANG_SECONDS:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    outcomes["hung"] += 1
                else:
                    still.append((pid, started))
            running = still
            time.sleep(0.002)
    finally:
        stop.set()
        tracker.join()
    assert outcomes == {"hung": 0, "crashed": 0, "failed": 0}, f"{outcomes}, exit codes {codes}"
    assert tracked[0] > 0

    # Every child flushed before exiting: each of its events is on the server once.
    want = {(i, k) for i in range(CHILDREN) for k in range(CHILD_EVENTS)}
    deadline = time.monotonic() + 30
    while True:
        stored = [e["properties"] for e in admin.state(APP_FORK)["events"] if e["name"] == "fork child"]
        pairs = [(p["child"], p["k"]) for p in stored]
        if set(pairs) == want or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert set(pairs) == want
    assert len(pairs) == len(want)  # no duplicates

    # The parent's handles still work, and its own events arrive too.
    events.flush(30000)
    events.close()
    client.close()


def test_an_inherited_read_cache_reopens_for_its_thin_reads() -> None:
    """The cache's reads skip the binding's per-call checks (the thin path);
    an inherited one reopens there too, on a new memory storage (what the
    parent's held stays the parent's)."""
    with appnorth.ReadCache(appnorth.Storage.memory()) as cache:
        cache.store_boards("scope", [{"id": "b1"}])

        def child() -> int:
            if cache.boards_json("scope") is not None:
                return 10
            cache.store_boards("scope", [{"id": "b2"}])
            return 0 if cache.boards("scope") == [{"id": "b2"}] else 11

        pid = fork_child(child)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert cache.boards("scope") == [{"id": "b1"}]
