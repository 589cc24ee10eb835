"""DevServer: the facade that wires storage, endpoints and the HTTP server."""

from __future__ import annotations

import ssl
import threading
from typing import Any

from .protocol import ApiError, DEFAULT_EVENTS_MAX_BODY, DEFAULT_SSE_KEEPALIVE, REQUEST_LOG_LIMIT
from .storage import Storage
from .faults import FaultQueue
from .requestlog import RequestLog
from .confighub import ConfigHub
from .settings import Settings
from .api import ApiEndpoints
from .admin import AdminEndpoints
from .routing import build_router
from .httpd import _HTTPServer


class DevServer:
    """The development server: storage + endpoints + HTTP listener.

    start() binds and serves on a daemon thread; stop() closes the listener,
    every open connection (SSE streams included) and the database."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, db_path: str | None = None, *,
                 seed_demo: bool = False, events_max_body: int = DEFAULT_EVENTS_MAX_BODY,
                 sse_keepalive: float = DEFAULT_SSE_KEEPALIVE, verbose: bool = False,
                 tls_cert: str | None = None, tls_key: str | None = None,
                 faults: list[dict] | None = None, request_log_limit: int = REQUEST_LOG_LIMIT):
        self.host = host
        # HTTPS when given a PEM certificate (chain) and its key.
        self.tls_context: ssl.SSLContext | None = None
        if tls_cert or tls_key:
            if not (tls_cert and tls_key):
                raise ApiError(400, "invalid_argument", "--tls-cert and --tls-key go together")
            self.tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.tls_context.load_cert_chain(tls_cert, tls_key)
        self.requested_port = port
        self.seed_demo = seed_demo
        self.verbose = verbose
        self._initial_settings = {"events_max_body": events_max_body, "sse_keepalive": sse_keepalive,
                                  "rejected_event_names": [], "poisoned_event_names": [], "accept_gzip": True,
                                  "gzip_responses": False}
        self.settings = Settings()
        self.settings.update(dict(self._initial_settings))
        self.store = Storage(db_path)
        self.hub = ConfigHub()
        self.faults = FaultQueue()
        # Faults armed by start(), before the first connection is accepted:
        # a server restarted after an outage can answer 503 from its first
        # request on (for_ms gives the window).
        for spec in faults or []:
            FaultQueue._parse(spec)  # a bad spec is refused here, not at start()
        self._startup_faults = list(faults or [])
        if not 1 <= request_log_limit <= 10_000_000:
            raise ApiError(400, "invalid_argument", "the request log limit must be 1-10000000")
        self.request_log = RequestLog(request_log_limit)
        self.stopped = threading.Event()
        #: Bumped by every reset: a request that a delay fault held across a
        #: reset is dropped instead of applied to the next test's state.
        self.resets = 0
        self.router = build_router(ApiEndpoints(self), AdminEndpoints(self))
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------

    def start(self) -> "DevServer":
        if self.seed_demo:
            self.store.seed_demo()
        self._httpd = _HTTPServer((self.host, self.requested_port), self)
        for spec in self._startup_faults:
            self.faults.add(spec)
        if self.tls_context is not None:
            self._httpd.socket = self.tls_context.wrap_socket(self._httpd.socket, server_side=True,
                                                              do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="appnorth-devserver", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None or self.stopped.is_set():
            return
        self.stopped.set()
        self.hub.stop()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_connections()
        self._thread.join(timeout=5)
        self.store.close()

    def __enter__(self) -> "DevServer":
        return self.start() if self._httpd is None else self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        scheme = "https" if self.tls_context is not None else "http"
        return f"{scheme}://{host}:{self.port}"

    # -- admin operations -------------------------------------------------

    def reset(self, seed_demo: bool = False) -> None:
        self.resets += 1
        self.store.reset()
        self.faults.clear()
        self.request_log.clear()
        self.settings.update(dict(self._initial_settings))
        self.hub.reset()
        self.faults.release()  # a request held across the reset is dropped now, unanswered
        if seed_demo:
            self.store.seed_demo()
