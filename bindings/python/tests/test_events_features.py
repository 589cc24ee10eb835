"""The events features of issue 40 through the binding, at the dev server:
automatic sessions on a manual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

import pytest

import appnorth
from appnorth_test_support import APP, Admin

QUIET: Dict[str, Any] = {"retry_base_delay_ms": 10, "flush_interval_ms": 600_000, "batch_threshold": 1000}


def sessions_by_name(admin: Admin) -> Dict[str, List[str]]:
    out: Dict[str, List[str]] = {}
    for event in admin.state(APP)["events"]:
        out.setdefault(event["name"], []).append(event["session_id"])
    return out


def test_a_session_rotates_after_the_idle_timeout_and_after_the_max_length(
        client: appnorth.Client, tmp_path: Path, admin: Admin) -> None:
    clock = appnorth.ManualClock(1_700_000_000_000)
    with appnorth.Events(client, tmp_path, session_idle_timeout_ms=1000, session_max_length_ms=5000,
                         clock=clock, **QUIET) as ev:
        first = ev.session_id
        assert len(first) == 32
        ev.track("a")
        clock.advance(999)
        ev.track("b")
        assert ev.session_id == first
        clock.advance(1000)
        ev.track("after_idle")
        second = ev.session_id
        assert second != first
        for _ in range(6):
            clock.advance(900)
            ev.track("busy")
        third = ev.session_id
        assert third != second, "events every 900 ms: 5,400 ms since the session started"
        ev.flush(10_000)
    got = sessions_by_name(admin)
    assert got["a"] == got["b"] == [first]
    assert got["after_idle"] == [second]
    assert got["busy"] == [second] * 5 + [third]


def test_zero_turns_the_rotation_off_and_start_session_still_works(
        client: appnorth.Client, tmp_path: Path) -> None:
    clock = appnorth.ManualClock(1_700_000_000_000)
    with appnorth.Events(client, tmp_path, session_idle_timeout_ms=0, session_max_length_ms=0,
                         clock=clock, **QUIET) as ev:
        first = ev.session_id
        ev.track("a")
        clock.advance(10 ** 10)
        ev.track("b")
        assert ev.session_id == first
        ev.start_session()
        assert ev.session_id != first


@pytest.mark.parametrize("idle, max_length", [(-1, 0), (0, -5), (2 ** 31, 0)])
def test_bad_session_policies_are_refused(client: appnorth.Client, tmp_path: Path, idle: int,
                                          max_length: int) -> None:
    with pytest.raises((appnorth.InvalidArgumentError, OverflowError, ValueError)):
        appnorth.Events(client, tmp_path, session_idle_timeout_ms=idle, session_max_length_ms=max_length)


def test_clock_must_be_a_manual_clock(client: appnorth.Client, tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        appnorth.Events(client, tmp_path, clock=object())  # type: ignore[arg-type]


def properties_by_name(admin: Admin) -> Dict[str, str]:
    return {event["name"]: event["properties_raw"] for event in admin.state(APP)["events"]}


def test_super_properties_across_two_handles_and_a_restart(client: appnorth.Client, tmp_path: Path,
                                                           admin: Admin) -> None:
    with appnorth.Events(client, tmp_path, **QUIET) as a, appnorth.Events(client, tmp_path, **QUIET) as b:
        a.register({"plan": "pro", "n": 1})
        assert b.super_properties == {"plan": "pro", "n": 1}
        b.track("from_b", {"screen": "home"})
        a.track("override", '{"plan": "free"}')
        b.register_once({"plan": "team", "first": True})
        b.unregister("n")
        a.track("after", None)
        a.flush(10_000)
        b.flush(10_000)
    with appnorth.Events(client, tmp_path, **QUIET) as again:
        assert again.super_properties == {"plan": "pro", "first": True}
        again.track("restarted", {"k": 1})
        again.reset()
        assert again.super_properties == {}
        again.track("after_reset", {"k": 2})
        again.flush(10_000)
    got = properties_by_name(admin)
    assert got["from_b"] == '{"plan":"pro","n":1,"screen": "home"}'
    assert got["override"] == '{"n":1,"plan": "free"}'
    assert got["after"] == '{"plan":"pro","first":true}'
    assert got["restarted"] == '{"plan":"pro","first":true,"k": 1}'
    assert got["after_reset"] == '{"k": 2}'


@pytest.mark.parametrize("bad, error", [
    ("[1]", appnorth.InvalidJSONError),
    ('{"a":', appnorth.InvalidJSONError),
    ({"session_id": "x"}, appnorth.InvalidArgumentError),
    ({"big": "x" * 40_000}, appnorth.TooLargeError),
    (None, TypeError),
])
def test_bad_super_properties_are_refused_and_nothing_is_saved(events_dir: appnorth.Events, bad: Any,
                                                               error: type) -> None:
    with pytest.raises(error):
        events_dir.register(bad)
    assert events_dir.super_properties == {}


@pytest.fixture
def events_dir(client: appnorth.Client, tmp_path: Path) -> Any:
    with appnorth.Events(client, tmp_path, **QUIET) as ev:
        yield ev


def test_before_send_drops_rewrites_and_a_raising_hook_drops(client: appnorth.Client, tmp_path: Path,
                                                              admin: Admin) -> None:
    seen: List[Dict[str, Any]] = []

    def hook(event: Dict[str, Any]) -> Any:
        seen.append(event)
        name = event["name"]
        if name == "secret":
            return None
        if name == "scrub":
            event["properties"].pop("email")
            return event
        if name == "boom":
            raise ValueError("filter bug")
        if name == "bad_replacement":
            return {"nope": 1}
        return event

    with appnorth.Events(client, tmp_path, before_send=hook, **QUIET) as ev:
        ev.register({"plan": "pro"})
        assert ev.track("kept", '{"price": 9.990}') is True
        assert ev.track("secret", {"a": 1}) is False
        assert ev.track("scrub", {"email": "a@b.c", "ok": 1}) is True
        assert ev.track("boom", {"x": 1}) is False
        assert ev.track("bad_replacement") is False
        ev.flush(10_000)
        dropped = ev.stats()["dropped"]
        assert dropped["filtered"] == 3
    assert seen[0]["properties"] == {"plan": "pro", "price": 9.99}
    assert seen[0]["session_id"] and seen[0]["anonymous_id"] and seen[0]["id"]
    got = properties_by_name(admin)
    assert got["kept"] == '{"plan":"pro","price": 9.990}', "kept as the library made it"
    assert got["scrub"] == '{"plan":"pro","ok":1}'
    assert "secret" not in got and "boom" not in got and "bad_replacement" not in got


def test_before_send_must_be_callable(client: appnorth.Client, tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        appnorth.Events(client, tmp_path, before_send=42)  # type: ignore[arg-type]
