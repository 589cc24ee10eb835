"""Remote config through the binding, against the real dev server: tiers,
numbers as served, TTL with a manual clock, live updates and Python
listeners (their threads, exceptions, removal and close from inside), bad
data, and interpreter exit with a live config and a registered listener.

Server state is arranged through the admin API (publishing a config,
injecting faults); nothing mocks HTTP. Poll and backoff intervals are short
so that tests stay fast.
"""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional, Tuple

import pytest

import appnorth
from appnorth import _handle, _lib
from appnorth_test_support import APP, BINDING_DIR, FAST_TIMEOUT_MS, Admin

FAST: dict = {"poll_interval_ms": 100, "reconnect_backoff_ms": (20, 200)}
WAIT = 30.0  # seconds; a watchdog for a hang only, tests normally finish in ms

Call = Tuple[dict, List[str], int, str]


class Recorder:
    """A listener that records its calls (values, changed keys, tier, thread
    name) and lets the test wait for them."""

    def __init__(self) -> None:
        self.calls: List[Call] = []
        self._cond = threading.Condition()

    def __call__(self, values: dict, changed: List[str], tier: int) -> None:
        with self._cond:
            self.calls.append((values, changed, tier, threading.current_thread().name))
            self._cond.notify_all()

    def wait(self, count: int, timeout: float = WAIT) -> List[Call]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.calls) >= count, timeout), \
                f"expected {count} listener calls, got {self.calls}"
            return list(self.calls)


def refresh_thread_name() -> str:
    """Where refresh() delivers listeners: on the calling thread, or, called
    on the main thread, on the worker thread it makes the fetch on (so that
    Ctrl-C can interrupt it)."""
    if threading.current_thread() is threading.main_thread():
        return _handle.WORKER_NAME
    return threading.current_thread().name


