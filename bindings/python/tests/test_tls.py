"""HTTPS end to end (HTTP/1.1 and HTTP/2) and the client's trust options,
through the binding.

A throwaway PKI (scripts/make-test-certs.sh, the openssl CLI) and, in this
process: an HTTPS dev server (HTTP/1.1 only), bare TLS listeners with bad
certificates and a forward proxy (devserver/appnorth_proxy.py) that records
what it forwarded; as a subprocess, the HTTP/2 front (devserver/h2front, Go)
for the session's dev server, which logs each request's protocol. Nothing
mocks HTTP or TLS.
"""

from __future__ import annotations

import logging
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest

import appnorth
from appnorth_test_support import APP, REPO_ROOT, Admin

sys.path.insert(0, str(REPO_ROOT / "devserver"))
from appnorth_devserver import DevServer  # noqa: E402
from appnorth_h2front import H2Front  # noqa: E402
from appnorth_proxy import ForwardProxy  # noqa: E402
from appnorth_tls_listeners import TLSListener  # noqa: E402

TIMEOUT_MS = 15_000  # generous: TLS handshakes on a loaded machine
WAIT = 15.0
FAST_CONFIG: Dict[str, Any] = {"poll_interval_ms": 100, "reconnect_backoff_ms": (20, 200)}
FAST_EVENTS: Dict[str, Any] = {"retry_base_delay_ms": 10, "flush_interval_ms": 600_000, "batch_threshold": 1000}
OTHER_PIN = "sha256//" + "A" * 43 + "="


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not reached in {timeout} s"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    subprocess.run([str(REPO_ROOT / "scripts" / "make-test-certs.sh"), str(folder)], check=True, timeout=60)
    return folder


@pytest.fixture(scope="module")
def https_server(pki: Path) -> Iterator[DevServer]:
    with DevServer("127.0.0.1", 0, tls_cert=str(pki / "server.pem"), tls_key=str(pki / "server.key")) as server:
        yield server


@pytest.fixture(scope="module")
def bad_urls(pki: Path) -> Iterator[Dict[str, str]]:
    listeners = {name: TLSListener(str(pki / f"{name}.pem"), str(pki / f"{name}.key")).start()
                 for name in ("expired", "wronghost", "selfsigned")}
    yield {name: f"https://127.0.0.1:{listener.port}" for name, listener in listeners.items()}
    for listener in listeners.values():
        listener.stop()


@pytest.fixture(scope="module")
def h2_front(server_url: str, pki: Path) -> Iterator[H2Front]:
    with H2Front(server_url, str(pki / "server.pem"), str(pki / "server.key")) as front:
        yield front


@pytest.fixture
def tls_admin(https_server: DevServer, pki: Path) -> Admin:
    admin = Admin(https_server.url, ssl.create_default_context(cafile=str(pki / "ca.pem")))
    admin.reset()
    return admin


@pytest.fixture
def proxy() -> Iterator[ForwardProxy]:
    with ForwardProxy() as p:
        yield p


def trusted_client(url: str, pki: Path, **options: Any) -> appnorth.Client:
    return appnorth.Client(url, APP, ca_file=pki / "ca.pem", api_timeout_ms=TIMEOUT_MS,
                           resource_timeout_ms=TIMEOUT_MS, **options)


