"""``Events.pending()`` (appnorth_events_pending) against the real dev
server: the queued events after an offline burst, oldest first and as the
server then receives them; bad arguments; a closed queue."""

from __future__ import annotations

import pytest

import appnorth
from appnorth_test_support import APP, Admin

QUIET: dict = {"flush_interval_ms": 3_600_000, "batch_threshold": 10_000}


def test_pending_after_an_offline_burst(client: appnorth.Client, admin: Admin, tmp_path) -> None:
    with appnorth.Events(client, tmp_path, **QUIET) as events:
        assert events.pending() == []
        admin.outage()
        for i in range(20):
            events.track("burst", {"i": i, "price": 9.99})
        with pytest.raises(appnorth.AppNorthError):
            events.flush(5000)
        pending = events.pending()
        assert [event["properties"]["i"] for event in pending] == list(range(20)), "oldest first"
        assert all(event["name"] == "burst" and event["id"] for event in pending)
        assert events.pending(max=3) == pending[:3]
        admin.clear_faults()
        assert events.flush(10000) == 20
        stored = admin.state(APP)["events"]
        assert sorted(e["id"] for e in stored) == sorted(e["id"] for e in pending), "what the server received"
        assert events.pending() == []


def test_bad_arguments_and_a_closed_queue(client: appnorth.Client, tmp_path) -> None:
    events = appnorth.Events(client, tmp_path, **QUIET)
    with pytest.raises(appnorth.InvalidArgumentError, match="max"):
        events.pending(0)
    with pytest.raises(appnorth.InvalidArgumentError):
        events.pending(-1)
    with pytest.raises((OverflowError, ValueError, appnorth.InvalidArgumentError)):
        events.pending(2**40)
    assert events.pending(2**31 - 1) == []
    events.close()
    with pytest.raises(appnorth.WrongStateError):
        events.pending()
