"""A track() kill -9 round, run inside a platform root with the wheel
installed (scripts/test-platforms.sh): children track numbered events and
print each number once track() returned; each is killed with SIGKILL
after its first few events. A last process flushes the queue, and every
printed event must be on the dev server exactly once. Python 3.9 and up,
standard library and appnorth only.
Usage: kill_round.py API_URL APP DATA_DIR ROUNDS TAG (TAG keeps event names apart between roots)"""

import collections
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.request

import appnorth

CHILD = r"""
import sys
import appnorth
url, app, data_dir, first, tag = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
client = appnorth.Client(url, app, api_timeout_ms=3000)
events = appnorth.Events(client, data_dir, flush_interval_ms=50, batch_threshold=20)
n = first
while True:
    assert events.track(f"platform-kill-{tag}-{n}", {"n": n})
    print(n, flush=True)
    n += 1
"""


def admin(url, method, path):
    request = urllib.request.Request(url + path, method=method, data=b"{}" if method == "POST" else None,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def main():
    url, app, data_dir, rounds, tag = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    printed, first = [], 0
    for _ in range(rounds):
        child = subprocess.Popen([sys.executable, "-c", CHILD, url, app, data_dir, str(first), tag],
                                 stdout=subprocess.PIPE, text=True)
        # Kill after the child has printed its 30th event, or after 60 s.
        deadline, seen = time.monotonic() + 60, 0
        while seen < 30 and time.monotonic() < deadline:
            ready, _, _ = select.select([child.stdout], [], [], 1.0)
            line = child.stdout.readline() if ready else ""
            if ready and not line:
                break
            if line:
                printed.append(int(line))
                seen += 1
        child.send_signal(signal.SIGKILL)
        printed.extend(int(line) for line in child.stdout.read().split())
        child.wait()
        assert child.returncode == -signal.SIGKILL, f"the child ended with {child.returncode}, not SIGKILL"
        assert seen > 0, "the child tracked nothing"
        first = max(printed) + 10
    with appnorth.Client(url, app) as client, appnorth.Events(client, data_dir) as events:
        events.set_network_type(appnorth.NETWORK_WIFI)
        events.flush(30000)
        left = events.stats()["queued"]
        assert left == 0, f"{left} events still queued after the flush"
    names = collections.Counter(e["name"] for e in admin(url, "GET", f"/admin/apps/{app}/state")["events"])
    missing = [n for n in printed if names[f"platform-kill-{tag}-{n}"] != 1]
    assert not missing, f"{len(missing)} of {len(printed)} acknowledged events not stored exactly once: {missing[:5]}"
    print(f"kill -9: {rounds} rounds, {len(printed)} acknowledged events, each stored once")


if __name__ == "__main__":
    main()
