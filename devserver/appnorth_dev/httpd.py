"""The HTTP layer: request handler, tracked connections, TLS wrapping."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import select
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
import zlib
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from .protocol import (
    ApiError, ERROR_CODES, MAX_BODY, OVERSIZE_DRAIN_SECONDS, Request, Response, SERVER_NAME,
    SSE_DISCONNECT_POLL, StreamResponse, error_body, now_ms
)
from .faults import Fault
from .confighub import sse_event
from .routing import EVENTS_PATH_RE, is_admin_path, is_loopback

if TYPE_CHECKING:  # only for annotations: server imports this module
    from .server import DevServer


class _Handler(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 plumbing: bodies, limits, faults, logging, responses and SSE.
    Endpoint logic lives in ApiEndpoints / AdminEndpoints."""

    protocol_version = "HTTP/1.1"
    server_version = SERVER_NAME
    sys_version = ""
    disable_nagle_algorithm = True  # small SSE writes must leave at once
    server: "_HTTPServer"

    # -- entry points -------------------------------------------------------

    def _dispatch(self) -> None:
        try:
            self._handle()
        except OSError:
            # The client went away mid-response; nothing left to tell it.
            self.close_connection = True
        except Exception:  # noqa: BLE001 - e.g. the database closed under a stream at stop()
            self.close_connection = True
            if not self.server.dev.stopped.is_set():
                traceback.print_exc(file=sys.stderr)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _dispatch

    def _handle(self) -> None:
        started = self._started = time.monotonic()
        split = urlsplit(self.path)
        log = None if is_admin_path(split.path) else {
            "method": self.command, "path": split.path, "query": split.query,
            "headers": self._logged_headers(), "body_size": 0, "wire_size": 0,
            "content_encoding": "identity", "status": None,
            "fault": None, "time_ms": now_ms(), "mono_ms": round(started * 1000, 3), "duration_ms": 0}
        response: Response | StreamResponse | None = None
        try:
            response = self._respond(split.path, split.query, log)
            if isinstance(response, StreamResponse):
                if log is not None:  # log the stream as soon as it opens
                    log["status"] = 200
                    self._finish_log(log, started)
                    log = None
                self._run_stream(response)
            elif response is not None:
                if log is not None:
                    # Log before answering: a client that got its answer
                    # must find its request in the log.
                    log["status"] = response.status
                    if response.log:
                        log.update(response.log)
                    retry_after = next((v for n, v in response.headers if n.lower() == "retry-after"), None)
                    if retry_after is not None:
                        log["retry_after"] = retry_after
                    self._finish_log(log, started)
                    log = None
                self._send(response)
        finally:
            if log is not None:
                self._finish_log(log, started)
            if self.server.dev.verbose:
                status = 200 if isinstance(response, StreamResponse) else getattr(response, "status", "-")
                self.log_message('"%s %s" %s', self.command, self.path, status)

    def _respond(self, path: str, query: str, log: dict | None) -> Response | StreamResponse | None:
        """The response for this request, or None when it was already answered
        (oversized body) or deliberately left unanswered (drop fault)."""
        dev = self.server.dev
        try:
            if log is None and not is_loopback(self.client_address[0]):
                raise ApiError(403, "forbidden", "admin endpoints are loopback-only", close=True)
            body = self._read_body(self._body_limit(path), log)
            if log is not None:  # faults never apply to /admin
                fault = dev.faults.take(self.command, path)
                if fault is not None:
                    log["fault"] = fault.kind
                    if fault.delay_ms:  # a slow server, then its answer (or none)
                        resets = dev.resets
                        dev.faults.hold(fault.delay_ms / 1000, dev.stopped)
                        if dev.resets != resets:
                            # Reset while held: it belongs to a test that has
                            # ended; storing it would leak into the next one.
                            self.close_connection = True
                            return None
                    if fault.kind in ("drop", "endless_line", "raw_response"):
                        # Log before the connection closes: a client that saw
                        # the drop must find its request in the log.
                        self._finish_log(log, self._started)
                    response = self._apply_fault(fault)
                    if response is not None or fault.kind in ("drop", "endless_line", "raw_response"):
                        return response
            func, params = dev.router.resolve(self.command, path)
            params_query = dict(parse_qsl(query, keep_blank_values=True))
            return func(Request(self.command, path, params_query, self.headers, body, params))
        except _AlreadyAnswered as exc:
            if log is not None:
                log["status"] = exc.status
            return None
        except ApiError as exc:
            if exc.close:
                self.close_connection = True
            return Response(exc.status, error_body(exc.code, exc.message, exc.extra), exc.headers)
        except OSError:
            raise
        except Exception:  # noqa: BLE001 - a bug must never reach the client as a traceback
            traceback.print_exc(file=sys.stderr)
            return Response(500, error_body("server_error", "internal error in the dev server"))

    def _finish_log(self, log: dict, started: float) -> None:
        if "seq" in log:  # already logged (a drop fault logs before closing)
            return
        log["duration_ms"] = round((time.monotonic() - started) * 1000, 3)
        self.server.dev.request_log.add(log)

    def _logged_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            if name.lower() == "authorization":
                value = "Bearer ***"
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return headers

    # -- bodies ---------------------------------------------------------------

    def _body_limit(self, path: str) -> int:
        if self.command == "POST" and EVENTS_PATH_RE.match(path):
            return min(self.server.dev.settings.events_max_body, MAX_BODY)
        return MAX_BODY

    def _declared_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        if value is None:
            return None
        value = value.strip()
        if not value.isdigit():
            raise ApiError(400, "validation", "invalid Content-Length", close=True)
        return int(value)

    def _read_body(self, limit: int, log: dict | None) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            body = self._read_chunked(limit, log)
        else:
            length = self._declared_length() or 0
            if log is not None:
                log["body_size"] = log["wire_size"] = length
            if length > limit:
                self._reject_oversize(limit, log)
            body = self.rfile.read(length) if length else b""
            if len(body) < length:
                raise ApiError(400, "validation", "request body shorter than Content-Length", close=True)
        if log is not None:
            log["body_size"] = log["wire_size"] = len(body)
        body = self._decode_body(body, limit, log)
        if log is not None:
            log["body_size"] = len(body)
        return body

    def _decode_body(self, wire: bytes, limit: int, log: dict | None) -> bytes:
        """The body as sent before its Content-Encoding: identity or one
        gzip member (415 for any other encoding, or for gzip when the
        accept_gzip setting is off; 400 for a corrupt one). The decoded
        body obeys the same size limit as a plain one (413)."""
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if log is not None:
            log["content_encoding"] = encoding[:64]
        if encoding == "identity":
            return wire
        if encoding not in ("gzip", "x-gzip") or not self.server.dev.settings.accept_gzip:
            raise ApiError(415, "unsupported_media_type",
                           f"Content-Encoding '{encoding[:64]}' is not accepted here; send the body uncompressed")
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            body = inflater.decompress(wire, limit + 1)  # stops one byte past the limit: no gzip bomb
        except zlib.error as exc:
            raise ApiError(400, "validation", f"corrupt gzip body: {exc}") from None
        if len(body) > limit:
            raise ApiError(413, "payload_too_large", f"decompressed request body exceeds {limit} bytes")
        if not inflater.eof or inflater.unused_data:
            raise ApiError(400, "validation", "corrupt gzip body: truncated, or data after the gzip member")
        return body

    def _read_chunked(self, limit: int, log: dict | None) -> bytes:
        parts, total = [], 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ApiError(400, "validation", "malformed chunked body", close=True) from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(parts)
            total += size
            if total > limit:
                self._reject_oversize(limit, log)
            parts.append(self.rfile.read(size))
            self.rfile.readline(3)

    def _reject_oversize(self, limit: int, log: dict | None) -> None:
        """Answer 413 without reading the body, then close. A short, bounded
        drain afterwards lets a client that is still sending see the 413
        instead of a connection reset."""
        if log is not None:  # log before answering, as _handle does
            log["status"] = 413
            self._finish_log(log, self._started)
        self._send(Response(413, error_body("payload_too_large", f"request body exceeds {limit} bytes")),
                   close=True)
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(0.2)
            deadline = time.monotonic() + OVERSIZE_DRAIN_SECONDS
            while time.monotonic() < deadline and self.connection.recv(65536):
                pass
        raise _AlreadyAnswered(413)

    def handle_expect_100(self) -> bool:
        # Refuse an oversized body before the client sends it.
        try:
            path = urlsplit(self.path).path
            length = self._declared_length()
            if length is not None and length > self._body_limit(path):
                log = None if is_admin_path(path) else {
                    "method": self.command, "path": path, "query": urlsplit(self.path).query,
                    "headers": self._logged_headers(), "body_size": length, "wire_size": length,
                    "content_encoding": (self.headers.get("Content-Encoding") or "identity").strip().lower()[:64],
                    "status": 413,
                    "fault": None, "time_ms": now_ms(), "mono_ms": round(time.monotonic() * 1000, 3),
                    "duration_ms": 0}
                if log is not None:  # log before answering, as _handle does
                    self.server.dev.request_log.add(log)
                self._send(Response(413, error_body(
                    "payload_too_large", f"request body exceeds {self._body_limit(path)} bytes")), close=True)
                return False
        except ApiError:
            pass  # a bad Content-Length is reported by the normal path
        except OSError:
            self.close_connection = True
            return False
        return super().handle_expect_100()

    # -- faults -----------------------------------------------------------------

    def _apply_fault(self, fault: Fault) -> Response | None:
        if fault.kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return None
        if fault.kind == "delay":  # waited in _respond; now handled normally
            return None
        if fault.kind == "endless_line":
            self._send_endless_line()
            return None
        if fault.kind == "raw_response":
            # A broken or hostile server: these bytes are the whole answer.
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.wfile.write(fault.body or b"")
                self.connection.shutdown(socket.SHUT_WR)
            return None
        headers = [("Retry-After", fault.retry_after)] if fault.retry_after is not None else []
        return Response(fault.status, fault.body or b"", headers)

    # -- responses --------------------------------------------------------------

    def _send(self, response: Response, close: bool = False) -> None:
        """Write status line, headers and body in one write (no Nagle stall)."""
        if close:
            self.close_connection = True
        try:
            phrase = HTTPStatus(response.status).phrase
        except ValueError:
            phrase = "Unknown"
        lines = [f"HTTP/1.1 {response.status} {phrase}",
                 f"Server: {SERVER_NAME}", f"Date: {self.date_time_string()}"]
        if response.content_type:
            lines.append(f"Content-Type: {response.content_type}")
        body = response.body
        if body and self._gzip_response():
            body = gzip.compress(body, compresslevel=6, mtime=0)
            lines += ["Content-Encoding: gzip", "Vary: Accept-Encoding"]
        lines.append(f"Content-Length: {len(body)}")
        lines += [f"{name}: {value}" for name, value in response.headers]
        if self.close_connection:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        no_body = self.command == "HEAD" or response.status in (204, 304) or response.status < 200
        self.wfile.write(head if no_body else head + body)

    def _gzip_response(self) -> bool:
        """The gzip_responses setting is on and the client accepts gzip."""
        headers = getattr(self, "headers", None)  # None for a malformed request line
        accepted = (headers.get("Accept-Encoding") or "") if headers is not None else ""
        return self.server.dev.settings.gzip_responses and "gzip" in accepted.lower()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server calls this for malformed requests; answer in JSON too.
        status = 405 if code == 501 else int(code)
        text = message or HTTPStatus(status).phrase
        error = ERROR_CODES.get(status, "validation" if status < 500 else "server_error")
        if not hasattr(self, "command") or self.command is None:
            self.command = "GET"
        with contextlib.suppress(OSError):
            self._send(Response(status, error_body(error, text)), close=True)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.dev.verbose:
            sys.stderr.write(f"{self.address_string()} - {format % args}\n")

    # -- config stream ----------------------------------------------------------

    def _run_stream(self, stream: StreamResponse) -> None:
        dev = self.server.dev
        hub = dev.hub
        # The stream body ends when the connection closes.
        self.close_connection = True
        seen = hub.generation(stream.app)  # before reading, so no publish is missed
        current = dev.store.current_config(stream.app)
        with hub.stream():
            self.wfile.write(
                f"HTTP/1.1 200 OK\r\nServer: {SERVER_NAME}\r\nDate: {self.date_time_string()}\r\n"
                "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n".encode("latin-1"))
            last_version = 0
            if current is not None:
                if stream.last_event_id != current[0]:
                    self.wfile.write(sse_event(*current))
                last_version = current[0]
            last_write = time.monotonic()
            while not hub.stopping:
                keepalive_at = last_write + dev.settings.sse_keepalive
                timeout = min(keepalive_at - time.monotonic(), SSE_DISCONNECT_POLL)
                generation, stopping = hub.wait(stream.app, seen, timeout)
                if stopping or self._client_gone():
                    return
                if generation != seen:
                    if generation[0] != seen[0]:
                        last_version = 0  # reset: versions start again from 1
                    seen = generation
                    for version, document in dev.store.configs_after(stream.app, last_version):
                        self.wfile.write(sse_event(version, document))
                        last_version = version
                        last_write = time.monotonic()
                if time.monotonic() >= last_write + dev.settings.sse_keepalive:
                    self.wfile.write(b": keepalive\n\n")
                    last_write = time.monotonic()

    def _send_endless_line(self) -> None:
        """A 200 event stream whose first line never ends: a hostile or broken
        server. Runs until the client closes or the server stops."""
        self.close_connection = True
        chunk = b"x" * 65536
        with contextlib.suppress(OSError):
            self.wfile.write(
                f"HTTP/1.1 200 OK\r\nServer: {SERVER_NAME}\r\nDate: {self.date_time_string()}\r\n"
                "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\ndata: ".encode("latin-1"))
            while not self.server.dev.stopped.is_set():
                self.wfile.write(chunk)

    def _client_gone(self) -> bool:
        """True once the peer closed; an SSE client never sends after its request."""
        try:
            # poll, not select: select fails on descriptors past 1024, which
            # a server holding hundreds of streams reaches.
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            if not poller.poll(0):
                return False
            if isinstance(self.connection, ssl.SSLSocket):
                # A TLS record may be only partly here: never block on it.
                previous = self.connection.gettimeout()
                self.connection.settimeout(0)
                try:
                    return self.connection.recv(4096) == b""
                except ssl.SSLWantReadError:
                    return False
                finally:
                    self.connection.settimeout(previous)
            return self.connection.recv(4096) == b""
        except (OSError, ValueError):
            return True