def wait_until(predicate: Callable[[], Any], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def library_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def wait_for_library_threads(count: int) -> None:
    """Until the process has ``count`` threads. After a close() on the main
    thread, the worker thread that ran it (joined already) may take a moment
    to leave the kernel's list; a library thread that close() did not stop
    stays (it runs until told to stop), so this still fails."""
    wait_until(lambda: library_threads() == count)


@pytest.fixture
def open_config(client: appnorth.Client) -> Iterator[Callable[..., appnorth.Config]]:
    """Opens configs (on the test's client unless given another) and closes
    them after the test."""
    opened: List[appnorth.Config] = []

    def make(data_dir: Any = None, *, on: Optional[appnorth.Client] = None, **options: Any) -> appnorth.Config:
        config = appnorth.Config(on or client, data_dir, **{**FAST, **options})
        opened.append(config)
        return config

    def close_all() -> None:
        for config in opened:
            config.close()

    make.close_all = close_all  # type: ignore[attr-defined]
    yield make
    close_all()


def config_requests(admin: Admin, since: int = 0) -> List[dict]:
    return [r for r in admin.requests(since=since) if r["path"] == f"/v1/apps/{APP}/config"]


# ---------------------------------------------------------------------------
# Tiers, getters, numbers
# ---------------------------------------------------------------------------

def test_bundled_then_remote_then_live_updates_fire_listeners_with_changed_keys(
        open_config: Callable[..., appnorth.Config], admin: Admin, tmp_path: Path) -> None:
    bundled = tmp_path / "appdna-config.json"
    bundled.write_text('{"theme":"light","price":4.99,"legacy":true}')
    admin.publish_config(APP, '{"theme":"dark","price":4.99}')
    config = open_config(tmp_path / "data", bundled_path=bundled)
    recorder = Recorder()
    token = config.add_listener(recorder)
    assert token >= 1

    # Offline first launch: the bundle. (A read of the bundled tier starts a
    # background fetch; the outage makes it fail.)
    admin.outage()
    assert config.source == (appnorth.CONFIG_TIER_BUNDLED, 0)
    assert config.get_string("theme") == "light"
    assert config.get_bool("legacy") is True
    wait_until(lambda: isinstance(config.last_fetch_status().error, appnorth.NetworkError))
    assert config.get_string("theme") == "light" and recorder.calls == []
    admin.clear_faults()

    config.start_live()
    config.start_live()  # idempotent
    values, changed, tier, thread = recorder.wait(1)[0]
    assert values == {"theme": "dark", "price": 4.99}
    # Whole documents, not merged: "legacy" is gone with the bundle.
    assert sorted(changed) == ["legacy", "theme"]
    assert tier == appnorth.CONFIG_TIER_REMOTE
    assert thread != threading.current_thread().name, "live updates arrive on the library thread"
    assert config.get_bool("legacy", False) is False
    source = config.source
    assert source.tier == appnorth.CONFIG_TIER_REMOTE and source.fetched_ms > 0

    admin.publish_config(APP, '{"theme":"dark","price":5.99,"banner":"hi"}')
    values, changed, tier, _ = recorder.wait(2)[1]
    assert values == {"theme": "dark", "price": 5.99, "banner": "hi"}
    assert changed == ["price", "banner"]
    assert config.get_string("banner") == "hi"
    assert config.last_fetch_status().error is None


def test_identical_content_fires_no_listener(open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"a":1.5,"b":[1,2],"c":"x"}')
    config = open_config()
    recorder = Recorder()
    config.add_listener(recorder)
    config.start_live()
    recorder.wait(1)
    # A new version with equal values: other spacing, key order and number
    # spelling. Then a real change: it must be the very next call.
    admin.publish_config(APP, '{ "c":"x", "b":[1, 2], "a":1.50 }')
    admin.publish_config(APP, '{"a":1.5,"b":[1,2],"c":"y"}')
    calls = recorder.wait(2)
    assert [changed for _, changed, _, _ in calls] == [["a", "b", "c"], ["c"]]
    config.refresh()  # 304 or same content: nothing either
    time.sleep(0.05)
    assert len(recorder.calls) == 2
    assert config.snapshot_json() == '{"a":1.5,"b":[1,2],"c":"y"}'


def test_numbers_keep_the_spelling_they_were_served_with(open_config: Callable[..., appnorth.Config],
                                                         admin: Admin) -> None:
    served = '{"price":9.99,"ratio":1.50,"big":1e2,"nested":{"price":9.99},"n":3}'
    admin.publish_config(APP, served)
    config = open_config()
    config.refresh()
    assert config.snapshot_json() == served
    assert config.get_json_text("nested") == '{"price":9.99}'
    assert config.get_json_text("ratio") == "1.50"
    assert config.get_json_text("missing", '{"a":1.50}') == '{"a":1.50}'
    assert config.snapshot() == {"price": 9.99, "ratio": 1.5, "big": 100.0, "nested": {"price": 9.99}, "n": 3}
    assert config.get_double("price") == 9.99


def test_typed_getters_return_the_default_for_missing_keys_and_wrong_types(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"title":"Sale","count":3,"real":3.0,"on":false,"nothing":null,"a.b":1,'
                              '"list":[1,"x"]}')
    config = open_config()
    config.refresh()
    assert config.get_string("title") == "Sale"
    assert config.get_string("count", "fallback") == "fallback"
    assert config.get_int("count") == 3
    assert config.get_int("real", -1) == -1, "3.0 is not an integer"
    assert config.get_double("count") == 3.0 and config.get_double("title", 1.5) == 1.5
    assert config.get_bool("on", True) is False and config.get_bool("count", True) is True
    assert config.get_json("nothing", "default") is None, "JSON null is a value"
    assert config.get_json("missing", {"d": 1}) == {"d": 1}
    assert config.get_json("list") == [1, "x"]
    assert config.get_int("a.b") == 1, "keys are top-level keys, matched exactly"
    assert config.get_int("a") == 0
    with pytest.raises(appnorth.InvalidArgumentError):
        config.get_string(None)
    with pytest.raises(appnorth.InvalidUTF8Error):
        config.get_string(b"\xff\xfe")
    with pytest.raises(appnorth.InvalidJSONError, match="default_json"):
        config.get_json_text("title", "{bad")
    with pytest.raises(TypeError):
        config.get_bool("on", 1)  # type: ignore[arg-type]
    with pytest.raises(appnorth.InvalidArgumentError):
        config.get_int("count", 2 ** 63)


def test_the_cached_tier_is_used_after_reopening_offline(
        open_config: Callable[..., appnorth.Config], admin: Admin, tmp_path: Path, closed_port: int) -> None:
    served = '{"price":9.99,"theme":"dark"}'
    admin.publish_config(APP, served)
    data = tmp_path / "data"
    first = open_config(data)
    first.refresh()
    fetched_ms = first.source.fetched_ms
    first.close()

    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, api_timeout_ms=FAST_TIMEOUT_MS,
                         resource_timeout_ms=FAST_TIMEOUT_MS) as offline:
        config = open_config(data, on=offline)
    assert config.source == (appnorth.CONFIG_TIER_CACHED, fetched_ms)
    assert config.snapshot_json() == served
    with pytest.raises(appnorth.NetworkError):
        config.refresh()
    status = config.last_fetch_status()
    assert isinstance(status.error, appnorth.NetworkError) and status.time_ms > 0
    assert config.get_double("price") == 9.99, "the cached copy stays in effect"


