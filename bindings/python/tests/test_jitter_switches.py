"""The test-only jitter switches, through the C ABI from Python.

appnorth_events_options_set_jitter_for_testing() and
appnorth_config_options_set_jitter_for_testing() exist so that the fleet
measurement (Tests/fleet/fleet.py, docs/outages-and-fleets.md) can compare
the shipped behaviour with retries in lockstep. With the switch at 0, every
wait is its nominal delay: the server sees each retry no earlier than that.
With jitter (the default) the config's waits are shortened by up to half and
the uploader's vary by +/- 20 %, so these lower bounds would not hold.

The raw ctypes view (as in test_ranges.py) is used because the switches are
for tests and benchmarks and have no place in the Python classes.
"""

from __future__ import annotations

import ctypes
import time
from ctypes import c_void_p
from pathlib import Path
from typing import Any, Dict, List

from appnorth_test_support import APP, Admin
from test_ranges import OK, Raw

import appnorth


def _requests(admin: Admin, suffix: str) -> List[Dict[str, Any]]:
    log = admin._call("GET", "/admin/requests?since=0")["requests"]
    return [e for e in log if e["path"] == f"/v1/apps/{APP}{suffix}"]


def _gaps(entries: List[Dict[str, Any]]) -> List[float]:
    """Time between the answer to one request and the next request."""
    return [b["mono_ms"] - (a["mono_ms"] + a["duration_ms"]) for a, b in zip(entries, entries[1:])]


class _Client:
    def __init__(self, raw: Raw, url: str) -> None:
        self.raw, self.err = raw, appnorth._lib.appnorth_error()
        self.e = ctypes.byref(self.err)
        options = raw.appnorth_client_options_new()
        assert raw.appnorth_client_options_set_api_url(options, url.encode(), self.e) == OK
        assert raw.appnorth_client_options_set_app_id(options, APP.encode(), self.e) == OK
        self.handle = c_void_p()
        assert raw.appnorth_client_new(options, ctypes.byref(self.handle), self.e) == OK
        raw.appnorth_client_options_free(options)

    def free(self) -> None:
        self.raw.appnorth_client_free(self.handle)


def test_config_without_jitter_waits_each_nominal_reconnect_delay(server_url: str, admin: Admin,
                                                                   tmp_path: Path) -> None:
    raw = Raw()
    admin.publish_config(APP, {"v": 1})
    admin._call("POST", "/admin/faults", {"path_prefix": f"/v1/apps/{APP}/config/stream", "drop": True, "count": 3})
    client = _Client(raw, server_url)
    e = client.e
    options = raw.appnorth_config_options_new()
    assert raw.appnorth_config_options_set_client(options, client.handle, e) == OK
    assert raw.appnorth_config_options_set_data_dir(options, str(tmp_path).encode(), e) == OK
    assert raw.appnorth_config_options_set_jitter_for_testing(options, 0, e) == OK
    # After the switch: setting the backoff keeps the jitter off.
    assert raw.appnorth_config_options_set_reconnect_backoff_ms(options, 100, 1000, e) == OK
    config = c_void_p()
    assert raw.appnorth_config_new(options, ctypes.byref(config), e) == OK
    raw.appnorth_config_options_free(options)
    try:
        assert raw.appnorth_config_start_live(config, e) == OK
        deadline = time.monotonic() + 20
        while len(_requests(admin, "/config/stream")) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        streams = _requests(admin, "/config/stream")
        assert len(streams) >= 4, streams
        assert [s["fault"] for s in streams[:3]] == ["drop", "drop", "drop"]
        # 1 ms: the log rounds to microseconds and the client sleeps at least its delay.
        for gap, nominal in zip(_gaps(streams[:4]), [100, 200, 400]):
            assert gap >= nominal - 1, (_gaps(streams[:4]), "a reconnect came before its nominal delay")
    finally:
        raw.appnorth_config_free(config)
        client.free()


def test_events_without_jitter_retry_after_exactly_their_nominal_delays(server_url: str, admin: Admin,
                                                                         tmp_path: Path) -> None:
    raw = Raw()
    admin._call("POST", "/admin/faults", {"path_prefix": f"/v1/apps/{APP}/events", "status": 500, "count": 3})
    client = _Client(raw, server_url)
    e = client.e
    options = raw.appnorth_events_options_new()
    assert raw.appnorth_events_options_set_client(options, client.handle, e) == OK
    assert raw.appnorth_events_options_set_data_dir(options, str(tmp_path).encode(), e) == OK
    assert raw.appnorth_events_options_set_retry(options, 100, 3, 120_000, 5, e) == OK
    assert raw.appnorth_events_options_set_jitter_for_testing(options, 0, e) == OK
    events = c_void_p()
    assert raw.appnorth_events_new(options, ctypes.byref(events), e) == OK
    raw.appnorth_events_options_free(options)
    try:
        queued = ctypes.c_int32()
        assert raw.appnorth_events_track(events, b"retried", b'{"k":1}', ctypes.byref(queued), e) == OK
        assert raw.appnorth_events_flush(events, 20_000, e) == OK, client.err.message
        posts = _requests(admin, "/events")
        assert [p["status"] for p in posts] == [500, 500, 500, 200]
        for gap, nominal in zip(_gaps(posts), [100, 200, 400]):
            assert gap >= nominal - 1, (_gaps(posts), "a retry came before its nominal delay")
    finally:
        raw.appnorth_events_free(events)
        client.free()
