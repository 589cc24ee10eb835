"""gunicorn --preload with the module-level Client and Events that SDK
quickstarts show (issue #42), as bindings/python/README.md shows it: the master imports the app and makes the
handles, then forks sync workers that are recycled every few dozen requests
(--max-requests). Every request succeeds, every event reaches the server
exactly once, no worker is killed or dies, and the graceful stop (SIGTERM)
ends. gunicorn comes from bindings/python/requirements-test.txt."""

from __future__ import annotations

import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import List

import pytest

import appnorth
from appnorth_test_support import BINDING_DIR, Admin

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

APP_GUNICORN = "demo"  # the README's app
REQUESTS = int(os.environ.get("APPNORTH_TEST_GUNICORN_REQUESTS", "300"))
CLIENTS = 4
WORKERS = 2
MAX_REQUESTS = 25
#: Only failure bounds: a run that passes never waits for them.
STOP_SECONDS = 60.0
REQUEST_SECONDS = 30.0



def readme_app() -> str:
    """The app of bindings/python/README.md's "Pre-fork servers" section,
    as written."""
    text = (BINDING_DIR / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Pre-fork servers"):]
    match = re.search(r"^```python\n(.*?)^```$", section, re.S | re.M)
    assert match, "no python block under '## Pre-fork servers'"
    return match.group(1)


def _get(port: int, i: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_SECONDS)
    try:
        conn.request("GET", f"/boards?{i}" if i % 10 == 0 else f"/?{i}")
        response = conn.getresponse()
        body = response.read().decode()
        assert response.status == 200, (i, response.status, body)
        assert (body.startswith('{"boards"') if i % 10 == 0 else body == "ok\n"), (i, body)
        return body
    finally:
        conn.close()


def _unexpected_deaths(log_text: str) -> List[str]:
    """Workers that died of a signal, except one the graceful stop's SIGTERM
    reached after it had begun to exit on its own (recycled by
    --max-requests): such a worker has run its exit hooks, so its events
    were uploaded or left on disk (counted below), and only Python's last
    teardown, where the default signal action is back, was cut. gunicorn
    logs that case at INFO as expected."""
    stop = log_text.find("Handling signal: term")
    deaths = re.findall(r"Worker \(pid:(\d+)\) was sent (\w+)", log_text)
    return [f"{pid} {sig}" for pid, sig in deaths
            if sig != "SIGTERM" or not 0 <= log_text.find(f"Worker exiting (pid: {pid})") < stop]


def test_preload_with_module_level_handles(server_url: str, admin: Admin, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(readme_app())
    data_dir = tmp_path / "data"
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    env = dict(os.environ, APPNORTH_URL=server_url, APPNORTH_DATA=str(data_dir),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    log_path = tmp_path / "gunicorn.log"
    started = time.monotonic()
    with open(log_path, "w") as log:
        master = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--preload", "--worker-class", "sync",
             "--workers", str(WORKERS), "--max-requests", str(MAX_REQUESTS), "--max-requests-jitter", "10",
             "--bind", f"fd://{listener.fileno()}", "--timeout", "60", "--graceful-timeout", "30",
             "--log-level", "info", "app:app"],
            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, pass_fds=[listener.fileno()])
    listener.close()
    bodies: List[str] = []
    failures: List[BaseException] = []
    try:
        def client_thread(first: int) -> None:
            try:
                for i in range(first, REQUESTS, CLIENTS):
                    bodies.append(_get(port, i))
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=client_thread, args=(k,)) for k in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        served = time.monotonic() - started
        stop_started = time.monotonic()
        master.send_signal(signal.SIGTERM)  # gunicorn's graceful stop
        code = master.wait(timeout=STOP_SECONDS)
        stopped = time.monotonic() - stop_started
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    log_text = log_path.read_text()
    assert failures == [], f"{failures[:3]}\n{log_text[-3000:]}"
    assert len(bodies) == REQUESTS
    assert code == 0, log_text[-3000:]
    for bad in ("WORKER TIMEOUT", "exited with code", "Traceback", "[ERROR]", "[WARNING]"):
        assert bad not in log_text, log_text[-3000:]
    assert _unexpected_deaths(log_text) == [], log_text[-3000:]
    booted = len(re.findall(r"Booting worker with pid", log_text))
    recycled = len(re.findall(r"Autorestarting worker", log_text))
    assert recycled >= REQUESTS // (MAX_REQUESTS + 10) - WORKERS, "the workers were recycled"

    # Events a worker did not upload before it exited stay in the data
    # directory: the next open uploads them (counted here), never twice.
    with appnorth.Client(server_url, APP_GUNICORN) as client, appnorth.Events(client, data_dir) as later:
        left_over = later.flush(20000)
    names = Counter(e["name"] for e in admin.state(APP_GUNICORN)["events"])
    seen = Counter(int(e["properties"]["query"]) for e in admin.state(APP_GUNICORN)["events"]
                   if e["name"] == "request")
    assert names["server started"] == 1  # the master's own, once
    assert sorted(seen) == list(range(REQUESTS)), f"missing {sorted(set(range(REQUESTS)) - set(seen))[:10]}"
    assert set(seen.values()) == {1}, f"duplicates: {[i for i, n in seen.items() if n > 1][:10]}"
    print(f"\ngunicorn --preload: {REQUESTS} requests answered by {booted} workers ({recycled} recycled), "
          f"{served:.1f} s; graceful stop {stopped:.2f} s; "
          f"every event once ({left_over} uploaded by the open after the stop)")
