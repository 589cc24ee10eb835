"""The offline queue, storages and the read cache, through the binding,
against the real dev server. Outages are injected as dropped connections."""

from __future__ import annotations

import gc
import logging
import os
import stat
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin


@pytest.fixture
def board(admin: Admin) -> Dict[str, Any]:
    return admin.add_board(APP, "Features")


@pytest.fixture
def queue() -> Iterator[appnorth.OfflineQueue]:
    with appnorth.Storage.memory() as storage, appnorth.OfflineQueue(storage) as q:
        yield q


def _user(server_url: str, admin: Admin, email: str) -> appnorth.Client:
    admin.add_user(APP, email, "tok-" + email.split("@")[0])
    return appnorth.Client(server_url, APP, email=email, token="tok-" + email.split("@")[0],
                           api_timeout_ms=FAST_TIMEOUT_MS)


# -- the queue ------------------------------------------------------------------

def test_online_submit_is_sent_at_once(queue: appnorth.OfflineQueue, client: appnorth.Client,
                                       admin: Admin, board: Dict[str, Any]) -> None:
    assert queue.submit_idea(client, board["id"], "Online") is True
    assert queue.pending_count() == 0
    assert [i["title"] for i in admin.state(APP)["ideas"]] == ["Online"]


def test_offline_submit_is_kept_and_flushed_with_its_key(queue: appnorth.OfflineQueue, client: appnorth.Client,
                                                         admin: Admin, board: Dict[str, Any]) -> None:
    admin.outage()
    assert queue.submit_idea(client, board["id"], "Offline", idempotency_key="q-key-1") is False
    assert len(queue) == 1
    (entry,) = queue.entries()
    assert (entry["kind"], entry["scope"], entry["idempotency_key"]) == ("idea", client.scope, "q-key-1")
    assert admin.state(APP)["ideas"] == []

    admin.clear_faults()
    assert queue.flush(client) == 1
    assert queue.pending_count() == 0
    assert [i["title"] for i in admin.state(APP)["ideas"]] == ["Offline"]
    sent = [r for r in admin.requests(expect=1) if r["status"] == 201]
    assert [r["headers"]["Idempotency-Key"] for r in sent] == ["q-key-1"]


def test_flush_during_outage_keeps_entries(queue: appnorth.OfflineQueue, client: appnorth.Client,
                                           admin: Admin, board: Dict[str, Any]) -> None:
    admin.outage()
    queue.submit_comment(client, "i_1", "kept")
    assert queue.flush(client) == 0
    assert queue.pending_count() == 1


def test_flush_replays_only_the_flushing_clients_scope(server_url: str, admin: Admin,
                                                       queue: appnorth.OfflineQueue, board: Dict[str, Any]) -> None:
    with _user(server_url, admin, "ada@example.com") as ada, _user(server_url, admin, "bob@example.com") as bob:
        admin.outage()
        assert queue.submit_idea(ada, board["id"], "Ada's idea") is False
        admin.clear_faults()
        assert queue.flush(bob) == 0
        assert queue.pending_count() == 1
        assert queue.flush(ada) == 1
    assert [(i["title"], i["author"]) for i in admin.state(APP)["ideas"]] == [("Ada's idea", "ada@example.com")]


def test_non_network_failure_is_raised_and_not_kept(queue: appnorth.OfflineQueue, client: appnorth.Client) -> None:
    with pytest.raises(appnorth.NotFoundError):
        queue.submit_idea(client, "b_404404", "Nowhere")
    with pytest.raises(appnorth.ValidationError):
        queue.submit_idea(client, "b_1", "   ")
    assert queue.pending_count() == 0


def test_full_queue_refuses_what_it_would_have_to_keep(client: appnorth.Client, admin: Admin,
                                                       board: Dict[str, Any]) -> None:
    with appnorth.Storage.memory() as storage, appnorth.OfflineQueue(storage, max_entries=1) as small:
        admin.outage()
        assert small.submit_idea(client, board["id"], "one") is False
        with pytest.raises(appnorth.QueueFullError):
            small.submit_idea(client, board["id"], "two")
        assert small.pending_count() == 1


def test_feedback_is_queued_as_a_copy(queue: appnorth.OfflineQueue, client: appnorth.Client, admin: Admin) -> None:
    admin.outage()
    with appnorth.Feedback("Offline report", screenshots=[(b"\x89PNG", "image/png")]) as feedback:
        assert queue.submit_feedback(client, feedback) is False
    admin.clear_faults()
    assert queue.flush(client) == 1
    (stored,) = admin.state(APP)["feedback"]
    assert (stored["text"], stored["screenshot_count"]) == ("Offline report", 1)


