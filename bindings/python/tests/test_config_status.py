"""The config's data-source status through the binding (``Config.status``,
``Config.on_status``), against the real dev server: a status listener in
dispatch mode through an outage (the server drops every config connection)
and a recovery, every call on the dispatching thread; a 401 kept as the last
error after a recovery; bad arguments."""

from __future__ import annotations

import select
import threading
import time
from typing import List

import pytest

import appnorth
from appnorth_test_support import APP, FAST_TIMEOUT_MS, Admin

FAST: dict = {"poll_interval_ms": 100, "reconnect_backoff_ms": (20, 200)}


def dispatch_until(client: appnorth.Client, seen: List[appnorth.ConfigStatus], state: int,
                   timeout: float = 15.0) -> bool:
    """Dispatches (waiting on the descriptor) until a listener call saw
    ``state``; the timeout only catches a hang."""
    fd = client.dispatch_fd()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if seen and seen[-1].state == state:
            return True
        select.select([fd], [], [], 0.02)
        client.dispatch()
    return bool(seen) and seen[-1].state == state


def test_status_listener_through_an_outage_and_a_recovery_in_dispatch_mode(
        server_url: str, admin: Admin, tmp_path) -> None:
    admin.publish_config(APP, {"level": 1})
    seen: List[appnorth.ConfigStatus] = []
    threads: List[str] = []
    with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS, resource_timeout_ms=FAST_TIMEOUT_MS,
                         dispatch_mode=True, logger=False) as client:
        with appnorth.Config(client, tmp_path, **FAST) as config:
            assert config.status.state == appnorth.ConfigState.INITIALIZING
            assert config.status.last_error is None and config.status.last_error_ms == 0

            @config.on_status
            def record(status: appnorth.ConfigStatus) -> None:
                seen.append(status)
                threads.append(threading.current_thread().name)

            admin.add_fault(path_prefix=f"/v1/apps/{APP}/config", drop=True, count=100000)
            config.start_live()
            assert dispatch_until(client, seen, appnorth.CONFIG_STATE_OFFLINE), seen
            offline = seen[-1]
            assert isinstance(offline.last_error, appnorth.NetworkError)
            assert offline.last_error.http_status == 0 and offline.last_error_ms >= offline.since_ms > 0

            admin.clear_faults()
            assert dispatch_until(client, seen, appnorth.CONFIG_STATE_VALID), seen
            assert isinstance(seen[-1].last_error, appnorth.NetworkError), "kept after the recovery"
            assert (config.status.state, config.status.since_ms) == (seen[-1].state, seen[-1].since_ms)

            config.stop_live()
            assert dispatch_until(client, seen, appnorth.CONFIG_STATE_OFF), seen
            assert set(threads) == {threading.current_thread().name}

            config.remove_status_listener(record)
            calls = len(seen)
            config.refresh()
            client.dispatch()
            assert len(seen) == calls, "a removed listener is not called"


def test_a_refused_credential_stays_the_last_error(server_url: str, admin: Admin, tmp_path) -> None:
    admin.publish_config(APP, {"level": 1})
    with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS, resource_timeout_ms=FAST_TIMEOUT_MS,
                         logger=False) as client, appnorth.Config(client, tmp_path, **FAST) as config:
        admin.add_fault(path_prefix=f"/v1/apps/{APP}/config", status=401, count=1)
        with pytest.raises(appnorth.AuthenticationError):
            config.refresh()
        status = config.status
        assert status.state == appnorth.ConfigState.INTERRUPTED
        assert isinstance(status.last_error, appnorth.AuthenticationError)
        assert status.last_error.http_status == 401 and str(status.last_error).startswith("HTTP 401")
        config.refresh()  # the host's own refresh is not held back
        assert config.status.state == appnorth.ConfigState.VALID
        assert config.status.last_error.http_status == 401
        assert appnorth.CONFIG_AUTH_HOLD_MS == 300000


def test_bad_arguments(client: appnorth.Client, tmp_path) -> None:
    with appnorth.Config(client, tmp_path) as config:
        with pytest.raises(TypeError):
            config.add_status_listener(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            config.remove_status_listener("token")  # type: ignore[arg-type]
        with pytest.raises(appnorth.InvalidArgumentError):
            config.remove_status_listener(12345)
        with pytest.raises(appnorth.InvalidArgumentError):
            config.remove_status_listener(lambda status: None)
        token = config.add_status_listener(lambda status: None)
        config.remove_status_listener(token)
        with pytest.raises(appnorth.InvalidArgumentError):
            config.remove_status_listener(token)
    with pytest.raises(appnorth.WrongStateError):
        config.status
