"""Issue 23, classes 4 to 7 against the real dev server playing a hostile
one (its fault and raw-response endpoints): server text reaching errors
and logs is escaped; an ETag that is no entity tag is neither sent back
nor costs the cache; ids stay one path segment and dot segments are
refused; a config value nested 2,000 deep reaches the host's listener."""

from __future__ import annotations

import base64
import logging
import threading
import time
from pathlib import Path
from typing import Any, List

import pytest

import appnorth
from appnorth_test_support import APP, Admin

EVIL = "nope\r\n[appnorth ERROR] forged line\x1b]0;pwned\x07\x1b[2J\x7f\u009b"
CONTROLS = [chr(c) for c in range(0x20)] + ["\x7f", "\u009b"]


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Any:
    handler = Lines()
    logger = logging.getLogger(f"hostile-{id(handler)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(handler)
    yield logger, handler
    logger.removeHandler(handler)


def clean(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


def wait_until(predicate: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


# -- class 4: server text in errors and log lines ----------------------------------

def test_server_error_text_is_escaped_in_errors_and_logs(server_url: str, admin: Admin, lines: Any) -> None:
    logger, handler = lines
    admin.add_fault(path_prefix=f"/v1/apps/{APP}/boards", status=400,
                    body={"error": {"code": "bad\r\nX-Injected: 1", "message": EVIL}})
    with appnorth.Client(server_url, APP, logger=logger) as client:
        with pytest.raises(appnorth.ValidationError) as caught:
            client.list_boards()
    message = str(caught.value)
    assert clean(message), repr(message)
    assert "forged line" in message and "\\x0D\\x0A" in message and "\\x1B" in message, message
    assert handler.lines and all(clean(line) for line in handler.lines), handler.lines


def test_an_event_upload_failure_logs_the_server_text_escaped(server_url: str, admin: Admin, lines: Any,
                                                               tmp_path: Path) -> None:
    logger, handler = lines
    admin.add_fault(path_prefix=f"/v1/apps/{APP}/events", method="POST", status=500, count=50,
                    body={"error": {"code": "boom", "message": EVIL}})
    with appnorth.Client(server_url, APP, logger=logger) as client:
        with appnorth.Events(client, tmp_path / "data", flush_interval_ms=600_000, retry_base_delay_ms=10) as events:
            events.track("e")
            with pytest.raises(appnorth.AppNorthError):
                events.flush(3000)
            wait_until(lambda: any("forged line" in line for line in handler.lines), f"logged: {handler.lines}")
            admin.clear_faults()
    assert all(clean(line) for line in handler.lines), [line for line in handler.lines if not clean(line)]


# -- class 5: entity tags ---------------------------------------------------------

def raw_config(etag: str, version: int, config: str) -> str:
    body = f'{{"version":{version},"config":{config}}}'.encode()
    head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nETag: {etag}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
    return base64.b64encode(head + body).decode()


@pytest.mark.parametrize("etag", ['"1\rX-Evil: 1"', '"a b"', "unquoted", '"' + "x" * 300 + '"'])
def test_a_bad_etag_is_not_sent_back_and_costs_no_cached_data(server_url: str, admin: Admin, tmp_path: Path,
                                                                closed_port: int, etag: str) -> None:
    # No config published: after the hostile answer, every other fetch is a
    # 404, which keeps what is held; whichever fetch (the open's own or
    # refresh()) takes the fault, the held config then carries the bad tag.
    admin.add_fault(path_prefix=f"/v1/apps/{APP}/config", method="GET", raw_response=raw_config(etag, 7, '{"a":1}'))
    with appnorth.Client(server_url, APP) as client:
        with appnorth.Config(client, tmp_path / "data") as config:
            def fetched() -> bool:
                try:
                    config.refresh()
                except appnorth.NotFoundError:
                    pass
                return config.get_int("a") == 1
            wait_until(fetched, "the hostile answer was taken")
            with pytest.raises(appnorth.NotFoundError):
                config.refresh()
    sent = [r for r in admin.requests(expect=2) if r["path"] == f"/v1/apps/{APP}/config"]
    assert len(sent) >= 2, sent
    for request in sent:
        headers = {k.lower(): v for k, v in request["headers"].items()}
        assert headers.get("if-none-match") in (None, '"7"'), headers
    # Offline, the next open still serves the cached value.
    with appnorth.Client(f"http://127.0.0.1:{closed_port}", APP, api_timeout_ms=500) as offline:
        with appnorth.Config(offline, tmp_path / "data") as config:
            assert config.source[0] == appnorth.CONFIG_TIER_CACHED
            assert config.get_int("a") == 1


# -- class 6: ids in URL paths ------------------------------------------------------

def test_dot_segments_are_refused_as_ids_and_app_ids(server_url: str, admin: Admin) -> None:
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Client(server_url, "..")
    with pytest.raises(appnorth.InvalidArgumentError):
        appnorth.Client(server_url, ".")
    with appnorth.Client(server_url, APP) as client:
        for bad in ("..", "."):
            with pytest.raises(appnorth.InvalidArgumentError):
                client.submit_comment(bad, "hello")
            with pytest.raises(appnorth.InvalidArgumentError):
                client.vote(bad)
            with pytest.raises(appnorth.InvalidArgumentError):
                client.list_comments(bad)
    admin.assert_nothing_sent()


def test_an_id_stays_one_percent_encoded_path_segment(server_url: str, admin: Admin) -> None:
    with appnorth.Client(server_url, APP) as client:
        with pytest.raises(appnorth.NotFoundError):
            client.list_comments("../../boards?x#y%")
    paths = [r["path"] for r in admin.requests(expect=1)]
    assert any(p.startswith(f"/v1/apps/{APP}/ideas/..%2F..%2Fboards%3Fx%23y%25/comments") for p in paths), paths


# -- class 7: the Python binding and deep values -------------------------------------

def test_a_config_nested_2000_deep_reaches_the_listener(server_url: str, admin: Admin, tmp_path: Path) -> None:
    depth = 2000
    admin.publish_raw_config(APP, "{\"deep\":" + "[" * depth + "1" + "]" * depth + "}")
    received: List[Any] = []
    done = threading.Event()
    with appnorth.Client(server_url, APP) as client:
        with appnorth.Config(client, tmp_path / "data") as config:
            def listener(snapshot: Any, changed: Any, tier: Any) -> None:
                received.append((snapshot, changed))
                done.set()
            config.add_listener(listener)
            config.refresh()
            assert done.wait(15), "the listener was called"
            value = config.get_json("deep")
    snapshot, changed = received[-1]
    assert changed == ["deep"]
    for got in (snapshot["deep"], value):
        levels = 0
        while isinstance(got, list):
            got = got[0]
            levels += 1
        assert (levels, got) == (depth, 1)