def test_defaults_without_a_bundle_a_cache_or_a_published_config(
        open_config: Callable[..., appnorth.Config]) -> None:
    config = open_config()
    assert config.last_fetch_status() == (None, 0), "nothing attempted before the first read"
    assert config.source == (appnorth.CONFIG_TIER_DEFAULT, 0)
    assert config.snapshot() == {} and config.snapshot_json() == "{}"
    assert config.get_string("theme", "system") == "system"
    with pytest.raises(appnorth.NotFoundError) as info:
        config.refresh()
    assert info.value.http_status == 404
    error = config.last_fetch_status().error
    assert isinstance(error, appnorth.NotFoundError) and error.http_status == 404


# ---------------------------------------------------------------------------
# TTL
# ---------------------------------------------------------------------------

def test_ttl_a_stale_value_is_served_while_a_background_fetch_runs(
        open_config: Callable[..., appnorth.Config], admin: Admin, tmp_path: Path, server_url: str) -> None:
    start = 1_700_000_000_000
    clock = appnorth.ManualClock(start)
    data = tmp_path / "data"
    admin.publish_config(APP, '{"v":1}')
    first = open_config(data, ttl_seconds=60, clock=clock)
    first.refresh()
    first.close()
    admin.publish_config(APP, '{"v":2}')

    # A client whose fetch outlasts the hold below.
    with appnorth.Client(server_url, APP, api_timeout_ms=60_000, resource_timeout_ms=60_000) as patient:
        config = open_config(data, ttl_seconds=60, clock=clock, on=patient)
    recorder = Recorder()
    config.add_listener(recorder)
    seen = admin.requests()
    since = seen[-1]["seq"] if seen else 0

    clock.advance(59_000)
    assert config.get_int("v") == 1, "fresh cache served"
    time.sleep(0.1)
    assert config.source.tier == appnorth.CONFIG_TIER_CACHED
    assert config_requests(admin, since) == [], "no request while fresh"

    clock.advance(1_000)  # TTL reached
    # The revalidation is held at the server until released: the read
    # returns the stale value while its fetch is held, so it waits for none.
    admin.add_fault(delay_ms=600_000, method="GET", path_prefix=f"/v1/apps/{APP}/config")
    assert config.get_int("v") == 1, "the stale value, while the fetch is held"
    admin.wait_held(1)
    assert recorder.calls == [], "nothing delivered while the fetch is held"
    admin.release()
    values, changed, tier, thread = recorder.wait(1)[0]
    assert (values, changed, tier) == ({"v": 2}, ["v"], appnorth.CONFIG_TIER_REMOTE)
    assert thread != threading.current_thread().name, "delivered on the library thread"
    assert config.get_int("v") == 2
    assert config.source == (appnorth.CONFIG_TIER_REMOTE, start + 60_000)
    (fetch,) = config_requests(admin, since)
    assert fetch["method"] == "GET" and fetch["headers"].get("If-None-Match") == '"1"'

    # Stale again, nothing new: a 304 moves the fetch time, fires nothing.
    clock.advance(61_000)
    config.get_int("v")
    wait_until(lambda: config.source.fetched_ms == start + 121_000)
    assert len(recorder.calls) == 1
    assert [r["status"] for r in config_requests(admin, since)] == [200, 304]


