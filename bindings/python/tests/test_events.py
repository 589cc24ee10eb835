"""Analytics events through the binding, against the real dev server: what
arrives, consent, identity in a Python secure store, failures, and the upload
thread's log lines reaching Python safely, including at interpreter exit."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import appnorth
from appnorth_test_support import APP, BINDING_DIR, FAST_TIMEOUT_MS, Admin

FAST_RETRY: Dict[str, Any] = {"retry_base_delay_ms": 10, "flush_interval_ms": 600_000, "batch_threshold": 1000}


@pytest.fixture
def events(client: appnorth.Client, tmp_path: Path) -> Iterator[appnorth.Events]:
    with appnorth.Events(client, tmp_path / "data", **FAST_RETRY) as ev:
        yield ev


def test_tracked_events_arrive_with_properties_as_written(events: appnorth.Events, admin: Admin) -> None:
    assert events.track("checkout", '{"price": 9.99, "currency": "EUR"}') is True
    assert events.track("opened", {"screen": "home"}) is True
    assert events.stats()["queued"] == 2
    events.flush(5000)
    stored = admin.state(APP)["events"]
    assert [(e["name"], e["properties_raw"]) for e in stored] == [
        ("checkout", '{"price": 9.99, "currency": "EUR"}'), ("opened", '{"screen": "home"}')]
    assert {e["anonymous_id"] for e in stored} == {events.anonymous_id}
    assert events.stats()["queued"] == 0


def test_nul_escapes_in_properties_arrive_as_written(events: appnorth.Events, admin: Admin) -> None:
    events.track("text", '{"s":"a\\u0000b"}')
    events.track("dict", {"s": "a\x00b"})
    events.flush(5000)
    stored = admin.state(APP)["events"]
    assert [e["properties"] for e in stored] == [{"s": "a\x00b"}] * 2
    assert stored[0]["properties_raw"] == '{"s":"a\\u0000b"}'


def test_identity_values_live_in_the_python_secure_store(client: appnorth.Client, tmp_path: Path,
                                                         admin: Admin) -> None:
    store: Dict[str, str] = {}
    with appnorth.Events(client, tmp_path, secure_store=store, **FAST_RETRY) as ev:
        anonymous = ev.anonymous_id
        assert store == {"anonymous_id": anonymous}
        ev.identify("user-42")
        ev.set_push_token("push-abc")
        assert store == {"anonymous_id": anonymous, "user_id": "user-42", "push_token": "push-abc"}
        ev.track("after_login")
        ev.flush(5000)
        ev.set_push_token(None)
        ev.reset()
        assert store == {"anonymous_id": anonymous}
    assert not (tmp_path / "identity.json").exists()
    (event,) = admin.state(APP)["events"]
    assert (event["anonymous_id"], event["user_id"]) == (anonymous, "user-42")
    # The same store gives the same anonymous id to a new handle.
    with appnorth.Events(client, tmp_path, secure_store=store, **FAST_RETRY) as ev:
        assert ev.anonymous_id == anonymous


def test_secure_store_exception_is_the_cause_of_a_storage_error(client: appnorth.Client, tmp_path: Path) -> None:
    class ReadOnly(dict):  # type: ignore[type-arg]
        def __setitem__(self, key: str, value: str) -> None:
            raise PermissionError("keyring locked")

    with appnorth.Events(client, tmp_path, secure_store=ReadOnly(anonymous_id="anon-1"), **FAST_RETRY) as ev:
        assert ev.anonymous_id == "anon-1"
        with pytest.raises(appnorth.StorageError) as info:
            ev.identify("user-1")
    assert isinstance(info.value.__cause__, PermissionError)


def test_secure_store_callbacks_are_released_with_the_handle(client: appnorth.Client, tmp_path: Path) -> None:
    before = appnorth._lib.pending_pins()
    ev = appnorth.Events(client, tmp_path, secure_store={}, **FAST_RETRY)
    assert appnorth._lib.pending_pins() == before + 1
    ev.close()
    assert appnorth._lib.pending_pins() == before


def test_revoked_consent_drops_events(events: appnorth.Events, admin: Admin) -> None:
    assert events.consent == appnorth.CONSENT_UNKNOWN
    events.track("before")
    events.set_consent(False)
    assert events.consent == appnorth.CONSENT_REVOKED
    assert events.track("after") is False
    stats = events.stats()
    assert stats["queued"] == 0 and stats["dropped"]["consent"] >= 1
    events.flush(5000)
    assert admin.state(APP)["events"] == []


def test_revoking_during_a_slow_upload_sends_nothing_afterwards(events: appnorth.Events, admin: Admin) -> None:
    for i in range(3):
        events.track(f"before{i}")
    # A slow server that then fails: a retry after the revocation would deliver the batch.
    admin.add_fault(delay_ms=1500, status=503, path_prefix=f"/v1/apps/{APP}/events")
    outcome: List[Any] = []

    def flush() -> None:
        try:
            outcome.append(events.flush(20_000))
        except appnorth.AppNorthError as error:
            outcome.append(error)

    flusher = threading.Thread(target=flush)
    flusher.start()
    deadline = time.monotonic() + 5
    while admin.faults() and time.monotonic() < deadline:  # taken: the upload is in progress
        time.sleep(0.02)
    assert admin.faults() == []
    events.set_consent(False)
    assert events.stats()["queued"] == 0
    flusher.join(20)
    assert len(outcome) == 1, "the flush in progress returned"
    events.flush(5000)  # any retry of the old cycle has run by now
    posts = [r for r in admin.requests(expect=1) if r["path"].endswith("/events")]
    assert [r["status"] for r in posts] == [503], "one slow attempt, never retried"
    assert admin.state(APP)["events"] == []


def test_require_consent_stores_nothing_until_granted(client: appnorth.Client, tmp_path: Path,
                                                      admin: Admin) -> None:
    with appnorth.Events(client, tmp_path, require_consent=True, **FAST_RETRY) as ev:
        assert ev.track("too early") is False
        ev.set_consent(True)
        assert ev.consent == appnorth.CONSENT_GRANTED
        assert ev.track("granted") is True
        ev.flush(5000)
    assert [e["name"] for e in admin.state(APP)["events"]] == ["granted"]


def test_server_failure_keeps_the_batch(events: appnorth.Events, admin: Admin) -> None:
    admin.add_fault(status=503, count=20)
    events.track("retry me")
    with pytest.raises(appnorth.ServerError) as info:
        events.flush(5000)
    assert info.value.http_status == 503
    stats = events.stats()
    assert stats["queued"] == 1 and stats["last_error"]["http_status"] == 503
    admin.clear_faults()
    events.start_session()
    events.flush(5000)
    assert [e["name"] for e in admin.state(APP)["events"]] == ["retry me"]


def test_one_rejected_event_does_not_take_its_batch_with_it(events: appnorth.Events, admin: Admin) -> None:
    admin.settings(rejected_event_names=["legacy_tap"])
    names = [f"good{i}" if i != 7 else "legacy_tap" for i in range(20)]
    for name in names:
        events.track(name)
    events.flush(5000)
    assert [e["name"] for e in admin.state(APP)["events"]] == [n for n in names if n != "legacy_tap"]
    posts = [r for r in admin.requests(expect=2) if r["path"].endswith("/events")]
    assert [r["status"] for r in posts] == [422, 200], "the rest went at once"
    stats = events.stats()
    assert stats["queued"] == 0 and stats["dropped"]["client_error"] == 1
    assert stats["breaker"]["consecutive_failures"] == 0


def test_a_4xx_without_a_list_refused_all_the_way_down_discards_the_batch(events: appnorth.Events,
                                                                         admin: Admin) -> None:
    # Naming no event, the 400 sends the batch in halves (issue 24): the
    # batch, [e0], [e1 e2], [e1], [e2]; all refused, all discarded.
    admin.add_fault(status=400, count=5, path_prefix=f"/v1/apps/{APP}/events")
    for i in range(3):
        events.track(f"e{i}")
    with pytest.raises(appnorth.ValidationError):
        events.flush(5000)
    assert events.stats()["dropped"]["client_error"] == 3 and events.stats()["queued"] == 0
    assert admin.state(APP)["events"] == []


def test_a_4xx_without_a_list_drops_only_the_poisoned_event(events: appnorth.Events, admin: Admin) -> None:
    admin.settings(poisoned_event_names=["poison"])
    try:
        for i in range(9):
            events.track(f"good{i}")
        events.track("poison")
        events.flush(5000)
        assert events.stats()["dropped"]["client_error"] == 1 and events.stats()["queued"] == 0
        assert {e["name"] for e in admin.state(APP)["events"]} == {f"good{i}" for i in range(9)}
    finally:
        admin.settings(poisoned_event_names=[])


def test_close_with_flush_sends_the_queue(client: appnorth.Client, tmp_path: Path, admin: Admin) -> None:
    ev = appnorth.Events(client, tmp_path, **FAST_RETRY)
    ev.track("last words")
    ev.close(flush_timeout_ms=5000)
    assert ev.closed
    assert [e["name"] for e in admin.state(APP)["events"]] == ["last words"]
    with pytest.raises(appnorth.WrongStateError):
        ev.track("too late")


def test_queued_events_survive_a_restart(client: appnorth.Client, tmp_path: Path, admin: Admin) -> None:
    with appnorth.Events(client, tmp_path, close_timeout_ms=0, **FAST_RETRY) as ev:
        ev.track("persisted")
    assert admin.state(APP)["events"] == []
    with appnorth.Events(client, tmp_path, **FAST_RETRY) as ev:
        ev.flush(5000)
    assert [e["name"] for e in admin.state(APP)["events"]] == ["persisted"]


def wait_for_events(admin: Admin, count: int, timeout: float = 20.0) -> List[Dict[str, Any]]:
    """The events the server holds once there are ``count`` (or the deadline passed)."""
    deadline = time.monotonic() + timeout
    while True:
        events: List[Dict[str, Any]] = admin.state(APP)["events"]
        if len(events) >= count or time.monotonic() > deadline:
            return events
        time.sleep(0.05)


def test_events_left_by_an_earlier_run_go_out_soon_after_open(client: appnorth.Client, tmp_path: Path,
                                                               admin: Admin) -> None:
    with appnorth.Events(client, tmp_path, close_timeout_ms=0, **FAST_RETRY) as ev:
        ev.track("left over 1")
        ev.track("left over 2")
    assert admin.state(APP)["events"] == []
    # A 10-minute timer and a threshold of 1000: only the start-up upload sends them.
    with appnorth.Events(client, tmp_path, close_timeout_ms=0, **FAST_RETRY):
        names = [e["name"] for e in wait_for_events(admin, 2)]
    assert names == ["left over 1", "left over 2"]


def test_leaving_with_uploads_the_queue(client: appnorth.Client, tmp_path: Path, admin: Admin) -> None:
    with appnorth.Events(client, tmp_path, **FAST_RETRY) as ev:
        ev.track("tracked just before leaving")
    assert [e["name"] for e in admin.state(APP)["events"]] == ["tracked just before leaving"]


def test_close_during_an_outage_is_bounded_and_keeps_the_events(client: appnorth.Client, tmp_path: Path,
                                                                 admin: Admin) -> None:
    ev = appnorth.Events(client, tmp_path, close_timeout_ms=300, **FAST_RETRY)
    admin.outage()
    ev.track("kept")
    ev.close()  # an offline app must be able to quit: nothing raised
    admin.clear_faults()
    with appnorth.Events(client, tmp_path, close_timeout_ms=0, **FAST_RETRY):
        assert [e["name"] for e in wait_for_events(admin, 1)] == ["kept"]


def test_close_timeout_must_not_be_negative(client: appnorth.Client, tmp_path: Path) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Events(client, tmp_path, close_timeout_ms=-1)


def test_flush_returns_what_it_sent(events: appnorth.Events, admin: Admin) -> None:
    assert events.flush(5000) == 0
    for i in range(3):
        events.track(f"e{i}")
    assert events.flush(5000) == 3
    assert len(admin.state(APP)["events"]) == 3
    admin.add_fault(status=503, count=50)
    events.track("refused")
    with pytest.raises(appnorth.ServerError) as info:
        events.flush(5000)
    assert info.value.sent == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("name,properties,error", [
    ("", None, appnorth.InvalidArgumentError),
    ("x" * 257, None, appnorth.InvalidArgumentError),
    (None, None, appnorth.InvalidArgumentError),
    ("ok", "[1, 2]", appnorth.InvalidJSONError),
    ("ok", "{broken", appnorth.InvalidJSONError),
    ("ok", b'{"k": "\xff"}', appnorth.InvalidUTF8Error),
    ("ok", {"blob": "x" * 70_000}, appnorth.TooLargeError),
    ("ok", "[" * (50 * 1024 * 1024), appnorth.TooLargeError),  # measured before parsing
])
def test_bad_events_are_refused(events: appnorth.Events, name: Any, properties: Any, error: type) -> None:
    with pytest.raises(error):
        events.track(name, properties)
    assert events.stats()["queued"] == 0


def test_bad_options_are_refused(client: appnorth.Client, tmp_path: Path) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Events(client, tmp_path, flush_interval_ms=1)
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Events(client, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        appnorth.Events("client", tmp_path)  # type: ignore[arg-type]
    client.close()
    with pytest.raises(appnorth.WrongStateError):
        appnorth.Events(client, tmp_path)


def test_upload_thread_logs_reach_python_from_its_own_thread(server_url: str, tmp_path: Path,
                                                             admin: Admin) -> None:
    records: List[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("appnorth.test.events")
    logger.setLevel(logging.DEBUG)
    handler = Collect()
    logger.addHandler(handler)
    try:
        client = appnorth.Client(server_url, APP, logger=logger, api_timeout_ms=FAST_TIMEOUT_MS)
        ev = appnorth.Events(client, tmp_path, **FAST_RETRY)
        # The events handle keeps the client's log callback alive: closing the
        # client first must not leave the upload thread with a dangling one.
        client.close()
        admin.add_fault(status=503, count=20)
        ev.track("logged")
        with pytest.raises(appnorth.ServerError):
            ev.flush(5000)
        ev.close()
    finally:
        logger.removeHandler(handler)
    uploads = [r for r in records if "upload" in r.getMessage()]
    assert uploads, [r.getMessage() for r in records]
    assert any(r.thread != threading.get_ident() for r in uploads)


EXIT_SCRIPT = textwrap.dedent("""
    import atexit, logging, sys
    live = []
    atexit.register(lambda: print("closed at exit:", all(o.closed for o in live), flush=True))
    import appnorth

    logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, format="%(threadName)s %(message)s")
    url, data = sys.argv[1], sys.argv[2]
    for i in range(3):
        client = appnorth.Client(url, "exit-app", logger=True, api_timeout_ms=2000)
        events = appnorth.Events(client, f"{data}/{i}", flush_interval_ms=10, batch_threshold=1,
                                 retry_base_delay_ms=1, breaker_threshold=100)
        live += [client, events]
        for n in range(50):
            events.track("spam", {"n": n})
    print("exiting while upload threads log", flush=True)
""")


def test_interpreter_exit_while_upload_threads_log(server_url: str, admin: Admin, tmp_path: Path) -> None:
    """PRODUCT.md: a library thread calling into Python while the
    interpreter finalises crashes the host. The exit hook stops them first."""
    script = tmp_path / "exit_events.py"
    script.write_text(EXIT_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), APPNORTH_LIBRARY=appnorth.LIBRARY_PATH)
    admin.add_fault(status=503, count=100_000)  # keep every upload thread failing and logging
    for run in range(4):
        result = subprocess.run([sys.executable, str(script), server_url, str(tmp_path / f"run{run}")],
                                env=env, capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
        assert "exiting while upload threads log" in result.stdout
        assert "closed at exit: True" in result.stdout
        assert "Traceback" not in result.stderr


def test_storage_errors_name_the_path(client: appnorth.Client, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    target = blocker / "data"
    for open_it in (lambda: appnorth.Events(client, target),
                    lambda: appnorth.Storage.sqlite(target, "queue"),
                    lambda: appnorth.Config(client, target)):
        with pytest.raises(appnorth.StorageError) as info:
            open_it()
        assert info.value.path == str(target)
        assert str(blocker) in str(info.value), str(info.value)