def test_discard_by_client_scope_and_all(server_url: str, admin: Admin, queue: appnorth.OfflineQueue,
                                         client: appnorth.Client, board: Dict[str, Any]) -> None:
    with _user(server_url, admin, "ada@example.com") as ada:
        admin.outage()
        queue.submit_idea(client, board["id"], "anon")
        queue.submit_idea(ada, board["id"], "ada 1")
        queue.submit_idea(ada, board["id"], "ada 2")
        assert queue.discard(ada) == 2
        assert [e["scope"] for e in queue.entries()] == [client.scope]
        assert queue.discard() == 1
        assert len(queue) == 0


def test_poison_entry_is_named_listed_and_discarded_alone(queue: appnorth.OfflineQueue, client: appnorth.Client,
                                                          admin: Admin, board: Dict[str, Any]) -> None:
    """Issue 10: a comment on an idea deleted since it was queued fails
    NOT_FOUND on every flush; the error names it, entries() shows its
    attempts and last error, and discard_entry() removes it alone."""
    doomed = admin.add_idea(APP, board["id"], "Soon deleted")
    kept = admin.add_idea(APP, board["id"], "Kept")
    admin.outage()
    assert queue.submit_comment(client, doomed["id"], "poison") is False
    assert queue.submit_comment(client, kept["id"], "valid 1") is False
    assert queue.submit_comment(client, kept["id"], "valid 2") is False
    admin.clear_faults()
    admin.delete_idea(APP, doomed["id"])
    poison = queue.entries()[0]
    assert (poison["attempts"], poison["kind"], poison["scope"]) == (1, "comment", client.scope)
    assert isinstance(poison["created_ms"], int) and poison["last_error"]

    for attempt in (2, 3):
        with pytest.raises(appnorth.NotFoundError) as raised:
            queue.flush(client)
        assert raised.value.entry_id == poison["id"] and raised.value.sent == 0
        listed = queue.entries()
        assert len(listed) == 3, "the seed's rule: the failing entry stays pending, and so do the others"
        assert listed[0]["attempts"] == attempt and "not found" in listed[0]["last_error"]
        assert listed[1]["attempts"] == 1
    assert admin.state(APP)["comments"] == []

    assert queue.discard_entry(poison["id"]) is True
    assert queue.discard_entry(poison["id"]) is False, "already gone"
    assert queue.flush(client) == 2
    assert [c["body"] for c in admin.state(APP)["comments"]] == ["valid 1", "valid 2"]


def test_discard_entry_bad_arguments(queue: appnorth.OfflineQueue) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        queue.discard_entry(None)
    with pytest.raises(appnorth.InvalidUTF8Error):
        queue.discard_entry(b"\xff")
    assert queue.discard_entry("no-such-entry") is False


def test_sqlite_queue_survives_a_restart(tmp_path: Path, client: appnorth.Client, admin: Admin,
                                         board: Dict[str, Any]) -> None:
    data_dir = tmp_path / "appdata"
    admin.outage()
    with appnorth.Storage.sqlite(data_dir, "queue") as storage, appnorth.OfflineQueue(storage) as q:
        assert q.submit_idea(client, board["id"], "Survivor") is False
    assert stat.S_IMODE(os.stat(data_dir).st_mode) == 0o700
    admin.clear_faults()
    with appnorth.Storage.sqlite(str(data_dir), "queue") as storage, appnorth.OfflineQueue(storage) as q:
        assert q.pending_count() == 1
        assert q.flush(client) == 1
    assert [i["title"] for i in admin.state(APP)["ideas"]] == ["Survivor"]


def test_queue_and_cache_need_separate_storages() -> None:
    with appnorth.Storage.memory() as storage, appnorth.OfflineQueue(storage):
        with pytest.raises(appnorth.WrongStateError, match="own storage"):
            appnorth.ReadCache(storage)


def test_bad_storage_arguments(tmp_path: Path) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Storage.sqlite(tmp_path, "no spaces allowed")
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Storage.sqlite(None, "queue")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        appnorth.Storage()
    with pytest.raises(TypeError):
        appnorth.OfflineQueue("not a storage")  # type: ignore[arg-type]


# -- host storage callbacks ----------------------------------------------------

class DictStorage:
    def __init__(self) -> None:
        self.blob: Optional[bytes] = None
        self.saves = 0
        self.fail_save: Optional[BaseException] = None

    def load(self) -> Optional[bytes]:
        return self.blob

    def save(self, blob: Optional[bytes]) -> None:
        if self.fail_save is not None:
            raise self.fail_save
        self.saves += 1
        self.blob = blob