class Traces(logging.Handler):
    """The client's DEBUG request traces ("HTTP GET /path -> 200 in 3 ms over HTTP/2 (...)")."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: List[str] = []
        self.logger = logging.getLogger(f"appnorth.test.traces.{id(self)}")
        self.logger.setLevel(logging.DEBUG)
        self.logger.propagate = False
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def over(self, protocol: str) -> List[str]:
        return [line for line in self.lines if line.startswith("HTTP ") and f" ms over {protocol} (" in line]


class Recorder:
    def __init__(self) -> None:
        self.values: List[dict] = []
        self._cond = threading.Condition()

    def __call__(self, values: dict, changed: List[str], tier: int) -> None:
        with self._cond:
            self.values.append(values)
            self._cond.notify_all()

    def wait_for(self, expected: dict) -> None:
        with self._cond:
            assert self._cond.wait_for(lambda: expected in self.values, WAIT), self.values


# -- HTTPS end to end --------------------------------------------------------------

def test_reads_writes_events_config_and_stream_over_https(https_server: DevServer, tls_admin: Admin,
                                                          pki: Path, tmp_path: Path) -> None:
    pin = (pki / "server.pin").read_text().strip()
    traces = Traces()
    # In-memory CA plus a matching pin (next to a non-matching one).
    with appnorth.Client(https_server.url, APP, ca_pem=(pki / "ca.pem").read_bytes(),
                         pinned_public_keys=[OTHER_PIN, pin], api_timeout_ms=TIMEOUT_MS,
                         resource_timeout_ms=TIMEOUT_MS, logger=traces.logger) as client:
        _scenario(client, tls_admin, tmp_path)
    # The HTTPS dev server speaks HTTP/1.1 only: ALPN fell back to it.
    # (boards, the flushed idea, the batch, the config fetch; the stream's
    # trace comes when it ends, and a stream closed by the host has none.)
    assert len(traces.over("HTTP/1.1")) >= 4 and traces.over("HTTP/2") == [], traces.lines


def test_reads_writes_events_config_and_stream_over_http2(h2_front: H2Front, admin: Admin, pki: Path,
                                                          tmp_path: Path) -> None:
    seen_before = len(h2_front.lines())
    traces = Traces()
    with trusted_client(h2_front.url, pki, logger=traces.logger) as client:
        _scenario(client, admin, tmp_path)
    assert len(traces.over("HTTP/2")) >= 4 and traces.over("HTTP/1.1") == [], traces.lines
    # At the front: every API request of the scenario, the stream included, came over HTTP/2.
    seen = [line for line in h2_front.lines()[seen_before:] if f" /v1/apps/{APP}/" in line]
    for request in (f"GET /v1/apps/{APP}/boards", f"POST /v1/apps/{APP}/ideas", f"POST /v1/apps/{APP}/events",
                    f"GET /v1/apps/{APP}/config", f"GET /v1/apps/{APP}/config/stream"):
        assert any(line.startswith(f"HTTP/2.0 {request} ") for line in seen), (request, seen)
    assert all(line.startswith("HTTP/2.0 ") for line in seen), seen


def test_a_server_without_http2_gets_http11_over_tls(server_url: str, admin: Admin, pki: Path) -> None:
    """ALPN fallback against the same front with HTTP/2 turned off."""
    traces = Traces()
    with H2Front(server_url, str(pki / "server.pem"), str(pki / "server.key"), h1_only=True) as front, \
            trusted_client(front.url, pki, logger=traces.logger) as client:
        assert client.list_boards()["boards"] == []
        assert [line.split(" conn=")[0] for line in front.lines()] == [f"HTTP/1.1 GET /v1/apps/{APP}/boards"]
    assert len(traces.over("HTTP/1.1")) == 1 and traces.over("HTTP/2") == [], traces.lines


def _scenario(client: appnorth.Client, admin: Admin, tmp_path: Path) -> None:
    """Reads, a queued write and its flush, an event batch, a config fetch
    and the live stream, through `client` against `admin`'s server."""
    board = admin.add_board(APP, "Features")
    assert [b["name"] for b in client.list_boards()["boards"]] == ["Features"]

    with appnorth.Storage.memory() as storage, appnorth.OfflineQueue(storage) as queue:
        admin.outage()
        assert queue.submit_idea(client, board["id"], "Queued over TLS") is False
        admin.clear_faults()
        assert queue.flush(client) == 1
        assert queue.pending_count() == 0
    assert [i["title"] for i in admin.state(APP)["ideas"]] == ["Queued over TLS"]

    with appnorth.Events(client, tmp_path / "events", **FAST_EVENTS) as events:
        events.track("opened", {"screen": "home"})
        events.track("closed")
        assert events.flush(10_000) == 2
    assert [e["name"] for e in admin.state(APP)["events"]] == ["opened", "closed"]

    admin.publish_config(APP, {"theme": "dark"})
    config = appnorth.Config(client, tmp_path / "config", **FAST_CONFIG)
    try:
        config.refresh()
        assert config.get_string("theme") == "dark"
        recorder = Recorder()
        config.add_listener(recorder)
        config.start_live()
        wait_until(lambda: any(r["path"] == f"/v1/apps/{APP}/config/stream" for r in admin.requests()),
                   "the stream connected")
        admin.publish_config(APP, {"theme": "light"})
        recorder.wait_for({"theme": "light"})
    finally:
        config.close()