# ---------------------------------------------------------------------------
# Bad data and bad arguments
# ---------------------------------------------------------------------------

def test_a_bad_bundled_file_is_reported_and_the_config_opens_without_it(
        open_config: Callable[..., appnorth.Config], admin: Admin, tmp_path: Path) -> None:
    missing = tmp_path / "appdna-config.json"
    with pytest.warns(appnorth.BundledConfigWarning, match=str(missing)) as record:
        config = open_config(None, bundled_path=missing)
    assert isinstance(config.bundled_error, appnorth.StorageError)
    assert record[0].message.error is config.bundled_error  # type: ignore[union-attr]
    assert config.source == (appnorth.CONFIG_TIER_DEFAULT, 0), "the getters' defaults"
    config.close()

    # With a cached copy, the config opens on the cached tier.
    admin.publish_config(APP, '{"theme":"dark"}')
    data = tmp_path / "data"
    open_config(data).refresh()
    open_config.close_all()  # type: ignore[attr-defined]
    bad = tmp_path / "bad.json"
    bad.write_text('{"theme": ')
    with pytest.warns(appnorth.BundledConfigWarning, match=str(bad)):
        config = open_config(data, bundled_path=bad)
    assert isinstance(config.bundled_error, appnorth.InvalidJSONError)
    assert config.source.tier == appnorth.CONFIG_TIER_CACHED
    assert config.get_string("theme") == "dark"
    config.close()

    array = tmp_path / "array.json"
    array.write_text("[1,2,3]")
    with pytest.warns(appnorth.BundledConfigWarning):
        config = open_config(None, bundled_path=str(array))
    assert isinstance(config.bundled_error, appnorth.InvalidJSONError)

    good = tmp_path / "good.json"
    good.write_text('{"theme":"light"}')
    config = open_config(None, bundled_path=good)
    assert config.bundled_error is None and config.get_string("theme") == "light"


def test_a_host_can_refuse_to_open_without_its_bundle(client: appnorth.Client, tmp_path: Path) -> None:
    live_before = len(_lib._live)
    with warnings.catch_warnings():
        warnings.simplefilter("error", appnorth.BundledConfigWarning)
        with pytest.raises(appnorth.BundledConfigWarning) as info:
            appnorth.Config(client, tmp_path, bundled_path=tmp_path / "missing.json")
    assert isinstance(info.value.error, appnorth.StorageError)
    gc.collect()
    assert len(_lib._live) == live_before, "nothing left behind"
    with pytest.raises(appnorth.InvalidUTF8Error):  # a bad argument is still raised
        appnorth.Config(client, None, bundled_path=b"\xff.json")


def test_nul_escape_is_accepted_and_a_raw_nul_byte_is_refused(
        open_config: Callable[..., appnorth.Config], admin: Admin, tmp_path: Path) -> None:
    admin.publish_config(APP, '{"s":"a\\u0000b","n":1}')
    config = open_config(tmp_path)
    config.refresh()
    assert config.snapshot_json() == '{"s":"a\\u0000b","n":1}'
    assert config.get_json("s") == "a\x00b"
    with pytest.raises(appnorth.InvalidArgumentError, match="U\\+0000"):
        config.get_string("s")  # a C string would be cut short
    admin.publish_raw_config(APP, '{"n": 2\x00, "b": "x"}')
    with pytest.raises(appnorth.InvalidJSONError, match="NUL"):
        config.refresh()
    assert config.snapshot() == {"s": "a\x00b", "n": 1}


