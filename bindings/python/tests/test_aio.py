"""appnorth.aio: the await forms of the network calls, with plain asyncio
(asyncio.run inside each test).

Each await starts the library's non-blocking call; no executor thread is
used and no thread is made per call (checked by counting threads). Results
equal the blocking calls'; cancelling a task cancels its operation alone;
Ctrl-C under asyncio.run cancels the one in flight; config changes and log
lines reach the loop's thread. Held requests use the dev server's delay
fault (20 s); bounds on a cancel are 5 s, far under it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import appnorth
from appnorth import _ops, aio
from appnorth_test_support import APP, Admin

# A hold: the server keeps the request until the next test's reset drops
# it, so a cancelled operation that ends did not wait for it.
HOLD_MS = 600_000
WATCHDOG_S = 30.0  # catches a hang only


def _patient(server_url: str, **kwargs: Any) -> appnorth.Client:
    return appnorth.Client(server_url, APP, api_timeout_ms=60000, resource_timeout_ms=60000, **kwargs)


def _wait_taken(admin: Admin, prefix: str, timeout: float = WATCHDOG_S) -> None:
    deadline = time.monotonic() + timeout
    while any(f.get("path_prefix") == prefix for f in admin.faults()):
        assert time.monotonic() < deadline, f"the server never took the request to {prefix}"
        time.sleep(0.02)


async def _wait_taken_async(admin: Admin, prefix: str) -> None:
    # The admin calls block briefly (loopback); run them between awaits.
    deadline = time.monotonic() + WATCHDOG_S
    while any(f.get("path_prefix") == prefix for f in admin.faults()):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


def test_reads_equal_the_blocking_calls(client: appnorth.Client, admin: Admin) -> None:
    board = admin.add_board(APP, "Async")
    admin.add_idea(APP, board["id"], "Dark mode")

    async def main() -> List[Any]:
        return list(await asyncio.gather(aio.list_boards(client), aio.list_ideas(client, limit=5),
                                         aio.list_chat_messages(client)))

    boards, ideas, chat = asyncio.run(main())
    assert boards == client.list_boards()
    assert ideas == client.list_ideas(limit=5)
    assert chat == {"messages": []}


def test_writes_and_their_errors(client: appnorth.Client, admin: Admin) -> None:
    board = admin.add_board(APP, "Async writes")

    async def main() -> None:
        idea = (await aio.submit_idea(client, board["id"], "From asyncio", "body"))["idea"]
        comment = await aio.submit_comment(client, idea["id"], "a comment")
        assert comment["comment"]["body"] == "a comment"
        assert "comments" in await aio.list_comments(client, idea["id"])
        await aio.vote(client, idea["id"])
        with pytest.raises(appnorth.ConflictError):
            await aio.vote(client, idea["id"])
        assert "message" in await aio.send_chat_message(client, "hello")
        assert "feedback" in await aio.submit_feedback(client, "it works", diagnostics={"os": "linux"})
        # Bad input fails at the start, before anything is sent.
        with pytest.raises(appnorth.ValidationError):
            await aio.submit_idea(client, board["id"], "   ")
        with pytest.raises(appnorth.InvalidArgumentError):
            await aio.list_ideas(client, limit=500)

    asyncio.run(main())
    titles = [i["title"] for i in client.list_ideas()["ideas"]]
    assert titles.count("From asyncio") == 1
    assert _ops.pending() == 0


def test_cancelling_one_task_cancels_its_operation_alone(server_url: str, admin: Admin) -> None:
    prefix = f"/v1/apps/{APP}/ideas/held/comments"
    admin.add_fault(delay_ms=HOLD_MS, count=1, path_prefix=prefix)
    with _patient(server_url) as client:
        async def main() -> float:
            held = asyncio.ensure_future(aio.list_comments(client, "held"))
            others = [asyncio.ensure_future(aio.list_boards(client)) for _ in range(10)]
            results = await asyncio.gather(*others)
            assert all(r == {"boards": []} for r in results)
            assert not held.done()
            await _wait_taken_async(admin, prefix)
            start = time.monotonic()
            held.cancel()
            with pytest.raises(asyncio.CancelledError):
                await held
            # The next read on the same client goes through at once.
            assert await aio.list_boards(client) == {"boards": []}
            return time.monotonic() - start

        took = asyncio.run(main())
    print(f"cancelled task's operation ended, next read done, {took * 1000:.0f} ms after cancel")
    assert admin.held() == 1, "it ended while the server still held its request"
    deadline = time.monotonic() + WATCHDOG_S
    while _ops.pending():  # the cancelled op's completion arrives too
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_wait_for_timeout_cancels_the_operation(server_url: str, admin: Admin) -> None:
    prefix = f"/v1/apps/{APP}/boards"
    admin.add_fault(delay_ms=HOLD_MS, count=1, path_prefix=prefix)
    with _patient(server_url) as client:
        async def main() -> None:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(aio.list_boards(client), 0.5)

        asyncio.run(main())
    assert _ops.pending() == 0  # close() waited for its completion
    assert admin.held() == 1, "the timeout ended it while the server still held its request"


def test_many_in_flight_use_no_thread_per_call(client: appnorth.Client) -> None:
    async def main() -> int:
        before = threading.active_count()
        tasks = [asyncio.ensure_future(aio.list_boards(client)) for _ in range(64)]
        await asyncio.gather(*tasks)
        assert threading.active_count() == before  # no Python (executor) thread
        return len(tasks)

    assert asyncio.run(main()) == 64
    with open("/proc/self/status") as status:
        threads = int(next(line for line in status if line.startswith("Threads:")).split()[1])
    # The interpreter's own threads plus the library's 3 at most.
    assert threads <= threading.active_count() + 3 + 2


def test_queue_config_and_events(server_url: str, admin: Admin, tmp_path: Path) -> None:
    board = admin.add_board(APP, "Queue")
    admin.publish_config(APP, {"greeting": "hello"})
    with appnorth.Client(server_url, APP) as client, \
            appnorth.OfflineQueue(appnorth.Storage.memory()) as queue, \
            appnorth.Config(client, tmp_path / "config") as config, \
            appnorth.Events(client, tmp_path / "events", flush_interval_ms=600_000) as events:
        async def main() -> None:
            admin.outage()
            assert await aio.queue_submit_idea(queue, client, board["id"], "kept") is False
            admin.clear_faults()
            assert await aio.queue_flush(queue, client) == 1
            with pytest.raises(appnorth.NotFoundError):
                await aio.queue_submit_comment(queue, client, "missing", "x")
            await aio.refresh_config(config)
            assert config.get_string("greeting", "none") == "hello"
            events.track("async_event")
            assert await aio.flush_events(events, 10000) == 1

        asyncio.run(main())


def test_config_changes_reach_the_loop_thread(server_url: str, admin: Admin, tmp_path: Path) -> None:
    admin.publish_config(APP, {"n": 1})
    with appnorth.Client(server_url, APP) as client, appnorth.Config(client, tmp_path) as config:
        async def main() -> Dict[str, Any]:
            loop_thread = threading.get_ident()
            seen: List[int] = []
            aio.add_config_listener(config, lambda *args: seen.append(threading.get_ident()))
            async with aio.ConfigChanges(config) as changes:
                await aio.refresh_config(config)
                change = await asyncio.wait_for(changes.__anext__(), 10)
                await asyncio.sleep(0)
            assert seen and all(t == loop_thread for t in seen)
            return dict(change.config)

        assert asyncio.run(main())["n"] == 1


def test_log_lines_reach_logging_on_the_loop_thread(server_url: str, admin: Admin,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    admin.add_fault(status=503, count=1, path_prefix=f"/v1/apps/{APP}/boards")
    threads: List[int] = []

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            threads.append(threading.get_ident())

    target = logging.getLogger("appnorth.aio-test")
    target.setLevel(logging.WARNING)
    recorder = Recorder()
    target.addHandler(recorder)
    try:
        async def main() -> int:
            with appnorth.Client(server_url, APP, logger=aio.loop_logger(target)) as client:
                with pytest.raises(appnorth.ServerError):
                    await aio.list_boards(client)
                await asyncio.sleep(0.05)
                for _ in range(100):
                    if threads:
                        break
                    await asyncio.sleep(0.01)
            return threading.get_ident()

        loop_thread = asyncio.run(main())
    finally:
        target.removeHandler(recorder)
    assert threads and all(t == loop_thread for t in threads)


CHILD = textwrap.dedent("""
    import asyncio, sys, time
    import appnorth
    from appnorth import _ops, aio
    url, app = sys.argv[1], sys.argv[2]
    with appnorth.Client(url, app, api_timeout_ms=60000) as client:
        async def main():
            print("calling", flush=True)
            await aio.list_boards(client)
        try:
            asyncio.run(main())
            print("returned", flush=True)
        except KeyboardInterrupt:
            print("interrupted", time.monotonic(), flush=True)
        deadline = time.monotonic() + 5
        while _ops.pending() and time.monotonic() < deadline:
            time.sleep(0.01)
        print("pending", _ops.pending(), flush=True)
        print("boards", len(client.list_boards()["boards"]), flush=True)
