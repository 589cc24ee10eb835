"""Compressed uploads through the binding against the real dev server:
event batches go gzip-encoded and are stored once, small writes stay
identity and large ones are compressed, a 415 answer to gzip is taken as
"this server does not do gzip" for the rest of the client's life, and
``compress_uploads=False`` never compresses."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin

QUIET: Dict[str, Any] = {"retry_base_delay_ms": 10, "flush_interval_ms": 600_000, "batch_threshold": 1000}
EVENTS_PATH = f"/v1/apps/{APP}/events"


def posts(admin: Admin, path: str) -> List[Dict[str, Any]]:
    # The server logs each request before answering it.
    return [r for r in admin.requests() if r["method"] == "POST" and r["path"] == path]


def status_and_encoding(log: List[Dict[str, Any]]) -> List[tuple]:
    return [(r["status"], r["content_encoding"]) for r in log]


def test_event_batches_arrive_gzip_encoded_and_are_stored_once(client: appnorth.Client, tmp_path: Path,
                                                                admin: Admin) -> None:
    with appnorth.Events(client, tmp_path / "data", **QUIET) as events:
        events.set_network_type(appnorth.NETWORK_WIFI)
        for i in range(150):
            events.track("screen_view", {"screen": "home", "i": i})
        events.flush(10_000)
    log = posts(admin, EVENTS_PATH)
    assert status_and_encoding(log) == [(200, "gzip"), (200, "gzip")]
    assert all(r["body_size"] > 3 * r["wire_size"] > 0 for r in log), log
    stored = admin.state(APP)["events"]
    assert len(stored) == 150 and len({e["id"] for e in stored}) == 150
    assert stored[-1]["properties"] == {"screen": "home", "i": 149}


def test_small_writes_stay_identity_and_large_writes_are_compressed(client: appnorth.Client,
                                                                     admin: Admin) -> None:
    board = admin.add_board(APP, "Features")
    idea = admin.add_idea(APP, board["id"], "Dark mode")
    long = "a longer comment, " * 100
    client.submit_comment(idea["id"], "+1")
    client.submit_comment(idea["id"], long)
    log = posts(admin, f"/v1/apps/{APP}/ideas/{idea['id']}/comments")
    assert status_and_encoding(log) == [(201, "identity"), (201, "gzip")]
    assert log[1]["wire_size"] < appnorth.GZIP_WRITE_THRESHOLD_BYTES <= log[1]["body_size"]
    assert [c["body"] for c in admin.state(APP)["comments"]] == ["+1", long]


def test_a_415_to_gzip_falls_back_to_identity_and_is_remembered(client: appnorth.Client, tmp_path: Path,
                                                                 admin: Admin) -> None:
    admin.settings(accept_gzip=False)
    with appnorth.Events(client, tmp_path / "data", **QUIET) as events:
        for i in range(3):
            events.track(f"e{i}")
        events.flush(10_000)
        assert status_and_encoding(posts(admin, EVENTS_PATH)) == [(415, "gzip"), (200, "identity")]
        events.track("e3")
        events.flush(10_000)
        assert status_and_encoding(posts(admin, EVENTS_PATH)) == [(415, "gzip"), (200, "identity"),
                                                                  (200, "identity")]
        assert events.stats()["queued"] == 0
    # A large write on the same client goes uncompressed at once.
    client.submit_feedback("long feedback " * 200, idempotency_key="fb-1")
    assert status_and_encoding(posts(admin, f"/v1/apps/{APP}/feedback")) == [(201, "identity")]
    stored = admin.state(APP)["events"]
    assert sorted(e["name"] for e in stored) == ["e0", "e1", "e2", "e3"]


def test_compress_uploads_false_never_compresses(server_url: str, tmp_path: Path, admin: Admin) -> None:
    with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS, compress_uploads=False) as client, \
            appnorth.Events(client, tmp_path / "data", **QUIET) as events:
        for i in range(20):
            events.track(f"e{i}")
        events.flush(10_000)
    assert status_and_encoding(posts(admin, EVENTS_PATH)) == [(200, "identity")]


def test_compress_uploads_must_be_a_bool(server_url: str) -> None:
    with pytest.raises(TypeError):
        appnorth.Client(server_url, APP, compress_uploads=1)  # type: ignore[arg-type]