# -- must fail --------------------------------------------------------------------

def _assert_refused(client: appnorth.Client, reason: str, tmp_path: Path) -> None:
    """A read fails with NetworkError naming the reason, and a queued write
    survives a flush attempt untouched."""
    with pytest.raises(appnorth.NetworkError, match=reason):
        client.list_boards()
    with appnorth.Storage.memory() as storage, appnorth.OfflineQueue(storage) as queue:
        assert queue.submit_idea(client, "b-1", "Never sent") is False
        assert queue.flush(client) == 0
        assert queue.pending_count() == 1
        (entry,) = queue.entries()
        assert entry["kind"] == "idea"


def test_a_certificate_from_an_untrusted_ca_is_refused(https_server: DevServer, tls_admin: Admin, pki: Path,
                                                      tmp_path: Path) -> None:
    # Same server, but the client trusts only an unrelated certificate (not
    # the system store, whose presence varies between machines).
    with appnorth.Client(https_server.url, APP, ca_file=pki / "selfsigned.pem", api_timeout_ms=TIMEOUT_MS) as client:
        _assert_refused(client, "unable to get local issuer certificate", tmp_path)
    assert tls_admin.requests() == []


def test_the_system_store_does_not_trust_the_test_ca(https_server: DevServer, tmp_path: Path) -> None:
    with appnorth.Client(https_server.url, APP, api_timeout_ms=TIMEOUT_MS) as client:
        _assert_refused(client, "certificate", tmp_path)


def test_tls_flags_go_together(pki: Path) -> None:
    from appnorth_devserver import ApiError
    with pytest.raises(ApiError, match="go together"):
        DevServer("127.0.0.1", 0, tls_cert=str(pki / "server.pem"))


def test_a_self_signed_certificate_is_refused(bad_urls: Dict[str, str], pki: Path, tmp_path: Path) -> None:
    with trusted_client(bad_urls["selfsigned"], pki) as client:
        _assert_refused(client, "self-signed certificate", tmp_path)


def test_a_certificate_for_another_host_name_is_refused(bad_urls: Dict[str, str], pki: Path,
                                                        tmp_path: Path) -> None:
    with trusted_client(bad_urls["wronghost"], pki) as client:
        _assert_refused(client, "no alternative certificate subject name matches", tmp_path)


def test_an_expired_certificate_is_refused(bad_urls: Dict[str, str], pki: Path, tmp_path: Path) -> None:
    with trusted_client(bad_urls["expired"], pki) as client:
        _assert_refused(client, "certificate has expired", tmp_path)


def test_a_key_that_matches_no_pin_is_refused(https_server: DevServer, tls_admin: Admin, pki: Path,
                                              tmp_path: Path) -> None:
    with trusted_client(https_server.url, pki, pinned_public_keys=OTHER_PIN) as client:
        _assert_refused(client, "pinned public key", tmp_path)
    assert tls_admin.requests() == []


def test_events_are_kept_when_the_certificate_is_refused(bad_urls: Dict[str, str], pki: Path,
                                                         tmp_path: Path) -> None:
    with trusted_client(bad_urls["expired"], pki) as client, \
            appnorth.Events(client, tmp_path / "events", **FAST_EVENTS) as events:
        events.track("kept")
        with pytest.raises(appnorth.NetworkError, match="certificate has expired"):
            events.flush(5000)
        assert events.stats()["queued"] == 1


# -- proxy -----------------------------------------------------------------------

