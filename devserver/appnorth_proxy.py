#!/usr/bin/env python3
"""A small forward HTTP proxy for tests: CONNECT tunnels (HTTPS) and plain
absolute-form requests (HTTP), stdlib only. It records every request it
forwards, so a test can prove that the library went through it.

    python3 devserver/appnorth_proxy.py [--port 0] [--port-file FILE] [--log-file FILE]

Each forwarded request appends one line to the log: "CONNECT host:port" or
"GET http://host:port/path". A plain request is forwarded with
"Connection: close", so every request on a kept-alive client connection is
seen (curl opens a new one). Loopback test use only: no authentication.
"""

from __future__ import annotations

import argparse
import select
import signal
import socket
import socketserver
import sys
import threading
from urllib.parse import urlsplit

from appnorth_devserver import TrackedConnections, write_port_file

HEAD_LIMIT = 64 * 1024


class ForwardProxy:
    """start() serves on a daemon thread; stop() closes everything."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, log_file: str | None = None):
        self.host = host
        self.requested_port = port
        self.log_file = log_file
        self._log: list[str] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "ForwardProxy":
        self._server = _Server((self.host, self.requested_port), self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="appnorth-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server.close_connections()
        self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> "ForwardProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "proxy not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def seen(self) -> list[str]:
        """The request lines forwarded so far, oldest first."""
        with self._lock:
            return list(self._log)

    def record(self, line: str) -> None:
        # Logged before anything goes upstream, so a test that saw the
        # response also sees the log line.
        with self._lock:
            self._log.append(line)
            if self.log_file:
                with open(self.log_file, "a", encoding="utf-8") as f:
                    f.write(line + "\n")


class _Server(TrackedConnections, socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple, proxy: ForwardProxy):
        self.proxy = proxy
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return  # disconnects are routine
        super().handle_error(request, client_address)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        client: socket.socket = self.request
        head = _read_head(client)
        if head is None:
            return
        lines = head.split(b"\r\n")
        parts = lines[0].decode("latin-1").split(" ")
        if len(parts) != 3:
            client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        method, target, version = parts
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            self.server.proxy.record(f"CONNECT {target}")
            upstream = _connect(host, port)
            if upstream is None:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            with upstream:
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                _pipe(client, upstream, b"")
            return
        url = urlsplit(target)
        if url.scheme != "http" or not url.hostname:
            client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        self.server.proxy.record(f"{method} {target}")
        upstream = _connect(url.hostname, str(url.port or 80))
        if upstream is None:
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        kept = [line for line in lines[1:]
                if line and line.split(b":", 1)[0].strip().lower() not in (b"connection", b"proxy-connection",
                                                                          b"keep-alive")]
        out = [f"{method} {path} {version}".encode("latin-1"), *kept, b"Connection: close", b"", b""]
        with upstream:
            _pipe(client, upstream, b"\r\n".join(out))


def _read_head(sock: socket.socket) -> bytes | None:
    """Reads up to the blank line ending the request head, byte by byte so
    that nothing of the body (or the TLS stream after CONNECT) is consumed."""
    data = bytearray()
    while not data.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte or len(data) > HEAD_LIMIT:
            return None
        data += byte
    return bytes(data[:-4])


def _connect(host: str, port: str) -> socket.socket | None:
    try:
        return socket.create_connection((host.strip("[]"), int(port)), timeout=10)
    except (OSError, ValueError):
        return None


def _pipe(client: socket.socket, upstream: socket.socket, first: bytes) -> None:
    """Copies bytes both ways until either side closes."""
    upstream.settimeout(None)
    if first:
        upstream.sendall(first)
    peers = {client: upstream, upstream: client}
    while True:
        readable, _, _ = select.select(list(peers), [], [], 60)
        if not readable:
            continue
        for sock in readable:
            data = sock.recv(65536)
            if not data:
                return
            peers[sock].sendall(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="forward HTTP proxy for AppNorth tests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", default=None, help="write the bound port to this file (atomically)")
    parser.add_argument("--log-file", default=None, help="append each forwarded request line here")
    args = parser.parse_args(argv)
    proxy = ForwardProxy(args.host, args.port, args.log_file).start()
    if args.port_file:
        write_port_file(args.port_file, proxy.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
