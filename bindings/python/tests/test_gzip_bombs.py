"""Issue 31, hostile-server row 1 against the real dev server: one server
sends gzip bombs (a few KB on the wire that inflate past the 16 MiB
response limit) to 8 reads of one client while another client starts
non-blocking reads to a healthy route. The transfer thread inflates the
bombs; the other client's start calls no longer wait for it (they took
425-590 ms each when the engine inflated under the lock its start calls
take), and its reads complete."""

from __future__ import annotations

import base64
import gzip
import os
import statistics
import threading
import time
from typing import Any, List, Optional

import appnorth
from appnorth import _ops, errors
from appnorth._lib import C
from appnorth_test_support import APP, Admin

BOMBS = 8
ROUNDS = int(os.environ.get("APPNORTH_TEST_BOMB_ROUNDS", "12"))
INFLATED = 64 << 20  # past the 16 MiB response limit: curl inflates until the limit stops it


def bomb_response() -> str:
    body = gzip.compress(b"\0" * INFLATED, 9)
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    return base64.b64encode(head + body).decode("ascii")


class Ends:
    """Completions counted under a condition (the test waits on them, not on time)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.results: List[Optional[errors.AppNorthError]] = []

    def done(self, op: int, result: Optional[str], error: Optional[errors.AppNorthError]) -> None:
        with self.cond:
            self.results.append(error)
            self.cond.notify_all()

    def wait(self, count: int, timeout: float = 60.0) -> List[Optional[errors.AppNorthError]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.results) >= count, timeout), \
                f"{len(self.results)} of {count} completions"
            return list(self.results)


def start(client: appnorth.Client, func: Any, *args: Any, done: Any) -> float:
    """Starts one non-blocking call; returns how long the start call took (s)."""
    with client._use() as handle:
        began = time.perf_counter()
        _ops.start(func, handle, *args, done=done)
        return time.perf_counter() - began


def test_starts_on_another_client_do_not_wait_for_gzip_bombs(server_url: str, admin: Admin) -> None:
    bomb = bomb_response()
    assert len(bomb) < 200_000, "a bomb is small on the wire"
    admin.add_fault(path_prefix=f"/v1/apps/{APP}/ideas/bomb/comments", method="GET", raw_response=bomb,
                    count=BOMBS * ROUNDS)
    admin.add_board(APP, "Healthy")
    with appnorth.Client(server_url, APP) as bombed, appnorth.Client(server_url, APP) as healthy:
        bombs, reads = Ends(), Ends()
        start_seconds: List[float] = []
        stop = threading.Event()

        def healthy_reads() -> None:
            # One read at a time, the next started as soon as the last
            # completed (on the transfer thread, between its turns).
            while not stop.is_set():
                started = len(start_seconds)
                start_seconds.append(start(healthy, C.appnorth_client_list_boards_async, done=reads.done))
                reads.wait(started + 1)

        reader = threading.Thread(target=healthy_reads)
        reader.start()
        try:
            for round_ in range(ROUNDS):
                for _ in range(BOMBS):
                    start(bombed, C.appnorth_client_list_comments_async, b"bomb", done=bombs.done)
                ended = bombs.wait(BOMBS * (round_ + 1))
        finally:
            stop.set()
            reader.join()
        assert all(isinstance(e, errors.TooLargeError) for e in ended), \
            f"every bomb was inflated up to the limit: {set(map(type, ended))}"
        results = reads.wait(len(start_seconds))
        assert len(results) >= ROUNDS and all(e is None for e in results), "every healthy read completed"
    ms = sorted(s * 1000 for s in start_seconds)
    p90 = ms[len(ms) * 9 // 10]
    print(f"{len(ms)} start calls beside {BOMBS} gzip bombs x {ROUNDS}: median {statistics.median(ms):.2f} ms, "
          f"p90 {p90:.2f} ms, max {ms[-1]:.2f} ms")
    # Generous (a loaded 2-core machine; the stall was 425-590 ms per call):
    # start calls do not wait for the bombs' inflating.
    assert p90 < 50, ms