""")


def test_ctrl_c_cancels_the_operation(server_url: str, admin: Admin) -> None:
    prefix = f"/v1/apps/{APP}/boards"
    admin.add_fault(delay_ms=HOLD_MS, count=1, path_prefix=prefix)
    child = subprocess.Popen([sys.executable, "-c", CHILD, server_url, APP], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "calling"
        _wait_taken(admin, prefix)
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, _ = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    lines = out.split("\n")
    interrupted = [line for line in lines if line.startswith("interrupted")]
    assert interrupted, out
    print(f"KeyboardInterrupt {(float(interrupted[0].split()[1]) - sent) * 1000:.0f} ms after SIGINT")
    assert admin.held() == 1, "interrupted while the server still held the request"
    assert "pending 0" in lines, out
    assert "boards 0" in lines, out


def test_dispatch_mode_runs_every_callback_on_the_loop_thread(server_url: str, admin: Admin,
                                                              tmp_path: Path) -> None:
    """Dispatch mode on the loop (add_reader on the dispatch descriptor):
    completions, log lines and config listeners all run on the loop's
    thread, and no other Python thread is started."""
    admin.publish_config(APP, {"n": 2})
    admin.add_fault(status=503, count=1, path_prefix=f"/v1/apps/{APP}/ideas")
    threads: Dict[str, List[int]] = {"completion": [], "log": [], "listener": []}

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            threads["log"].append(threading.get_ident())

    target = logging.getLogger("appnorth.aio-dispatch-test")
    target.setLevel(logging.WARNING)
    target.propagate = False
    target.addHandler(Recorder())

    async def main() -> int:
        loop_thread = threading.get_ident()
        python_threads = threading.active_count()
        with appnorth.Client(server_url, APP, dispatch_mode=True, logger=target) as client, \
                appnorth.Config(client, tmp_path) as config:
            config.add_listener(lambda *args: threads["listener"].append(threading.get_ident()))
            aio.attach(client)
            seen = asyncio.get_running_loop().create_future()

            def done(op: int, result: Any, error: Any) -> None:
                threads["completion"].append(threading.get_ident())
                seen.set_result(result)

            with client._use() as handle:
                _ops.start(appnorth._lib.C.appnorth_client_list_boards_async, handle, done=done)
            assert json.loads(await asyncio.wait_for(seen, 10)) == {"boards": []}
            boards = await asyncio.gather(*(aio.list_boards(client) for _ in range(20)))
            assert all(b == {"boards": []} for b in boards)
            with pytest.raises(appnorth.ServerError):  # logs a warning
                await aio.list_ideas(client)
            await aio.refresh_config(config)
            for _ in range(500):
                if threads["listener"] and threads["log"]:
                    break
                await asyncio.sleep(0.01)
            assert config.get_int("n", 0) == 2
            assert threading.active_count() == python_threads
        return loop_thread

    loop_thread = asyncio.run(main())
    for kind, seen_threads in threads.items():
        assert seen_threads, f"no {kind} ran"
        assert all(t == loop_thread for t in seen_threads), kind