def test_host_storage_receives_the_queue_blob(client: appnorth.Client, admin: Admin,
                                              board: Dict[str, Any]) -> None:
    host = DictStorage()
    with appnorth.Storage.callbacks(host.load, host.save) as storage, appnorth.OfflineQueue(storage) as q:
        admin.outage()
        q.submit_idea(client, board["id"], "Kept in Python")
    assert host.saves >= 1 and host.blob and b"offline-queue" in host.blob
    # A new queue on the same host data sees the entry.
    with appnorth.Storage.callbacks(host.load, host.save) as storage, appnorth.OfflineQueue(storage) as q:
        assert q.pending_count() == 1
        q.discard()
    assert b"Kept in Python" not in (host.blob or b"")


def test_host_storage_exception_is_the_cause_of_a_storage_error(client: appnorth.Client, admin: Admin,
                                                                board: Dict[str, Any]) -> None:
    host = DictStorage()
    with appnorth.Storage.callbacks(host.load, host.save) as storage, appnorth.OfflineQueue(storage) as q:
        admin.outage()
        host.fail_save = OSError("disk full")
        with pytest.raises(appnorth.StorageError) as info:
            q.submit_idea(client, board["id"], "Nowhere to keep it")
        assert isinstance(info.value.__cause__, OSError)
        assert "disk full" in str(info.value.__cause__)


def test_host_storage_load_failure_refuses_the_queue() -> None:
    def broken_load() -> bytes:
        raise ValueError("cannot read")

    with appnorth.Storage.callbacks(broken_load, lambda blob: None) as storage:
        with pytest.raises(appnorth.StorageError) as info:
            appnorth.OfflineQueue(storage)
    assert isinstance(info.value.__cause__, ValueError)


def test_host_storage_erase_calls_save_with_none() -> None:
    host = DictStorage()
    host.blob = b"something"
    with appnorth.Storage.callbacks(host.load, host.save) as storage:
        storage.erase()
    assert host.blob is None


def test_host_callbacks_are_released_after_the_last_user(client: appnorth.Client) -> None:
    before = appnorth._lib.pending_pins()
    host = DictStorage()
    storage = appnorth.Storage.callbacks(host.load, host.save)
    q = appnorth.OfflineQueue(storage)
    storage.close()  # the queue keeps its own reference: callbacks stay alive
    assert appnorth._lib.pending_pins() == before + 1
    assert q.pending_count() == 0
    q.close()
    gc.collect()
    assert appnorth._lib.pending_pins() == before


# -- the read cache -------------------------------------------------------------

@pytest.fixture
def clock() -> Iterator[appnorth.ManualClock]:
    with appnorth.ManualClock(1_700_000_000_000) as c:
        yield c


@pytest.fixture
def cache(clock: appnorth.ManualClock) -> Iterator[appnorth.ReadCache]:
    with appnorth.Storage.memory() as storage, appnorth.ReadCache(storage, ttl_seconds=60, clock=clock) as c:
        yield c


def test_cache_store_and_read(cache: appnorth.ReadCache, client: appnorth.Client) -> None:
    assert cache.boards(client) is None
    cache.store_boards(client, {"boards": [{"id": "b_1", "name": "X"}]})
    assert cache.boards(client.scope) == [{"id": "b_1", "name": "X"}]
    assert cache.boards_json(client) is not None


def test_cache_entries_expire_after_the_ttl(cache: appnorth.ReadCache, clock: appnorth.ManualClock,
                                            client: appnorth.Client) -> None:
    cache.store_boards(client, [{"id": "b_1"}])
    clock.advance(59_000)
    assert cache.boards(client) == [{"id": "b_1"}]
    clock.advance(2_000)
    assert cache.boards(client) is None


def test_cache_keys_include_scope_and_query(cache: appnorth.ReadCache, client: appnorth.Client) -> None:
    cache.store_ideas(client, [{"id": "i_1"}], {"status": "open"})
    assert cache.ideas(client, {"status": "open"}) == [{"id": "i_1"}]
    assert cache.ideas(client, '{"status": "done"}') is None
    assert cache.ideas(client) is None
    assert cache.ideas("http://other.example|pytest-app|anonymous", {"status": "open"}) is None
    cache.clear(client)
    assert cache.ideas(client, {"status": "open"}) is None


def test_cache_refuses_cursor_queries(cache: appnorth.ReadCache, client: appnorth.Client) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match="first pages"):
        cache.store_ideas(client, [], {"cursor": "abc"})


def test_read_boards_delivers_cache_then_network(cache: appnorth.ReadCache, client: appnorth.Client,
                                                 admin: Admin, board: Dict[str, Any]) -> None:
    assert cache.read_boards(client) == [(appnorth.SOURCE_NETWORK, [board])]
    seen: List[Tuple[int, Any]] = []
    deliveries = cache.read_boards(client, lambda source, data: seen.append((source, data)))
    assert deliveries == seen == [(appnorth.SOURCE_CACHE, [board]), (appnorth.SOURCE_NETWORK, [board])]


