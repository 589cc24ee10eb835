"""A consent change crosses processes on one data directory
(docs/events.md, "Consent"), through the real library in two processes
against the dev server.

A child keeps tracking (and uploading every 50 ms) while this process
revokes consent on the same directory: once the revocation returned, the
server logs no further event upload and stores nothing more, and the
child's tracks are dropped; a process opened afterwards starts revoked; a
grant here lets the child's new events through. Waits are on the child's
output and the server's admin state, never on bare sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple

import appnorth
from appnorth_test_support import APP, BINDING_DIR, Admin

#: Tracks "b-<n>" until stdin closes, printing "<n> <1 if queued else 0>".
TRACKER = r"""
import select, sys
import appnorth
url, data_dir = sys.argv[1], sys.argv[2]
with appnorth.Client(url, "pytest-app") as client:
    events = appnorth.Events(client, data_dir, flush_interval_ms=50, batch_threshold=5)
    n = 0
    while not select.select([sys.stdin], [], [], 0)[0]:
        queued = events.track(f"b-{n}")
        print(n, 1 if queued else 0, flush=True)
        n += 1
        select.select([], [], [], 0.001)
    events.close()
"""

EVENTS_PATH = f"/v1/apps/{APP}/events"
DEADLINE = 60.0


class Tracker:
    """A child process tracking on the data directory."""

    def __init__(self, server_url: str, data_dir: Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), APPNORTH_LIBRARY=appnorth.LIBRARY_PATH)
        self.process = subprocess.Popen([sys.executable, "-c", TRACKER, server_url, str(data_dir)], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)

    def read_until(self, want: Callable[[int, bool], bool]) -> Tuple[int, bool]:
        """Reads lines until ``want(n, queued)``; returns that line."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + DEADLINE
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            assert line, f"the child ended: {self.stderr()}"
            n, queued = (int(part) for part in line.split())
            if want(n, queued == 1):
                return n, queued == 1
        raise AssertionError("the child never printed the awaited line")

    def end(self) -> int:
        """Closes its stdin, reads its output to the end, waits for it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.stdout.read()
        return self.process.wait(timeout=DEADLINE)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def stderr(self) -> str:
        self.kill()
        assert self.process.stderr is not None
        return self.process.stderr.read()[-2000:]


def stored(admin: Admin) -> List[str]:
    return [e["name"] for e in admin.state(APP)["events"]]


def wait_for(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def event_posts_since(admin: Admin, since: int) -> Tuple[int, int]:
    """(event uploads logged after ``since``, the largest seq logged)."""
    requests = admin.requests(since=since)
    last = max([since] + [r["seq"] for r in requests])
    return sum(1 for r in requests if r["path"] == EVENTS_PATH), last


def test_a_revocation_in_one_process_stops_another_and_a_grant_restarts_it(
        tmp_path: Path, server_url: str, admin: Admin) -> None:
    data_dir = tmp_path / "shared"
    with appnorth.Client(server_url, APP) as client:
        here = appnorth.Events(client, str(data_dir), flush_interval_ms=3_600_000, batch_threshold=10_000)
        here.set_consent(True)
        child = Tracker(server_url, data_dir)
        fresh: Optional[Tracker] = None
        try:
            child.read_until(lambda n, queued: queued)
            assert wait_for(lambda: len(stored(admin)) > 0), "the child's events reach the server"

            here.set_consent(False)
            _, last = event_posts_since(admin, 0)
            at_revoke = len(stored(admin))
            dropped = [0]

            def count_dropped(n: int, queued: bool) -> bool:
                dropped[0] += 0 if queued else 1
                return dropped[0] >= 200

            child.read_until(count_dropped)  # several of its upload cycles
            late, _ = event_posts_since(admin, last)
            assert late == 0, "no event upload after the revocation returned"
            assert len(stored(admin)) == at_revoke, "nothing stored after the revocation returned"

            fresh = Tracker(server_url, data_dir)
            _, queued = fresh.read_until(lambda n, queued: True)
            assert not queued, "a process opened after the revocation starts revoked"
            assert fresh.end() == 0
            fresh = None

            here.set_consent(True)
            first, _ = child.read_until(lambda n, queued: queued)
            assert wait_for(lambda: any(name.startswith("b-") and int(name[2:]) >= first for name in stored(admin))), \
                "the child's events after the grant arrive"
            assert child.end() == 0
        finally:
            for tracker in (child, fresh):
                if tracker is not None:
                    tracker.kill()
            here.close()
