"""Objects made before fork() work in the child (appnorth._fork): each makes
a new native handle with its arguments on first use there, with its
listeners and logger; the parent's handle stays the parent's and keeps
working. Objects that cannot reopen say so. One test per object type."""

from __future__ import annotations

import logging
import os
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

import appnorth
from appnorth_test_support import APP, Admin, fork_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")


def in_child(tmp_path: Path, body: Callable[[], None]) -> None:
    """Run ``body`` in a forked child; fail with the child's traceback."""
    report = tmp_path / f"child-{os.getpid()}-{id(body)}.txt"

    def run() -> int:
        try:
            body()
            return 0
        except BaseException:  # noqa: BLE001 - reported to the parent
            report.write_text(traceback.format_exc())
            return 1

    pid = fork_child(run)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    assert code == 0, report.read_text() if report.exists() else f"child exit code {code}"


def _event_props(admin: Admin, name: str) -> List[Dict[str, Any]]:
    return [e["properties"] for e in admin.state(APP)["events"] if e["name"] == name]


def test_client_reopens_with_its_logger(server_url: str, admin: Admin, tmp_path: Path) -> None:
    records: List[logging.LogRecord] = []
    logger = logging.getLogger("appnorth.test.fork.client")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    admin.add_board(APP, "Features")
    client = appnorth.Client(server_url, APP, logger=logger, api_timeout_ms=5000)
    try:
        assert [b["name"] for b in client.list_boards()["boards"]] == ["Features"]

        def child() -> None:
            records.clear()
            assert not client.closed
            assert [b["name"] for b in client.list_boards()["boards"]] == ["Features"]
            mine = [r for r in records if r.process == os.getpid()]
            assert mine, "the library's log lines reach the logger in the child"
            client.close()
            assert client.closed

        in_child(tmp_path, child)
        # The parent's handle was neither freed nor disturbed by the child.
        assert [b["name"] for b in client.list_boards()["boards"]] == ["Features"]
    finally:
        client.close()
        logger.removeHandler(handler)


