"""Dispatch mode through the binding (Client(dispatch_mode=True)), against
the real dev server: callbacks (log lines reaching ``logging``, config
listeners) run only inside Client.dispatch(), on the calling thread; the
descriptor from dispatch_fd() is readable exactly while something waits;
changes queued before a dispatch coalesce; closing with callbacks queued
runs none of them."""

from __future__ import annotations

import logging
import select
import threading
import time
from typing import Callable, List, Tuple

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin

FAST: dict = {"poll_interval_ms": 100, "reconnect_backoff_ms": (20, 200)}


class ThreadRecorder(logging.Handler):
    """Records the thread each log record was emitted on."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.threads: List[str] = []
        self.messages: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.threads.append(threading.current_thread().name)
        self.messages.append(record.getMessage())


@pytest.fixture
def recorded_logger() -> Tuple[logging.Logger, ThreadRecorder]:
    logger = logging.getLogger(f"appnorth.test.dispatch.{time.monotonic_ns()}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = ThreadRecorder()
    logger.addHandler(handler)
    return logger, handler


def readable(fd: int, timeout: float) -> bool:
    return bool(select.select([fd], [], [], timeout)[0])


def wait_until(fd: int, done: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Waits on the descriptor (without dispatching) until ``done()``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        readable(fd, 0.02)
    return done()


def make_client(server_url: str, **kwargs) -> appnorth.Client:
    return appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS,
                           resource_timeout_ms=FAST_TIMEOUT_MS, dispatch_mode=True, **kwargs)


def test_default_mode_refuses_dispatch(client: appnorth.Client) -> None:
    assert client.dispatch_mode is False
    with pytest.raises(appnorth.WrongStateError, match="dispatch mode"):
        client.dispatch()
    with pytest.raises(appnorth.WrongStateError):
        client.dispatch_fd()


def test_bad_arguments(server_url: str) -> None:
    with pytest.raises(TypeError):
        appnorth.Client(server_url, APP, dispatch_mode=1)  # type: ignore[arg-type]
    with make_client(server_url, logger=False) as c:
        assert c.dispatch_mode is True
        with pytest.raises(appnorth.InvalidArgumentError):
            c.dispatch(-1)
        assert c.dispatch() == 0
        fd = c.dispatch_fd()
        assert fd >= 0 and not readable(fd, 0)
    with pytest.raises(appnorth.WrongStateError):
        c.dispatch()
    assert appnorth.DISPATCH_LOG_LIMIT == 1000


def test_log_lines_and_listeners_run_on_the_dispatching_thread(
        server_url: str, admin: Admin, tmp_path, recorded_logger) -> None:
    logger, handler = recorded_logger
    admin.publish_config(APP, {"level": 1})
    calls: List[Tuple[dict, List[str], str]] = []
    with make_client(server_url, logger=logger) as c:
        fd = c.dispatch_fd()
        with appnorth.Config(c, tmp_path, **FAST) as config:
            config.add_listener(lambda values, changed, tier:
                                calls.append((values, changed, threading.current_thread().name)))
            config.start_live()
            assert wait_until(fd, lambda: config.get_int("level", -1) == 1)
            assert readable(fd, 5), "callbacks are queued"
            assert calls == [] and handler.threads == [], "nothing ran before dispatch()"
            deadline = time.monotonic() + 15
            while not calls and time.monotonic() < deadline:
                if readable(fd, 0.1):
                    c.dispatch()
            assert calls and calls[-1][0] == {"level": 1}
            assert calls[-1][1] == ["level"]
        c.dispatch()
        assert handler.threads, "log lines reached logging"
        main = threading.current_thread().name
        assert set(handler.threads) == {main}
        assert {name for _, _, name in calls} == {main}
        assert not readable(fd, 0)


def test_changes_coalesce_and_a_closed_config_runs_nothing(server_url: str, admin: Admin, tmp_path) -> None:
    admin.publish_config(APP, {"a": 1})
    calls: List[Tuple[dict, List[str]]] = []
    with make_client(server_url, logger=False) as c:
        fd = c.dispatch_fd()
        config = appnorth.Config(c, tmp_path, **FAST)
        config.add_listener(lambda values, changed, tier: calls.append((values, changed)))
        config.start_live()
        assert wait_until(fd, lambda: config.get_int("a", -1) == 1)
        c.dispatch()
        assert len(calls) == 1
        admin.publish_config(APP, {"a": 1, "b": 2})
        assert wait_until(fd, lambda: config.get_int("b", -1) == 2)
        admin.publish_config(APP, {"a": 1, "b": 2, "c": 3})
        assert wait_until(fd, lambda: config.get_int("c", -1) == 3)
        assert c.dispatch() == 1
        assert calls[1] == ({"a": 1, "b": 2, "c": 3}, ["b", "c"])
        admin.publish_config(APP, {"a": 2})
        assert wait_until(fd, lambda: config.get_int("a", -1) == 2)
        config.close()
        c.dispatch()
        assert len(calls) == 2, "a closed config's queued change did not run"


def test_close_with_lines_queued_runs_none(server_url: str, recorded_logger) -> None:
    logger, handler = recorded_logger
    c = make_client(server_url, logger=logger)
    try:
        c.list_boards()
    except appnorth.AppNorthError:
        pass
    assert readable(c.dispatch_fd(), 0)
    assert handler.messages == []
    c.close()
    assert handler.messages == [], "no queued line ran after close"
