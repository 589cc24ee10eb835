"""The thin call path (Events.track and the config getters: no lock, no
context manager, a reused per-thread error struct) keeps every guarantee of
a handle: close() waits for a call in progress, calls after it are refused,
and close() racing calls from many threads loses and invents nothing."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import pytest

import appnorth
from appnorth import _lib
from appnorth_test_support import APP

THREADS = 4
ROUNDS = 5
DEADLINE_S = 30.0


def _offline_client(port: int, logger: Union[bool, logging.Logger] = False) -> appnorth.Client:
    return appnorth.Client(f"http://127.0.0.1:{port}", APP, logger=logger)


def _quiet_events(client: appnorth.Client, data_dir: Path, **options: int) -> appnorth.Events:
    return appnorth.Events(client, data_dir, flush_interval_ms=600_000, batch_threshold=10_000, retries=0,
                           close_timeout_ms=0, **options)


def test_close_waits_for_a_track_inside_the_library(closed_port: int, tmp_path: Path) -> None:
    # The second track() drops the first event (max_events=1) and logs a
    # warning on the calling thread, into this handler, which holds the call
    # inside the library until the test lets it go.
    inside, release = threading.Event(), threading.Event()

    class Holding(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "over its limits" in record.getMessage():
                inside.set()
                release.wait(DEADLINE_S)

    logger = logging.getLogger("appnorth.test_thin_calls")
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    handler = Holding()
    logger.addHandler(handler)
    try:
        client = _offline_client(closed_port, logger)
        events = _quiet_events(client, tmp_path, max_events=1)
        assert events.track("first") is True
        outcome: Dict[str, object] = {}
        closed = threading.Event()

        def track() -> None:
            try:
                outcome["queued"] = events.track("second")
            except BaseException as exc:  # noqa: BLE001
                outcome["error"] = exc

        def close() -> None:
            events.close()
            closed.set()

        tracker = threading.Thread(target=track)
        tracker.start()
        assert inside.wait(DEADLINE_S), "the track() call reached its log line"
        assert len(events._calls) == 1
        closer = threading.Thread(target=close)
        closer.start()
        # close() cannot return while the call is inside the library (a
        # broken wait could pass this on a slow machine, never fail it).
        assert not closed.wait(0.2)
        while not events.closed:
            time.sleep(0.001)
        with pytest.raises(appnorth.WrongStateError, match="events is closed"):
            events.track("third")
        release.set()
        tracker.join(DEADLINE_S)
        closer.join(DEADLINE_S)
        assert outcome == {"queued": True}
        assert closed.is_set()
        client.close()
    finally:
        release.set()
        logger.removeHandler(handler)

    # What the held call stored is on disk.
    with _offline_client(closed_port) as client, _quiet_events(client, tmp_path) as events:
        assert events.stats()["queued"] == 1


@pytest.mark.parametrize("round_", range(ROUNDS))
def test_close_racing_track_from_threads_loses_nothing(closed_port: int, tmp_path: Path, round_: int) -> None:
    client = _offline_client(closed_port)
    events = _quiet_events(client, tmp_path)
    progress = [0] * THREADS
    ends: List[Optional[BaseException]] = [None] * THREADS
    start = threading.Barrier(THREADS + 1)

    def worker(i: int) -> None:
        start.wait()
        try:
            while True:
                assert events.track("race", {"thread": i, "n": progress[i]}) is True
                progress[i] += 1
        except BaseException as exc:  # noqa: BLE001 - checked below
            ends[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    start.wait()
    # Close at a different moment each round.
    want = 20 + 40 * round_
    deadline = time.monotonic() + DEADLINE_S
    while sum(progress) < want and time.monotonic() < deadline:
        time.sleep(0.001)
    events.close()
    for t in threads:
        t.join(DEADLINE_S)
    assert not any(t.is_alive() for t in threads)
    for end in ends:
        assert isinstance(end, appnorth.WrongStateError), repr(end)
        assert "closed" in str(end)
    client.close()

    # Every track() that returned True is stored once; no other is.
    with _offline_client(closed_port) as client, _quiet_events(client, tmp_path) as events:
        assert events.stats()["queued"] == sum(progress)


def _race_reads_with_close(handle: Any, reads: Callable[[], List[Tuple[object, object]]], kind: str) -> None:
    """THREADS threads repeat ``reads`` (pairs of a value read and the value
    wanted) until ``handle`` is closed under them: no read returns a wrong
    value, and each thread ends with WrongStateError("<kind> is closed")."""
    counts = [0] * THREADS
    ends: List[Optional[BaseException]] = [None] * THREADS
    wrong: List[object] = []

    def worker(i: int) -> None:
        try:
            while True:
                wrong.extend(value for value, want in reads() if value != want)
                counts[i] += 1
        except BaseException as exc:  # noqa: BLE001 - checked below
            ends[i] = exc

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + DEADLINE_S
    while sum(counts) < 100 and time.monotonic() < deadline:
        time.sleep(0.001)
    handle.close()
    for t in threads:
        t.join(DEADLINE_S)
    assert wrong == []
    assert all(isinstance(end, appnorth.WrongStateError) and f"{kind} is closed" in str(end) for end in ends), ends


def test_close_racing_config_getters_from_threads(closed_port: int, tmp_path: Path) -> None:
    client = _offline_client(closed_port)
    config = appnorth.Config(client, tmp_path)
    _race_reads_with_close(config, lambda: [
        (config.get_int("missing", 7), 7), (config.get_bool("missing", True), True),
        (config.get_double("missing", 2.5), 2.5), (config.get_string("missing", "d"), "d"),
        (config.get_json_text("missing"), None)], "config")
    client.close()


def test_close_racing_cache_reads_from_threads(closed_port: int) -> None:
    client = _offline_client(closed_port)
    cache = appnorth.ReadCache(appnorth.Storage.memory())
    cache.store_boards(client, [{"id": "b1"}])
    cache.store_ideas(client, [{"id": "i1"}], {"board": "b1"})
    _race_reads_with_close(cache, lambda: [
        (cache.boards(client), [{"id": "b1"}]), (cache.ideas(client, {"board": "b1"}), [{"id": "i1"}]),
        (cache.ideas_json(client, {"board": "other"}), None), (cache.boards_json("another scope"), None)], "cache")
    client.close()


def test_thin_cache_reads_refuse_bad_input() -> None:
    with appnorth.ReadCache(appnorth.Storage.memory()) as cache:
        with pytest.raises(appnorth.InvalidArgumentError):
            cache.boards_json(None)  # type: ignore[arg-type]
        with pytest.raises(appnorth.InvalidJSONError):
            cache.ideas_json("scope", "{not json")
        with pytest.raises(appnorth.InvalidArgumentError):
            cache.ideas_json("scope", "scope\0")
        with pytest.raises(appnorth.InvalidUTF8Error):
            cache.boards_json(b"\xff")
        assert cache.ideas_json("scope", {"cursor": "c2"}) is None  # only first pages are cached
        assert cache.boards_json("scope") is None


def test_thin_call_errors_carry_the_library_message(closed_port: int, tmp_path: Path) -> None:
    with _offline_client(closed_port) as client, _quiet_events(client, tmp_path) as events:
        with pytest.raises(appnorth.InvalidJSONError) as info:
            events.track("bad", "{not json")
        assert info.value.code == appnorth.E_INVALID_JSON
        assert "properties" in str(info.value)
        with pytest.raises(appnorth.InvalidArgumentError, match="1 to 256"):
            events.track("")
        # The reused error struct does not leak one call's failure into the next.
        assert events.track("good", {"ok": True}) is True


def test_a_thin_call_inside_another_has_its_own_out_values(closed_port: int, tmp_path: Path) -> None:
    # The outer track() writes queued=1 into its scratch; from inside it (a
    # log callback on the same thread) get_bool() writes 0 into another.
    # Sharing one would make the outer call return False.
    nested: List[bool] = []

    class Nesting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "over its limits" in record.getMessage() and not nested:
                nested.append(config.get_bool("missing", False))

    logger = logging.getLogger("appnorth.test_thin_calls.nested")
    logger.setLevel(logging.WARNING)
    logger.propagate = False
    handler = Nesting()
    logger.addHandler(handler)
    try:
        with _offline_client(closed_port, logger) as client, \
                appnorth.Config(client, tmp_path / "config") as config, \
                _quiet_events(client, tmp_path / "events", max_events=1) as events:
            assert events.track("first") is True
            assert events.track("second") is True  # drops "first": the log line
            assert nested == [False]
            # Idle scratches are reused: a call allocates none.
            idle = list(_lib.SCRATCH)
            assert events.track("third") is True
            assert config.get_int("missing", 3) == 3
            assert sorted(map(id, _lib.SCRATCH)) == sorted(map(id, idle))
    finally:
        logger.removeHandler(handler)
