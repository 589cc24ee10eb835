"""Remote control of the event pipeline through the library's own config
(#40 item 6), against the real dev server: the reserved config key
"appnorth.events" reaches an Events made with the same Client, live and,
after a restart offline, from the cached tier; sample_rate 0 and 1 exactly;
blocked events; values out of range refused with the last good kept; the
host's opt-out; bad arguments."""

from __future__ import annotations

import logging
import math
import threading
from pathlib import Path
from typing import Any, Dict, List

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin

QUIET: Dict[str, Any] = {"retry_base_delay_ms": 10, "flush_interval_ms": 3_600_000, "batch_threshold": 10_000}
FAST_CONFIG: Dict[str, Any] = {"poll_interval_ms": 100, "reconnect_backoff_ms": (20, 200)}


class Changes:
    """Counts config listener calls; wait(n) until n arrived."""

    def __init__(self) -> None:
        self.count = 0
        self.cond = threading.Condition()

    def __call__(self, *args: Any) -> None:
        with self.cond:
            self.count += 1
            self.cond.notify_all()

    def wait(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.count >= n, timeout=10), f"{self.count} of {n} changes"


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def refusals(self) -> List[str]:
        return [m for m in self.messages if "appnorth.events refused" in m]


def settings(events: appnorth.Events) -> Dict[str, Any]:
    result: Dict[str, Any] = events.stats()["settings"]
    return result


def stored(admin: Admin) -> List[str]:
    return [e["name"] for e in admin.state(APP)["events"]]


def test_a_remote_off_switch_arrives_live_then_holds_after_an_offline_restart(
        client: appnorth.Client, server_url: str, admin: Admin, tmp_path: Path) -> None:
    admin.publish_config(APP, {"theme": "dark"})
    data = tmp_path / "data"
    changes = Changes()
    with appnorth.Config(client, data, **FAST_CONFIG) as config, appnorth.Events(client, data, **QUIET) as events:
        config.add_listener(changes)
        config.start_live()
        changes.wait(1)
        assert events.track("before") is True
        admin.publish_config(APP, {"theme": "dark", "appnorth.events": {"enabled": False}})
        changes.wait(2)
        # The handle was switched before the listener ran.
        assert events.track("during") is False
        assert events.stats()["dropped"]["disabled"] == 1
        with pytest.raises(appnorth.WrongStateError, match="switched off"):
            events.flush(5000)
        assert events.stats()["queued"] == 1, "the event queued before stays queued"
        assert settings(events)["enabled"] is False and settings(events)["remote"] is True
        events.close(0)

    # Restart offline: the cached tier keeps it off.
    admin.outage(1000)
    with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS) as again:
        with appnorth.Config(again, data, **FAST_CONFIG) as config:
            assert config.source.tier == appnorth.CONFIG_TIER_CACHED
            with appnorth.Events(again, data, **QUIET) as events:
                assert events.track("offline") is False
                assert events.stats()["dropped"]["disabled"] == 1
                events.close(0)
            admin.clear_faults()
            assert stored(admin) == [], "nothing was uploaded while off"
            # Switched on again: the queued event goes with the new one.
            with appnorth.Events(again, data, **QUIET) as events:
                admin.publish_config(APP, {"appnorth.events": {"enabled": True}})
                config.refresh()
                assert events.track("after") is True
                events.flush(5000)
                assert sorted(stored(admin)) == ["after", "before"]


def test_sample_rate_zero_and_one_exactly(client: appnorth.Client, admin: Admin, tmp_path: Path) -> None:
    data = tmp_path / "data"
    with appnorth.Events(client, data, sample_rate=0.0, **QUIET) as events:
        assert [events.track("zero") for _ in range(10)] == [False] * 10
        assert events.stats()["dropped"]["sampled"] == 10
        assert settings(events)["sampled_in"] is False
        events.close(0)
    with appnorth.Events(client, data, sample_rate=1, **QUIET) as events:
        assert [events.track("one") for _ in range(10)] == [True] * 10
        # The key over the option: 0, then 1.
        admin.publish_config(APP, {"appnorth.events": {"sample_rate": 0}})
        with appnorth.Config(client, data, **FAST_CONFIG) as config:
            config.refresh()
            assert events.track("zero") is False
            admin.publish_config(APP, {"appnorth.events": {"sample_rate": 1.0}})
            config.refresh()
            assert events.track("one") is True
        assert events.stats()["dropped"]["sampled"] == 1
        events.flush(5000)
        assert stored(admin) == ["one"] * 11


def test_blocked_events_and_out_of_range_values(server_url: str, admin: Admin, tmp_path: Path) -> None:
    lines = Lines()
    log = logging.getLogger("test.remote_settings")
    log.addHandler(lines)
    log.setLevel(logging.DEBUG)
    data = tmp_path / "data"
    admin.publish_config(APP, {"appnorth.events": {"blocked_events": ["spam"], "batch_threshold": 5}})
    try:
        with appnorth.Client(server_url, APP, logger=log, api_timeout_ms=FAST_TIMEOUT_MS) as client, \
                appnorth.Config(client, data, **FAST_CONFIG) as config, \
                appnorth.Events(client, data, **QUIET) as events:
            config.refresh()
            assert events.track("spam") is False and events.track("signal") is True
            assert events.stats()["dropped"]["blocked"] == 1
            events.flush(5000)
            assert stored(admin) == ["signal"]
            admin.publish_config(APP, {"appnorth.events": {"blocked_events": "spam", "batch_threshold": 0,
                                                           "sample_rate": -1, "enabled": "yes"}})
            config.refresh()
            assert len(lines.refusals()) == 1, lines.refusals()
            now = settings(events)
            assert now["blocked_events"] == ["spam"] and now["batch_threshold"] == 5, "the last good values stay"
            assert now["sample_rate"] == 1.0 and now["enabled"] is True, "never set: the options'"
            assert events.track("spam") is False
    finally:
        log.removeHandler(lines)


def test_a_host_that_opts_out_ignores_the_key(client: appnorth.Client, admin: Admin, tmp_path: Path) -> None:
    admin.publish_config(APP, {"appnorth.events": {"enabled": False}})
    data = tmp_path / "data"
    with appnorth.Config(client, data, **FAST_CONFIG) as config, \
            appnorth.Events(client, data, remote_settings=False, **QUIET) as events:
        config.refresh()
        assert events.track("kept") is True
        events.flush(5000)
        assert stored(admin) == ["kept"]
        assert settings(events)["remote"] is False


@pytest.mark.parametrize("rate", [-0.01, 1.01, math.nan, math.inf])
def test_a_sample_rate_out_of_range_is_refused(client: appnorth.Client, tmp_path: Path, rate: float) -> None:
    with pytest.raises(appnorth.InvalidArgumentError, match="sample rate"):
        appnorth.Events(client, tmp_path, sample_rate=rate)


def test_a_sample_rate_of_another_type_is_refused(client: appnorth.Client, tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        appnorth.Events(client, tmp_path, sample_rate="0.5")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        appnorth.Events(client, tmp_path, sample_rate=True)