def test_a_stream_line_over_the_limit_is_reported(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    config.refresh()
    assert config.last_fetch_status().error is None
    admin.add_fault(path_prefix=f"/v1/apps/{APP}/config/stream", endless_line=True)
    config.start_live()
    wait_until(lambda: isinstance(config.last_fetch_status().error, appnorth.TooLargeError), timeout=60)
    assert "stream" in config.last_fetch_status().error.message
    assert config.get_int("v") == 1


def test_an_invalid_remote_payload_keeps_the_last_good_config(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"price":9.99}')
    config = open_config()
    recorder = Recorder()
    config.add_listener(recorder)
    config.refresh()
    recorder.wait(1)

    admin.publish_raw_config(APP, "{not json")
    with pytest.raises(appnorth.InvalidJSONError):
        config.refresh()
    error, at = config.last_fetch_status()
    assert isinstance(error, appnorth.InvalidJSONError) and error.code == appnorth.E_INVALID_JSON
    assert "config" in error.message and at > 0
    assert config.snapshot_json() == '{"price":9.99}'

    # The live stream reports it the same way, and recovers with the next version.
    config.start_live()
    wait_until(lambda: "stream" in str(config.last_fetch_status().error or ""))
    assert config.get_double("price") == 9.99
    admin.publish_config(APP, '{"price":7.5}')
    assert recorder.wait(2)[1][:2] == ({"price": 7.5}, ["price"])
    wait_until(lambda: config.last_fetch_status().error is None)


def test_a_server_error_is_reported_with_its_http_status(open_config: Callable[..., appnorth.Config],
                                                         admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    admin.add_fault(status=503, path_prefix=f"/v1/apps/{APP}/config")
    with pytest.raises(appnorth.ServerError) as info:
        config.refresh()
    assert info.value.http_status == 503
    error = config.last_fetch_status().error
    assert isinstance(error, appnorth.ServerError) and error.http_status == 503
    config.refresh()
    assert config.get_int("v") == 1 and config.last_fetch_status().error is None


def test_one_config_per_data_directory_and_app(open_config: Callable[..., appnorth.Config],
                                               tmp_path: Path) -> None:
    first = open_config(tmp_path)
    with pytest.raises(appnorth.WrongStateError):
        open_config(tmp_path)
    first.close()
    open_config(tmp_path)


def test_arguments_are_checked(client: appnorth.Client, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="client"):
        appnorth.Config("http://x", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clock"):
        appnorth.Config(client, None, clock=123)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reconnect_backoff_ms"):
        appnorth.Config(client, None, reconnect_backoff_ms=100)  # type: ignore[arg-type]
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Config(client, None, reconnect_backoff_ms=(100, 50))
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Config(client, None, ttl_seconds=31_536_001)
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Config(client, None, poll_interval_ms=5)
    with pytest.raises(TypeError, match="logger"):
        appnorth.Config(client, None, logger="appnorth")  # type: ignore[arg-type]
    with appnorth.Config(client, tmp_path, ttl_seconds=0, poll_interval_ms=0, reconnect_backoff_ms=(0, 0)) as config:
        with pytest.raises(TypeError):
            config.add_listener("not callable")  # type: ignore[arg-type]
        with pytest.raises(appnorth.InvalidArgumentError):
            config.remove_listener(12345)
        with pytest.raises(appnorth.InvalidArgumentError, match="not a registered listener"):
            config.remove_listener(print)


# ---------------------------------------------------------------------------
# Listeners
# ---------------------------------------------------------------------------

def test_on_update_is_a_decorator_and_remove_takes_the_function_or_its_token(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    calls: List[Tuple[dict, List[str], int]] = []

    @config.on_update
    def changed(values: dict, keys: List[str], tier: int) -> None:
        calls.append((values, keys, tier))

    assert callable(changed) and changed.__name__ == "changed"
    by_token = Recorder()
    token = config.add_listener(by_token)
    config.refresh()  # delivered before refresh returns, on the thread making the fetch
    assert calls == [({"v": 1}, ["v"], appnorth.CONFIG_TIER_REMOTE)]
    assert by_token.calls[0][3] == refresh_thread_name()

    config.remove_listener(changed)
    config.remove_listener(token)
    assert config._listeners is not None and config._listeners.count() == 0
    with pytest.raises(appnorth.InvalidArgumentError):
        config.remove_listener(token)
    admin.publish_config(APP, '{"v":2}')
    config.refresh()
    assert len(calls) == 1 and len(by_token.calls) == 1


def test_refresh_on_another_thread_delivers_there(open_config: Callable[..., appnorth.Config],
                                                 admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    recorder = Recorder()
    config.add_listener(recorder)
    caller = threading.Thread(target=config.refresh, name="refresher")
    caller.start()
    caller.join(WAIT)
    assert [call[3] for call in recorder.calls] == ["refresher"]


def test_an_exception_in_a_listener_is_logged_and_the_library_keeps_working(
        open_config: Callable[..., appnorth.Config], admin: Admin, caplog: pytest.LogCaptureFixture) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()

    def broken(values: dict, keys: List[str], tier: int) -> None:
        raise RuntimeError(f"listener exploded at v={values['v']}")

    config.add_listener(broken)
    recorder = Recorder()
    config.add_listener(recorder)
    with caplog.at_level(logging.ERROR, logger=appnorth.LOGGER_NAME):
        config.refresh()  # on this thread: not raised by refresh
        config.start_live()
        admin.publish_config(APP, '{"v":2}')  # on the library thread
        recorder.wait(2)
        wait_until(lambda: len([r for r in caplog.records if "exploded" in str(r.exc_info)]) >= 2)
    reports = [r for r in caplog.records if r.name == appnorth.LOGGER_NAME and r.exc_info]
    assert [str(r.exc_info[1]) for r in reports[:2] if r.exc_info] == [
        "listener exploded at v=1", "listener exploded at v=2"]
    assert reports[0].threadName == refresh_thread_name() != reports[1].threadName
    assert "exception in config listener" in reports[0].getMessage() and "broken" in reports[0].getMessage()
    assert config.get_int("v") == 2


def test_a_listener_can_remove_itself(open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    own_calls: List[int] = []
    outcome: List[Any] = []

    def once(values: dict, keys: List[str], tier: int) -> None:
        own_calls.append(values["v"])
        try:
            config.remove_listener(once)  # returns at once from inside the listener
            outcome.append("removed")
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    config.add_listener(once)
    recorder = Recorder()
    config.add_listener(recorder)
    config.start_live()
    recorder.wait(1)
    assert outcome == ["removed"]
    admin.publish_config(APP, '{"v":2}')
    recorder.wait(2)
    assert own_calls == [1], "never called again after removing itself"


def test_remove_waits_for_a_listener_running_on_another_thread(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    entered, finished = threading.Event(), threading.Event()

    def slow(values: dict, keys: List[str], tier: int) -> None:
        entered.set()
        time.sleep(0.2)
        finished.set()

    token = config.add_listener(slow)
    config.start_live()
    assert entered.wait(WAIT)
    config.remove_listener(token)
    assert finished.is_set(), "remove_listener returned while the listener was still running"


def test_close_inside_a_listener_is_refused(open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = open_config()
    outcomes: List[Tuple[str, Any]] = []
    recorder = Recorder()

    def closer(values: dict, keys: List[str], tier: int) -> None:
        try:
            config.close()
            outcomes.append((threading.current_thread().name, "closed"))
        except appnorth.WrongStateError as exc:
            outcomes.append((threading.current_thread().name, exc))
        outcomes.append(("read", config.get_int("v")))  # other calls are allowed in here

    config.add_listener(closer)
    config.add_listener(recorder)
    config.refresh()  # delivered on the thread making the fetch
    config.start_live()
    admin.publish_config(APP, '{"v":2}')  # delivered on the library thread
    recorder.wait(2)
    assert len(outcomes) == 4
    (refresh_thread, refused_here), read_1, (library_thread, refused_there), read_2 = outcomes
    assert (read_1, read_2) == (("read", 1), ("read", 2))
    assert refresh_thread == refresh_thread_name() != library_thread
    for refused in (refused_here, refused_there):
        assert isinstance(refused, appnorth.WrongStateError) and "inside" in str(refused)
    assert not config.closed
    config.close()
    assert config.closed


def test_stop_live_from_inside_a_listener_returns_at_once(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    before = library_threads()
    config = open_config()
    stopped = threading.Event()

    def stop(values: dict, keys: List[str], tier: int) -> None:
        config.stop_live()  # would deadlock if it joined its own thread
        stopped.set()

    config.add_listener(stop)
    config.start_live()
    assert stopped.wait(WAIT)
    wait_until(lambda: library_threads() == before)  # the thread ended after the listener
    config.remove_listener(stop)
    recorder = Recorder()
    config.add_listener(recorder)
    admin.publish_config(APP, '{"v":2}')
    time.sleep(0.15)
    assert recorder.calls == [], "not live any more"
    config.start_live()
    assert recorder.wait(1)[0][0] == {"v": 2}


def test_close_stops_the_library_thread_and_no_listener_runs_after(
        client: appnorth.Client, admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    before = library_threads()
    config = appnorth.Config(client, None, **FAST)
    recorder = Recorder()
    config.add_listener(recorder)
    config.start_live()
    recorder.wait(1)
    assert library_threads() > before
    assert config._keep, "the listener thunk is held while registered"
    config.close()
    wait_for_library_threads(before)  # close() stopped the library thread
    assert config._keep == [], "callbacks dropped only after the handle was freed"
    admin.publish_config(APP, '{"v":2}')
    time.sleep(0.15)
    assert len(recorder.calls) == 1
    with pytest.raises(appnorth.WrongStateError, match="closed"):
        config.get_int("v")
    with pytest.raises(appnorth.WrongStateError):
        config.remove_listener(recorder)


def test_stop_live_joins_the_thread_and_reads_keep_working(
        open_config: Callable[..., appnorth.Config], admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    before = library_threads()
    config = open_config()
    recorder = Recorder()
    config.add_listener(recorder)
    config.start_live()
    recorder.wait(1)
    config.stop_live()
    config.stop_live()  # idempotent
    assert library_threads() == before
    admin.publish_config(APP, '{"v":2}')
    time.sleep(0.15)
    assert len(recorder.calls) == 1 and config.get_int("v") == 1
    config.refresh()
    assert recorder.wait(2)[1][0] == {"v": 2}


def test_the_config_outlives_its_client(client: appnorth.Client, server_url: str, admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    own = appnorth.Client(server_url, APP, logger=True)
    config = appnorth.Config(own, None, **FAST)
    own.close()
    assert config._keep[1:] and config._keep[1] is not None, "the client's log callback is kept"
    config.refresh()
    assert config.get_int("v") == 1
    config.close()


def test_the_config_logs_through_its_own_or_the_clients_logger(
        server_url: str, closed_port: int, caplog: pytest.LogCaptureFixture) -> None:
    dead = f"http://127.0.0.1:{closed_port}"
    mine = logging.getLogger("myapp.config")
    with caplog.at_level(logging.DEBUG), \
            appnorth.Client(dead, APP, logger=True, api_timeout_ms=FAST_TIMEOUT_MS,
                            resource_timeout_ms=FAST_TIMEOUT_MS) as client:
        for logger, name in ((None, appnorth.LOGGER_NAME), (mine, "myapp.config"), (False, None)):
            caplog.clear()
            with appnorth.Config(client, None, logger=logger, **FAST) as config:
                with pytest.raises(appnorth.NetworkError):
                    config.refresh()
            names = {r.name for r in caplog.records}
            assert names == ({name} if name else set()), (logger, names)


# ---------------------------------------------------------------------------
# Lifetime: garbage collection, exit hook, interpreter exit
# ---------------------------------------------------------------------------

def test_a_dropped_config_is_closed_and_its_thread_joined(client: appnorth.Client, admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    before = library_threads()
    config = appnorth.Config(client, None, **FAST)
    recorder = Recorder()

    @config.on_update
    def reads_config(values: dict, keys: List[str], tier: int) -> None:  # a reference cycle
        config.get_int("v")
        recorder(values, keys, tier)  # last: the listener is done once recorded

    config.start_live()
    recorder.wait(1)
    time.sleep(0.01)  # let the listener return into the library
    alive = weakref.ref(config)
    del config, reads_config
    gc.collect()
    assert alive() is None
    wait_for_library_threads(before)


def test_a_config_dropped_inside_a_listener_is_kept_until_exit(client: appnorth.Client, admin: Admin) -> None:
    """Inside a library callback the handle cannot be freed (close() there
    is refused). Dropping the last reference there must not free the
    listener thunk under the running library thread: the config is kept,
    still working, and closed by the exit hook."""
    admin.publish_config(APP, '{"v":1}')
    before = library_threads()
    holder = [appnorth.Config(client, None, **FAST)]
    alive = weakref.ref(holder[0])
    go, dropped = threading.Event(), threading.Event()
    recorder = Recorder()

    def drop_last_reference(values: dict, keys: List[str], tier: int) -> None:
        if holder and go.wait(WAIT):
            holder.clear()  # refcount 0 here, on the library thread
            dropped.set()

    holder[0].add_listener(drop_last_reference)
    holder[0].add_listener(recorder)
    holder[0].start_live()
    go.set()  # this thread holds no reference any more
    assert dropped.wait(WAIT)
    recorder.wait(1)
    config = alive()
    assert config is not None and config in _lib._orphans and not config.closed
    admin.publish_config(APP, '{"v":2}')
    recorder.wait(2)  # the library thread still calls the (kept) thunk
    assert library_threads() > before
    _lib.close_all_live()
    assert config.closed and config not in _lib._orphans
    wait_for_library_threads(before)


def test_exit_hook_closes_live_configs(client: appnorth.Client, admin: Admin) -> None:
    admin.publish_config(APP, '{"v":1}')
    config = appnorth.Config(client, None, **FAST)
    config.add_listener(Recorder())
    config.start_live()
    assert config in _lib._live
    _lib.close_all_live()
    assert config.closed and config not in _lib._live


EXIT_SCRIPT = textwrap.dedent("""
    import atexit, json, logging, random, sys, threading, time, urllib.request

    keep = []
    # Registered before appnorth's own hook, so it runs after it (LIFO).
    atexit.register(lambda: print("closed at exit:", all(h.closed for h in keep), flush=True))
    import appnorth

    url, app = sys.argv[1], sys.argv[2]
    logging.basicConfig(level=logging.DEBUG, stream=sys.stdout)

    def publish(n):
        body = json.dumps({"config": {"n": n, "pad": "x" * (n % 7)}}).encode()
        request = urllib.request.Request(f"{url}/admin/apps/{app}/config", data=body, method="POST",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=5).read()

    publish(0)
    client = appnorth.Client(url, app, logger=True, api_timeout_ms=2000, resource_timeout_ms=2000)
    config = appnorth.Config(client, None, poll_interval_ms=20, reconnect_backoff_ms=(5, 50), logger=True)
    keep += [client, config]
    first = threading.Event()

    def listener(values, changed, tier):
        first.set()
        json.dumps(values)  # Python work on the library thread
        logging.getLogger("exit.listener").debug("update %s", values["n"])

    config.add_listener(listener)
    config.start_live()
    if not first.wait(5):
        sys.exit(4)

    def publisher():
        n = 1
        while True:
            publish(n)
            n += 1

    threading.Thread(target=publisher, daemon=True).start()
    time.sleep(random.uniform(0.0, 0.05))
    print("exiting with a live config", flush=True)
    # No close(): the atexit hook must stop the library thread first.
""")


def test_interpreter_exit_with_a_live_config_and_a_python_listener(server_url: str, tmp_path: Path) -> None:
    script = tmp_path / "exit_script.py"
    script.write_text(EXIT_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(BINDING_DIR), APPNORTH_LIBRARY=appnorth.LIBRARY_PATH)
    runs, parallel = 20, 5
    failures = []
    for batch in range(0, runs, parallel):
        children = [subprocess.Popen([sys.executable, str(script), server_url, f"exit-app-{i}"], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                    for i in range(batch, batch + parallel)]
        for child in children:
            out, err = child.communicate(timeout=30)
            ok = (child.returncode == 0 and "exiting with a live config" in out
                  and "closed at exit: True" in out and "update" in out
                  and "Traceback" not in err and "Exception" not in err)
            if not ok:
                failures.append((child.returncode, out[-500:], err[-2000:]))
    assert not failures, f"{len(failures)} of {runs} exits failed: {failures[0]}"
