#!/usr/bin/env python3
"""Bare TLS listeners for tests that must fail the handshake: one loopback
port per certificate (an expired one, one for another host name, a
self-signed one). A client that wrongly accepts the certificate gets an
HTTP 503, never a success, so such a bug cannot pass a test.

    python3 devserver/appnorth_tls_listeners.py --ports-file FILE NAME=CERT:KEY ...

FILE receives one "NAME PORT" line per listener once all are up.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import ssl
import sys
import threading
import warnings

REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
           b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")


class TLSListener:
    """Serves one certificate on a loopback port until stop()."""

    def __init__(self, cert: str, key: str, host: str = "127.0.0.1", old_tls_only: bool = False):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        if old_tls_only:
            # TLS 1.0 and 1.1 only (a downgraded or ancient server): a
            # client keeping its TLS 1.2 floor must fail the handshake.
            self.context.set_ciphers("DEFAULT:@SECLEVEL=0")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                self.context.minimum_version = ssl.TLSVersion.TLSv1
                self.context.maximum_version = ssl.TLSVersion.TLSv1_1
        self.socket = socket.create_server((host, 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="tls-listener", daemon=True)

    def start(self) -> "TLSListener":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.socket.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.socket.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            conn.settimeout(30)
            with self.context.wrap_socket(conn, server_side=True) as tls:
                tls.recv(65536)
                tls.sendall(REFUSAL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="TLS listeners with chosen certificates, for tests")
    parser.add_argument("--ports-file", required=True)
    parser.add_argument("listeners", nargs="+", metavar="NAME=CERT:KEY")
    args = parser.parse_args(argv)
    listeners = {}
    for spec in args.listeners:
        name, _, files = spec.partition("=")
        cert, _, key = files.partition(":")
        listeners[name] = TLSListener(cert, key).start()
    tmp = f"{args.ports_file}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        for name, listener in listeners.items():
            f.write(f"{name} {listener.port}\n")
    os.replace(tmp, args.ports_file)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    for listener in listeners.values():
        listener.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