def test_read_failure_after_cached_delivery(cache: appnorth.ReadCache, client: appnorth.Client,
                                            admin: Admin, board: Dict[str, Any]) -> None:
    cache.read_boards(client)
    admin.add_fault(status=503)
    seen: List[Tuple[int, Any]] = []
    with pytest.raises(appnorth.ServerError):
        cache.read_boards(client, lambda source, data: seen.append((source, data)))
    assert seen == [(appnorth.SOURCE_CACHE, [board])]


def test_read_ideas_with_a_query(cache: appnorth.ReadCache, client: appnorth.Client, admin: Admin,
                                 board: Dict[str, Any]) -> None:
    admin.add_idea(APP, board["id"], "Open one", status="open")
    admin.add_idea(APP, board["id"], "Done one", status="done")
    ((source, ideas),) = cache.read_ideas(client, {"status": "done"})
    assert source == appnorth.SOURCE_NETWORK and [i["title"] for i in ideas] == ["Done one"]
    assert [i["title"] for i in cache.ideas(client, {"status": "done"}) or []] == ["Done one"]


def test_read_callback_exception_is_raised_after_the_call(cache: appnorth.ReadCache, client: appnorth.Client,
                                                          board: Dict[str, Any]) -> None:
    def explode(source: int, data: Any) -> None:
        raise KeyError("callback bug")

    with pytest.raises(KeyError, match="callback bug"):
        cache.read_boards(client, explode)
    # The call itself completed: the boards were cached.
    assert cache.boards(client) == [board]


def test_cache_refuses_closing_its_client_inside_a_read_callback(cache: appnorth.ReadCache,
                                                                 client: appnorth.Client) -> None:
    with pytest.raises(appnorth.WrongStateError, match="inside"):
        cache.read_boards(client, lambda source, data: client.close())
    assert not client.closed


def test_cache_default_ttl_and_system_clock(client: appnorth.Client) -> None:
    with appnorth.Storage.memory() as storage, appnorth.ReadCache(storage) as cache:
        cache.store_boards(client, [])
        assert cache.boards(client) == []


def test_objects_after_close_raise_wrong_state(client: appnorth.Client) -> None:
    storage = appnorth.Storage.memory()
    q = appnorth.OfflineQueue(storage)
    clock = appnorth.ManualClock(0)
    for obj in (storage, q, clock):
        obj.close()
    with pytest.raises(appnorth.WrongStateError):
        q.pending_count()
    with pytest.raises(appnorth.WrongStateError):
        clock.advance(1)
    with pytest.raises(appnorth.WrongStateError):
        appnorth.OfflineQueue(storage)
    client.close()
    with appnorth.Storage.memory() as s2, appnorth.OfflineQueue(s2) as q2:
        with pytest.raises(appnorth.WrongStateError, match="client is closed"):
            q2.flush(client)


QUEUE_BLOB = (
    b'{"format":"appnorth.offline-queue","version":1,"entries":['
    b'{"id":"good","scope":"s","kind":"feedback","path":"/feedback","body":"{}","idempotency_key":"k1","created_ms":1},'
    b'{"id":"torn","scope":"s","kind":"feedback","path":"/feedback","body":"private words","idempotency_key":"k2",'
    b'"created_ms":1}]}'
)


def test_damaged_stored_entries_are_logged_through_the_storage_logger(caplog: pytest.LogCaptureFixture) -> None:
    stored = {"blob": QUEUE_BLOB}
    storage = appnorth.Storage.callbacks(lambda: stored["blob"], lambda blob: stored.update(blob=blob))
    logger = logging.getLogger("appnorth.test.damage")
    logger.setLevel(logging.DEBUG)
    storage.set_logger(logger)
    with caplog.at_level(logging.DEBUG, logger="appnorth.test.damage"):
        queue = appnorth.OfflineQueue(storage)
        storage.close()  # the queue keeps the storage and its logger
        assert queue.pending_count() == 1
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "appnorth.test.damage"]
    assert lines == [(logging.WARNING, "offline queue: dropped 1 damaged stored entry (id torn)")]
    assert "private" not in caplog.text
    queue.close()

    silent = appnorth.Storage.callbacks(lambda: b"{not json", lambda blob: None)
    silent.set_logger(logger)
    silent.set_logger(False)  # off again for what opens next
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="appnorth.test.damage"):
        appnorth.ReadCache(silent).close()
    assert [r for r in caplog.records if r.name == "appnorth.test.damage"] == []
    with pytest.raises(TypeError):
        silent.set_logger("loud")  # type: ignore[arg-type]
    silent.close()
