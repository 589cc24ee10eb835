"""appnorth.shutdown() (appnorth_shutdown) and the atexit hook that calls it.
Shutdown is process-wide and for good, so each case runs in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import appnorth
from appnorth_test_support import BINDING_DIR

APP = "demo"

SHUTDOWN_SCRIPT = textwrap.dedent("""
    import logging, os, sys, threading
    import appnorth
    from appnorth import _lib

    def threads(name):
        count = 0
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/comm") as f:
                count += f.read().strip() == name
        return count

    server, data_dir = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.DEBUG)
    changed = threading.Event()
    client = appnorth.Client(server, "demo")
    events = appnorth.Events(client, os.path.join(data_dir, "events"), flush_interval_ms=10, batch_threshold=1)
    config = appnorth.Config(client, os.path.join(data_dir, "config"))
    config.add_listener(lambda values, keys, tier: changed.set())
    config.start_live()
    for i in range(50):
        events.track("before", {"i": i})
    assert changed.wait(15), "the live config never called the listener"
    print("threads before:", threads("appnorth-events"), threads("appnorth-config"))
    appnorth.shutdown(5000)
    print("threads after:", threads("appnorth-events"), threads("appnorth-config"))
    for call in (client.list_boards, lambda: events.track("after"), config.snapshot):
        try:
            call()
            print("not refused")
        except appnorth.WrongStateError as error:
            print("refused:", "shut down" in str(error))
    appnorth.shutdown(0)  # again: fine
    events.close(); config.close(); client.close()  # free nothing, return at once
    print("done")
""")


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), APPNORTH_LIBRARY=appnorth.LIBRARY_PATH)
    return subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, timeout=60)


def test_shutdown_stops_threads_and_refuses_calls(server_url: str, admin, tmp_path: Path) -> None:
    admin.publish_config(APP, {"theme": "dark"})
    result = _run(SHUTDOWN_SCRIPT, server_url, str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "threads before: 1 1" in lines
    assert "threads after: 0 0" in lines
    assert lines.count("refused: True") == 3
    assert lines[-1] == "done"


def test_shutdown_from_a_listener_is_refused_and_changes_nothing(server_url: str, admin, tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys, threading
        import appnorth
        client = appnorth.Client(sys.argv[1], "demo")
        config = appnorth.Config(client, sys.argv[2])
        outcome = []
        done = threading.Event()
        def listener(values, keys, tier):
            try:
                appnorth.shutdown()
                outcome.append("ran")
            except appnorth.WrongStateError:
                outcome.append("refused")
            done.set()
        config.add_listener(listener)
        config.refresh()
        done.wait(10)
        print(outcome, isinstance(client.list_boards()["boards"], list))  # still running
    """)
    admin.publish_config(APP, {"theme": "light"})
    result = _run(script, server_url, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['refused'] True"


def test_the_atexit_hook_shuts_the_library_down(server_url: str, tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import sys
        import appnorth
        from appnorth import _lib
        client = appnorth.Client(sys.argv[1], "demo")
        events = appnorth.Events(client, sys.argv[2])
        events.track("at_exit")
        _lib._at_exit()  # what atexit runs
        try:
            appnorth.Client(sys.argv[1], "demo")
            print("not shut down")
        except appnorth.WrongStateError:
            print("shut down")
    """)
    result = _run(script, server_url, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "shut down"