class _AlreadyAnswered(Exception):
    """Raised after a response went out early (oversized body)."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class TrackedConnections:
    """Mixin for a socketserver server: remembers open connections so that
    stop() can close them all (SSE streams and proxy tunnels included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._tracked: set[socket.socket] = set()
        self._tracked_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: socket.socket, client_address: Any) -> None:
        with self._tracked_lock:
            self._tracked.add(request)
        super().process_request(request, client_address)  # type: ignore[misc]

    def shutdown_request(self, request: socket.socket) -> None:
        with self._tracked_lock:
            self._tracked.discard(request)
        super().shutdown_request(request)  # type: ignore[misc]

    def close_connections(self) -> None:
        with self._tracked_lock:
            conns = list(self._tracked)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _HTTPServer(TrackedConnections, http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # A fleet reconnecting after an outage opens hundreds of connections at
    # once; a short backlog would drop SYNs and delay them by a second.
    request_queue_size = 1024

    def __init__(self, address: tuple, dev: "DevServer"):
        self.dev = dev
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind does a reverse DNS lookup; skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request: socket.socket, client_address: Any) -> None:
        # With TLS the handshake runs here, on the connection's own thread, so
        # a slow or refusing client never stalls the accept loop. A client
        # that rejects the certificate ends up in handle_error (an OSError).
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(30)
            request.do_handshake()
            request.settimeout(None)
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (OSError, _AlreadyAnswered)):
            return  # disconnects are routine
        super().handle_error(request, client_address)
