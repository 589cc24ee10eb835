"""The library's log lines reach Python's logging module; secrets never do;
a failing log handler never unwinds into C."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def appnorth_records() -> Iterator[List[logging.LogRecord]]:
    """Records of the "appnorth" logger, at DEBUG, for one test."""
    logger = logging.getLogger(appnorth.LOGGER_NAME)
    handler = ListHandler()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def test_log_true_routes_lines_to_the_appnorth_logger(closed_port: int,
                                                      appnorth_records: List[logging.LogRecord]) -> None:
    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, logger=True,
                         api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.NetworkError):
            client.list_boards()
    assert any(r.name == "appnorth" and r.levelno == logging.WARNING and "GET /boards" in r.getMessage()
               for r in appnorth_records), [r.getMessage() for r in appnorth_records]


def test_a_logger_object_receives_the_lines(server_url: str, admin: Admin) -> None:
    logger = logging.getLogger("myapp.sdk")
    handler = ListHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        admin.add_fault(status=500)
        with appnorth.Client(server_url, APP, logger=logger, api_timeout_ms=FAST_TIMEOUT_MS) as client:
            with pytest.raises(appnorth.ServerError):
                client.list_boards()
        assert any("HTTP 500" in r.getMessage() for r in handler.records)
        assert all(r.name == "myapp.sdk" for r in handler.records)
    finally:
        logger.removeHandler(handler)


def test_lines_go_to_the_appnorth_logger_by_default(closed_port: int,
                                                   appnorth_records: List[logging.LogRecord]) -> None:
    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.NetworkError):
            client.list_boards()
    assert any(r.name == "appnorth" and r.levelno == logging.WARNING for r in appnorth_records)


def test_logger_false_is_silent(closed_port: int, appnorth_records: List[logging.LogRecord]) -> None:
    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, logger=False,
                         api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.NetworkError):
            client.list_boards()
    assert appnorth_records == []


def test_the_library_follows_the_logger_level_as_it_changes(server_url: str, admin: Admin) -> None:
    logger = logging.getLogger("appnorth")
    handler = ListHandler()
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS) as client:
            client.list_boards()
            assert handler.records == [], "nothing below WARNING"
            assert client._library_level == appnorth.LOG_WARNING, "DEBUG lines are not even made"
            logger.setLevel(logging.DEBUG)  # no new client
            client.list_boards()
            assert client._library_level == appnorth.LOG_DEBUG
            lines = [r.getMessage() for r in handler.records if r.levelno == logging.DEBUG]
            assert any(re.fullmatch(rf"HTTP GET /v1/apps/{APP}/boards -> 200 in \d+ ms "
                                    r"over HTTP/1\.1 \(sent 0 B, received \d+ B\)", line) for line in lines), lines
            logger.setLevel(logging.ERROR)
            handler.records.clear()
            client.list_boards()
            assert handler.records == []
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def test_debug_traces_event_batches_and_retries(server_url: str, admin: Admin, tmp_path: Path,
                                                appnorth_records: List[logging.LogRecord]) -> None:
    with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS) as client, \
            appnorth.Events(client, tmp_path, retry_base_delay_ms=10, flush_interval_ms=600_000,
                            batch_threshold=1000, close_timeout_ms=0) as events:
        events.identify("user-secret-77")
        anonymous_id = events.anonymous_id
        admin.add_fault(status=503, count=1)
        events.track("traced", {"secret_payload": "pay-9"})
        assert events.flush(5000) == 1
    lines = [r.getMessage() for r in appnorth_records]
    assert any("events: batch of 1 failed; retry 1 in" in line for line in lines), lines
    assert any("events: batch of 1 delivered (HTTP 2" in line for line in lines), lines
    assert any(f"HTTP POST /v1/apps/{APP}/events -> 503" in line for line in lines), lines
    for line in lines:
        assert "user-secret-77" not in line and "pay-9" not in line and anonymous_id not in line


def run_with_appnorth_debug(server_url: str, logger_arg: str, tmp_path: Path) -> str:
    """stderr of a script that lists boards with APPNORTH_DEBUG=1 and no logging setup."""
    code = ("import appnorth\n"
            f"with appnorth.Client({server_url!r}, {APP!r}{logger_arg}) as c:\n"
            "    c.list_boards()\n")
    result = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, APPNORTH_DEBUG="1"),
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_appnorth_debug_env_reaches_a_host_without_a_log_callback(server_url: str, tmp_path: Path) -> None:
    # logger=False installs no callback: the library itself writes to stderr, as for a C host.
    stderr = run_with_appnorth_debug(server_url, ", logger=False", tmp_path)
    assert f"appnorth DEBUG: HTTP GET /v1/apps/{APP}/boards -> 200 in " in stderr, stderr


def test_appnorth_debug_env_shows_python_lines_without_logging_setup(server_url: str, tmp_path: Path) -> None:
    stderr = run_with_appnorth_debug(server_url, "", tmp_path)
    assert f"appnorth DEBUG: HTTP GET /v1/apps/{APP}/boards -> 200" in stderr, stderr


def test_log_lines_never_hold_the_token_or_email(server_url: str, admin: Admin,
                                                 appnorth_records: List[logging.LogRecord]) -> None:
    admin.add_user(APP, "grace@example.com", "tok-right")
    with appnorth.Client(server_url, APP, email="Grace@Example.com", token="tok-secret-9f2",
                         logger=True, api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.AuthenticationError):
            client.list_boards()
    assert appnorth_records, "the refused request is logged"
    for record in appnorth_records:
        text = record.getMessage().lower()
        assert "tok-secret-9f2" not in text and "grace@example.com" not in text


def test_exception_in_the_log_handler_is_reported_not_raised(
        closed_port: int, capfd: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("appnorth.test.broken")
    logger.setLevel(logging.DEBUG)

    class Broken(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise RuntimeError("filter exploded")

    broken = Broken()
    logger.addFilter(broken)
    try:
        with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, logger=logger,
                             api_timeout_ms=FAST_TIMEOUT_MS) as client:
            # The call still fails the normal way: the callback's exception
            # stayed in Python.
            with pytest.raises(appnorth.NetworkError):
                client.list_boards()
            assert client.scope.endswith("|anonymous")
    finally:
        logger.removeFilter(broken)
    err = capfd.readouterr().err
    assert "exception in the appnorth log callback ignored" in err
    assert "filter exploded" in err


def test_logger_argument_type_is_checked(server_url: str) -> None:
    with pytest.raises(TypeError, match="logger"):
        appnorth.Client(server_url, APP, logger="appnorth")  # type: ignore[arg-type]


def test_callback_object_is_kept_until_close(server_url: str) -> None:
    client = appnorth.Client(server_url, APP, logger=True)
    assert client._log_callback is not None
    client.close()
    assert client._log_callback is None