def test_events_reopen_on_the_same_data_dir_and_upload_once(server_url: str, admin: Admin,
                                                            tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    client = appnorth.Client(server_url, APP, api_timeout_ms=5000)
    events = appnorth.Events(client, data_dir)
    events.set_network_type(appnorth.NETWORK_WIFI)
    events.track("fork", {"who": "parent before"})  # queued, not uploaded before the fork

    def grandchild() -> None:
        events.track("fork", {"who": "grandchild"})  # then os._exit(), as a killed worker: no upload

    def child() -> None:
        anonymous_id = events.anonymous_id
        threads = [threading.Thread(target=events.track, args=("fork", {"who": f"child {i}"}))
                   for i in range(8)]  # the first use, from eight threads at once
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        in_child(tmp_path, grandchild)
        events.flush(20000)
        assert events.anonymous_id == anonymous_id  # the same identity file
        events.close()

    try:
        in_child(tmp_path, child)
        events.track("fork", {"who": "parent after"})
        events.flush(20000)
    finally:
        events.close()
    # What the grandchild left on disk goes with the next open of the directory.
    with appnorth.Events(client, data_dir) as later:
        later.flush(20000)
    client.close()
    whos = sorted(p["who"] for p in _event_props(admin, "fork"))
    assert whos == sorted(["parent before", "parent after", "grandchild"] + [f"child {i}" for i in range(8)])


def test_config_reopens_with_its_listeners_and_tokens(server_url: str, admin: Admin, tmp_path: Path) -> None:
    admin.publish_config(APP, {"theme": "light"})
    client = appnorth.Client(server_url, APP, api_timeout_ms=5000)
    config = appnorth.Config(client, tmp_path / "config")
    config.refresh()
    seen: List[Any] = []
    token = config.add_listener(lambda cfg, changed, tier: seen.append((os.getpid(), cfg.get("theme"))))
    also: List[Any] = []
    config.add_listener(lambda cfg, changed, tier: also.append(cfg.get("theme")))

    def child() -> None:
        assert config.get_string("theme") == "light"  # the cached tier, same data directory
        admin.publish_config(APP, {"theme": "dark"})
        config.refresh()
        assert seen == [(os.getpid(), "dark")] and also == ["dark"]
        config.remove_listener(token)  # the parent's token still names it
        admin.publish_config(APP, {"theme": "blue"})
        config.refresh()
        assert seen == [(os.getpid(), "dark")] and also == ["dark", "blue"]
        config.close()

    try:
        in_child(tmp_path, child)
        assert seen == [] and config.get_string("theme") == "light"
    finally:
        config.close()
        client.close()


def test_config_live_updates_come_back_in_the_child(server_url: str, admin: Admin, tmp_path: Path) -> None:
    admin.publish_config(APP, {"theme": "light"})
    client = appnorth.Client(server_url, APP, api_timeout_ms=5000)
    config = appnorth.Config(client, tmp_path / "config")
    config.refresh()
    config.start_live()

    def child() -> None:
        themes: List[Any] = []
        got = threading.Event()

        def listener(cfg: Dict[str, Any], changed: List[str], tier: Any) -> None:
            themes.append(cfg.get("theme"))
            got.set()

        config.add_listener(listener)  # the first use: reopens, and live updates start again
        admin.publish_config(APP, {"theme": "dark"})
        assert got.wait(30), "no live update reached the child (nothing called refresh())"
        assert themes[-1] == "dark"
        config.close()

    try:
        in_child(tmp_path, child)
    finally:
        config.close()
        client.close()


def test_offline_queue_reopens_on_its_storage(server_url: str, admin: Admin, tmp_path: Path) -> None:
    board = admin.add_board(APP, "Features")
    client = appnorth.Client(server_url, APP, api_timeout_ms=5000)
    storage = appnorth.Storage.sqlite(tmp_path / "q", "queue")
    queue = appnorth.OfflineQueue(storage, max_entries=5)
    storage.close()  # the queue keeps its own reference; the child makes one for the reopen

    def child() -> None:
        assert queue.submit_idea(client, board["id"], "From the child") is True
        assert queue.pending_count() == 0

    try:
        in_child(tmp_path, child)
        assert queue.submit_idea(client, board["id"], "From the parent") is True
    finally:
        queue.close()
        client.close()
    assert sorted(i["title"] for i in admin.state(APP)["ideas"]) == ["From the child", "From the parent"]


def test_storage_reopens_and_a_memory_one_reopens_empty(tmp_path: Path) -> None:
    with appnorth.Storage.sqlite(tmp_path / "s", "cache") as on_disk, \
            appnorth.Storage.memory() as memory:
        on_disk.set_logger(False)
        with appnorth.ReadCache(on_disk) as cache:
            cache.store_boards("scope", [{"id": "disk"}])
        mem_cache = appnorth.ReadCache(memory)
        mem_cache.store_boards("scope", [{"id": "memory"}])

        def child() -> None:
            with appnorth.ReadCache(on_disk) as again:  # the inherited storage, reopened
                assert again.boards("scope") == [{"id": "disk"}]
            assert mem_cache.boards("scope") is None  # what the parent's held stays the parent's
            mem_cache.store_boards("scope", [{"id": "child"}])
            assert mem_cache.boards("scope") == [{"id": "child"}]
            on_disk.erase()

        in_child(tmp_path, child)
        assert mem_cache.boards("scope") == [{"id": "memory"}]
        mem_cache.close()
        with appnorth.ReadCache(on_disk) as cache:
            assert cache.boards("scope") is None  # erased by the child


def test_read_cache_reopens(tmp_path: Path) -> None:
    storage = appnorth.Storage.sqlite(tmp_path / "c", "cache")
    cache = appnorth.ReadCache(storage, ttl_seconds=60)
    cache.store_boards("scope", [{"id": "b1"}])

    def child() -> None:
        assert cache.boards("scope") == [{"id": "b1"}]  # a thin read: reopens too
        cache.store_boards("scope", [{"id": "b2"}])

    try:
        in_child(tmp_path, child)
        assert cache.boards("scope") == [{"id": "b1"}]  # the parent's, as it loaded it
        cache.close()
        with appnorth.ReadCache(storage) as fresh:  # reads what the child stored
            assert fresh.boards("scope") == [{"id": "b2"}]
    finally:
        cache.close()
        storage.close()


def test_objects_that_cannot_reopen_say_why(tmp_path: Path, server_url: str) -> None:
    client = appnorth.Client(server_url, APP, api_timeout_ms=5000)
    blob: List[Any] = [None]
    host = appnorth.Storage.callbacks(lambda: blob[0], lambda b: blob.__setitem__(0, b))
    queue_on_host = appnorth.OfflineQueue(host)
    clock = appnorth.ManualClock(1_700_000_000_000)
    cache_on_clock = appnorth.ReadCache(appnorth.Storage.memory(), clock=clock)
    secure = appnorth.Events(client, tmp_path / "secure", secure_store={})
    feedback = appnorth.Feedback("text")
    gone = appnorth.Client(server_url, APP)
    gone.close()
    cases: List[Any] = [
        ("host functions", lambda: host.erase()),
        ("host functions", lambda: queue_on_host.pending_count()),  # its storage cannot
        ("manual clock", lambda: clock.advance(1)),
        ("manual clock", lambda: cache_on_clock.boards("scope")),  # its clock cannot
        ("secure_store", lambda: secure.track("x")),
        ("went into the parent's handle", lambda: feedback.add_screenshot(b"\x89PNG", "image/png")),
    ]

    def child() -> None:
        for why, use in cases:
            for _ in range(2):  # and again: nothing half-made
                with pytest.raises(appnorth.WrongStateError, match="cannot reopen") as info:
                    use()
                assert why in str(info.value), str(info.value)
        with pytest.raises(appnorth.WrongStateError, match="closed"):
            gone.list_boards()  # closed before the fork: stays closed
        client.list_boards()  # the client itself reopens

    try:
        in_child(tmp_path, child)
        host.erase()
        clock.advance(1)
        secure.track("parent")
    finally:
        for obj in (feedback, secure, cache_on_clock, clock, queue_on_host, host, client):
            obj.close()


def test_closing_an_unused_inherited_object_makes_nothing(server_url: str, tmp_path: Path) -> None:
    client = appnorth.Client(server_url, APP, api_timeout_ms=5000)
    events = appnorth.Events(client, tmp_path / "data")

    def child() -> None:
        assert not events.closed and not client.closed
        events.close()
        client.close()
        assert events.closed and client.closed
        assert len(appnorth._lib._live) == 0, "no handle was made"
        with pytest.raises(appnorth.WrongStateError, match="closed"):
            events.track("after close")

    try:
        in_child(tmp_path, child)
        assert events.track("parent")
    finally:
        events.close()
        client.close()
