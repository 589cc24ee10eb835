"""Client lifetime: close, use after close, concurrent close, garbage
collection, interpreter exit with live handles, fork()."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Dict, List

import pytest

import appnorth
from appnorth import _handle, _lib
from appnorth_test_support import APP, BINDING_DIR, FAST_TIMEOUT_MS, Admin


def test_close_is_idempotent_and_sets_closed(server_url: str) -> None:
    client = appnorth.Client(server_url, APP)
    assert not client.closed
    client.close()
    assert client.closed
    client.close()
    assert "closed" in repr(client)


def test_context_manager_closes(server_url: str) -> None:
    with appnorth.Client(server_url, APP) as client:
        assert not client.closed
    assert client.closed


def test_context_manager_closes_on_error(server_url: str) -> None:
    with pytest.raises(KeyError):
        with appnorth.Client(server_url, APP) as client:
            raise KeyError("boom")
    assert client.closed


@pytest.mark.parametrize("call", [
    lambda c: c.list_boards(),
    lambda c: c.list_boards_json(),
    lambda c: c.list_ideas(),
    lambda c: c.list_ideas_json('{"limit": 1}'),
    lambda c: c.scope,
])
def test_every_method_after_close_is_a_wrong_state_error(server_url: str, admin: Admin, call: Any) -> None:
    client = appnorth.Client(server_url, APP)
    client.close()
    with pytest.raises(appnorth.WrongStateError, match="closed") as info:
        call(client)
    assert info.value.code == appnorth.E_WRONG_STATE
    admin.assert_nothing_sent()


def test_close_waits_for_a_call_in_progress(server_url: str, admin: Admin) -> None:
    admin.add_fault(delay_ms=400)
    client = appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS)
    outcome: Dict[str, Any] = {}

    def slow_call() -> None:
        try:
            outcome["result"] = client.list_boards()
        except BaseException as exc:  # noqa: BLE001
            outcome["error"] = exc

    worker = threading.Thread(target=slow_call)
    worker.start()
    # Wait until the call is inside the library.
    deadline = time.monotonic() + 2
    while not client._calls and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(client._calls) == 1
    started = time.monotonic()
    client.close()
    waited = time.monotonic() - started
    worker.join(timeout=5)
    assert outcome == {"result": {"boards": []}}
    assert waited > 0.1, "close returned while the call was still running"
    with pytest.raises(appnorth.WrongStateError):
        client.list_boards()


def test_live_clients_are_tracked_weakly(server_url: str) -> None:
    client = appnorth.Client(server_url, APP)
    assert client in _lib._live
    client.close()
    assert client not in _lib._live

    client = appnorth.Client(server_url, APP)
    before = len(_lib._live)
    del client
    gc.collect()
    assert len(_lib._live) == before - 1


def test_exit_hook_closes_live_clients(server_url: str) -> None:
    clients = [appnorth.Client(server_url, APP) for _ in range(3)]
    _lib.close_all_live()
    assert all(c.closed for c in clients)


def test_failed_creation_leaves_nothing_behind(server_url: str) -> None:
    before = len(_lib._live)
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Client(server_url, "")
    gc.collect()
    assert len(_lib._live) == before


EXIT_SCRIPT = textwrap.dedent("""
    import atexit, logging, sys, threading

    keep = []
    # Registered before appnorth's own hook, so it runs after it (LIFO).
    atexit.register(lambda: print("closed at exit:", all(c.closed for c in keep), flush=True))
    import appnorth

    logging.basicConfig(level=logging.DEBUG, stream=sys.stdout)
    url, dead = sys.argv[1], sys.argv[2]
    for i in range(4):
        keep.append(appnorth.Client(url, "exit-app", logger=True, api_timeout_ms=2000))
        keep.append(appnorth.Client(dead, "exit-app", logger=logging.getLogger("x"), api_timeout_ms=500))

    def hammer(client):
        for _ in range(20):
            try:
                client.list_boards()
            except appnorth.AppNorthError:
                pass
    threads = [threading.Thread(target=hammer, args=(c,), daemon=True) for c in keep]
    for t in threads:
        t.start()
    for t in threads[::2]:
        t.join()
    print("exiting with live clients", flush=True)
    # No close(): the atexit hook must free them before the interpreter goes.
""")


def test_interpreter_exit_with_live_clients_and_log_callbacks(server_url: str, closed_port: int,
                                                              tmp_path: Path) -> None:
    script = tmp_path / "exit_script.py"
    script.write_text(EXIT_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), APPNORTH_LIBRARY=appnorth.LIBRARY_PATH)
    for _ in range(3):
        result = subprocess.run([sys.executable, str(script), server_url, f"http://127.0.0.1:{closed_port}"],
                                env=env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        assert "exiting with live clients" in result.stdout
        assert "closed at exit: True" in result.stdout
        assert "Traceback" not in result.stderr and "Exception" not in result.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_reopens_the_parents_client(server_url: str) -> None:
    client = appnorth.Client(server_url, APP)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: a handle of its own, made on first use; exits cleanly
        code = 1
        try:
            code = 0 if client.list_boards() == {"boards": []} else 2
            client.close()  # frees the child's handle only
            code = code if client.closed else 3
        finally:
            os.write(write_end, bytes([code]))
            os._exit(code)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    child_code = os.read(read_end, 1)
    os.close(read_end)
    assert os.WEXITSTATUS(status) == 0 and child_code == b"\x00"
    # The parent's client is untouched.
    assert client.list_boards() == {"boards": []}
    client.close()


def test_close_from_inside_a_log_callback_is_refused(server_url: str, closed_port: int) -> None:
    outcomes: List[BaseException] = []

    class Closer:
        client: Any = None

    import logging

    logger = logging.getLogger("appnorth.test.closer")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False

    class CloseHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                Closer.client.close()
            except appnorth.WrongStateError as exc:
                outcomes.append(exc)

    handler = CloseHandler()
    logger.addHandler(handler)
    try:
        Closer.client = appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, logger=logger,
                                        api_timeout_ms=FAST_TIMEOUT_MS)
        with pytest.raises(appnorth.NetworkError):
            Closer.client.list_boards()
        assert outcomes and "inside" in str(outcomes[0])
        assert not Closer.client.closed
        Closer.client.close()
    finally:
        logger.removeHandler(handler)


def test_a_collected_handle_is_freed_on_the_collecting_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit close() on the main thread frees on a worker (Ctrl-C
    cannot cut it there); garbage collection may run while this thread holds
    a lock such a worker would need, so a collected handle is freed here."""
    workers: List[Any] = []

    def recording(call: Any, cancel: Any) -> Any:
        workers.append(call)
        return call()

    monkeypatch.setattr(_handle, "run_interruptible", recording)
    assert threading.current_thread() is threading.main_thread()
    clock = appnorth.ManualClock(0)
    alive = weakref.ref(clock)
    del clock
    gc.collect()
    assert alive() is None and workers == []
    explicit = appnorth.ManualClock(0)
    explicit.close()
    assert explicit.closed and len(workers) == 1
