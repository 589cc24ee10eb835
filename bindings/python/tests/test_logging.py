"""The library's log lines reach Python's logging module; secrets never do;
a failing log handler never unwinds into C."""

from __future__ import annotations

import logging
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


def test_silent_by_default(closed_port: int, appnorth_records: List[logging.LogRecord]) -> None:
    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, api_timeout_ms=FAST_TIMEOUT_MS) as client:
        with pytest.raises(appnorth.NetworkError):
            client.list_boards()
    assert appnorth_records == []


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