def test_requests_and_the_config_stream_go_through_an_explicit_proxy(
        server_url: str, admin: Admin, proxy: ForwardProxy, tmp_path: Path) -> None:
    admin.add_board(APP, "Features")
    admin.publish_config(APP, {"theme": "dark"})
    with appnorth.Client(server_url, APP, proxy=proxy.url, proxy_from_environment=False,
                         api_timeout_ms=TIMEOUT_MS, resource_timeout_ms=TIMEOUT_MS) as client:
        assert [b["name"] for b in client.list_boards()["boards"]] == ["Features"]
        config = appnorth.Config(client, tmp_path / "config", **FAST_CONFIG)
        try:
            recorder = Recorder()
            config.add_listener(recorder)
            config.start_live()
            recorder.wait_for({"theme": "dark"})
        finally:
            config.close()
    seen = proxy.seen()
    assert f"GET {server_url}/v1/apps/{APP}/boards" in seen
    assert f"GET {server_url}/v1/apps/{APP}/config/stream" in seen, seen


def test_https_goes_through_the_proxy_as_a_connect_tunnel(https_server: DevServer, tls_admin: Admin,
                                                          pki: Path, proxy: ForwardProxy) -> None:
    with trusted_client(https_server.url, pki, proxy=proxy.url) as client:
        assert client.list_boards()["boards"] == []
    assert proxy.seen() == [f"CONNECT 127.0.0.1:{https_server.port}"]


def test_http2_is_negotiated_inside_the_connect_tunnel(h2_front: H2Front, admin: Admin, pki: Path,
                                                       proxy: ForwardProxy) -> None:
    traces = Traces()
    seen_before = len(h2_front.lines())
    with trusted_client(h2_front.url, pki, proxy=proxy.url, logger=traces.logger) as client:
        assert client.list_boards()["boards"] == []
    assert proxy.seen() == [f"CONNECT 127.0.0.1:{h2_front.port}"]
    assert [line.split(" conn=")[0] for line in h2_front.lines()[seen_before:]] == \
        [f"HTTP/2.0 GET /v1/apps/{APP}/boards"]
    assert len(traces.over("HTTP/2")) == 1, traces.lines


def test_proxy_environment_is_honoured_unless_turned_off(server_url: str, admin: Admin, proxy: ForwardProxy,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", proxy.url)
    with appnorth.Client(server_url, APP, api_timeout_ms=TIMEOUT_MS) as client:
        client.list_boards()
    assert proxy.seen() == [f"GET {server_url}/v1/apps/{APP}/boards"]

    with appnorth.Client(server_url, APP, proxy_from_environment=False, api_timeout_ms=TIMEOUT_MS) as client:
        client.list_boards()
    assert len(proxy.seen()) == 1, "the environment's proxy was used although turned off"
    assert len(admin.requests(expect=2)) == 2


# -- bad input -------------------------------------------------------------------

@pytest.mark.parametrize("options, error", [
    ({"ca_pem": b"not a certificate"}, appnorth.InvalidArgumentError),
    ({"ca_pem": b"x" * ((4 << 20) + 1)}, appnorth.TooLargeError),
    ({"ca_file": ""}, appnorth.InvalidArgumentError),
    ({"ca_file": "/x" * 3000}, appnorth.TooLargeError),
    ({"pinned_public_keys": "sha1//abc"}, appnorth.InvalidArgumentError),
    ({"pinned_public_keys": "sha256//tooshort"}, appnorth.InvalidArgumentError),
    ({"pinned_public_keys": [OTHER_PIN] * 65}, appnorth.InvalidArgumentError),
    ({"pinned_public_keys": b"sha256//\xff"}, appnorth.InvalidUTF8Error),
    ({"proxy": "http://proxy example:3128"}, appnorth.InvalidArgumentError),
    ({"proxy": ""}, appnorth.InvalidArgumentError),
])
def test_bad_trust_options_are_refused(options: Dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        appnorth.Client("https://127.0.0.1:1", APP, **options)


def test_a_missing_ca_file_fails_the_request_not_the_client(https_server: DevServer, tmp_path: Path) -> None:
    with appnorth.Client(https_server.url, APP, ca_file=tmp_path / "absent.pem",
                         api_timeout_ms=TIMEOUT_MS) as client:
        with pytest.raises(appnorth.NetworkError, match="certificate file"):
            client.list_boards()
