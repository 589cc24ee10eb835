"""The jitter options, through the Python classes and the dev server.

``Events(retry_jitter_percent=...)`` (appnorth_events_options_set_retry_jitter)
and ``Config(reconnect_jitter_percent=...)``
(appnorth_config_options_set_reconnect_jitter) tune how far the retry and
reconnect waits are spread; the defaults are 20 % and 50 %. At 0, every wait
is its nominal delay: the server sees each retry no earlier than that, which
is what the fleet measurement (Tests/fleet/fleet.py,
docs/outages-and-fleets.md) compares the shipped behaviour with. With
jitter the config's waits are shortened by up to half and the uploader's
vary by +/- 20 %, so these lower bounds would not hold.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, List

import pytest
from appnorth_test_support import APP, Admin

import appnorth
from appnorth import errors


def _requests(admin: Admin, suffix: str) -> List[Dict[str, Any]]:
    log = admin._call("GET", "/admin/requests?since=0")["requests"]
    return [e for e in log if e["path"] == f"/v1/apps/{APP}{suffix}"]


def _gaps(entries: List[Dict[str, Any]]) -> List[float]:
    """Time between the answer to one request and the next request."""
    return [b["mono_ms"] - (a["mono_ms"] + a["duration_ms"]) for a, b in zip(entries, entries[1:])]


def test_config_without_jitter_waits_each_nominal_reconnect_delay(server_url: str, admin: Admin,
                                                                   tmp_path: Path) -> None:
    admin.publish_config(APP, {"v": 1})
    admin._call("POST", "/admin/faults", {"path_prefix": f"/v1/apps/{APP}/config/stream", "drop": True, "count": 3})
    with appnorth.Client(server_url, APP) as client, \
            appnorth.Config(client, tmp_path, reconnect_backoff_ms=(100, 1000),
                            reconnect_jitter_percent=0) as config:
        config.start_live()
        deadline = time.monotonic() + 20
        while len(_requests(admin, "/config/stream")) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        streams = _requests(admin, "/config/stream")
        assert len(streams) >= 4, streams
        assert [s["fault"] for s in streams[:3]] == ["drop", "drop", "drop"]
        # 1 ms: the log rounds to microseconds and the client sleeps at least its delay.
        for gap, nominal in zip(_gaps(streams[:4]), [100, 200, 400]):
            assert gap >= nominal - 1, (_gaps(streams[:4]), "a reconnect came before its nominal delay")


def test_events_without_jitter_retry_after_exactly_their_nominal_delays(server_url: str, admin: Admin,
                                                                         tmp_path: Path) -> None:
    admin._call("POST", "/admin/faults", {"path_prefix": f"/v1/apps/{APP}/events", "status": 500, "count": 3})
    with appnorth.Client(server_url, APP) as client, \
            appnorth.Events(client, tmp_path, retry_base_delay_ms=100, retry_jitter_percent=0) as events:
        events.track("retried", {"k": 1})
        events.flush(20_000)
        posts = _requests(admin, "/events")
        assert [p["status"] for p in posts] == [500, 500, 500, 200]
        for gap, nominal in zip(_gaps(posts), [100, 200, 400]):
            assert gap >= nominal - 1, (_gaps(posts), "a retry came before its nominal delay")


@pytest.mark.parametrize("percent", [-1, 101, 2**31 - 1])
def test_jitter_percent_outside_0_to_100_is_refused(server_url: str, tmp_path: Path, percent: int) -> None:
    with appnorth.Client(server_url, APP) as client:
        with pytest.raises(errors.InvalidArgumentError, match="percent must be 0 to 100"):
            appnorth.Events(client, tmp_path / "e", retry_jitter_percent=percent)
        with pytest.raises(errors.InvalidArgumentError, match="percent must be 0 to 100"):
            appnorth.Config(client, tmp_path / "c", reconnect_jitter_percent=percent)
