"""The queue limits are the data directory's (issue 24): two processes on
one directory, each tracking 6,000 events offline, then both flushing,
deliver exactly the newest 10,000 to the dev server, and the drops of both
add up to the 2,000 that did not arrive."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List

from appnorth_test_support import APP, Admin

CHILD = r"""
import json
import sys
import appnorth
url, app, data_dir, prefix = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
client = appnorth.Client(url, app, api_timeout_ms=5000)
events = appnorth.Events(client, data_dir, flush_interval_ms=3600000, batch_threshold=20,
                         retry_base_delay_ms=10)
for n in range(6000):
    events.track(f"{prefix}{n}")
print("tracked", flush=True)
sys.stdin.readline()  # the parent says when to flush
try:
    events.flush(60000)
except appnorth.AppNorthError as exc:
    print("flush:", exc, file=sys.stderr)
print(json.dumps(events.stats()), flush=True)
sys.stdin.readline()
events.close()
"""


def start(server_url: str, data_dir: Path, prefix: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD, server_url, APP, str(data_dir), prefix],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "tracked"
    return child


def flush(child: subprocess.Popen) -> dict:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write("flush\n")
    child.stdin.flush()
    stats: dict = json.loads(child.stdout.readline())
    return stats


def test_two_processes_keep_the_newest_ten_thousand(tmp_path: Path, server_url: str, admin: Admin) -> None:
    admin.add_fault(status=503, count=1000000, path_prefix=f"/v1/apps/{APP}/events")
    data_dir = tmp_path / "shared"
    older = start(server_url, data_dir, "older-")   # tracks first: its 2,000 first go
    newer = start(server_url, data_dir, "newer-")
    children: List[subprocess.Popen] = [newer, older]
    try:
        admin.clear_faults()
        stats = [flush(newer), flush(older)]
        for child in children:
            assert child.stdin is not None
            child.stdin.write("close\n")
            child.stdin.flush()
            child.wait(timeout=60)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    names = {e["name"] for e in admin.state(APP)["events"]}
    assert len(names) == 10_000
    assert names == {f"newer-{n}" for n in range(6000)} | {f"older-{n}" for n in range(2000, 6000)}
    assert sum(s["dropped"]["queue_limit"] for s in stats) == 2_000
