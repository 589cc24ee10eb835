#!/usr/bin/env python3
"""AppNorth local development API server.

A loopback implementation of the AppNorth HTTP/JSON protocol (see
docs/protocol.md) for examples, tests and benchmarks of libappnorth. It keeps
real state in SQLite, deduplicates writes by Idempotency-Key and events by
event id, streams config over Server-Sent Events, and exposes /admin endpoints
that tests use to seed data, inspect what arrived and inject faults.

Standard library only (Python 3.11+). This file is the command and the
import name; the server itself lives in the package appnorth_dev/, one
module per concern (see devserver/README.md).

    python3 devserver/appnorth_devserver.py --host 127.0.0.1 --port 0 \
        [--db PATH] [--seed-demo] [--port-file FILE]

Importable too:

    from appnorth_devserver import DevServer
    server = DevServer("127.0.0.1", 0).start()
    ...  # server.url, server.port
    server.stop()
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

# The package sits next to this file, so it resolves both when this runs as a
# script and when devserver/ is on sys.path for `import appnorth_devserver`.
from appnorth_dev.httpd import TrackedConnections  # re-exported for appnorth_proxy
from appnorth_dev.protocol import DEFAULT_EVENTS_MAX_BODY, DEFAULT_SSE_KEEPALIVE, REQUEST_LOG_LIMIT, ApiError
from appnorth_dev.routing import is_loopback
from appnorth_dev.server import DevServer
from appnorth_dev.storage import Storage

__all__ = ["ApiError", "DevServer", "Storage", "TrackedConnections", "is_loopback", "main", "write_port_file"]


def write_port_file(path: str, port: int) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{port}\n")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="AppNorth local development API server")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port to bind; 0 picks a free one (default)")
    parser.add_argument("--db", default=None, help="SQLite database file (default: in memory)")
    parser.add_argument("--seed-demo", action="store_true", help="create demo boards and ideas for app 'demo'")
    parser.add_argument("--port-file", default=None, help="write the bound port to this file (atomically)")
    parser.add_argument("--sse-keepalive", type=float, default=DEFAULT_SSE_KEEPALIVE,
                        help="seconds between SSE keepalive comments (default 15)")
    parser.add_argument("--events-max-body", type=int, default=DEFAULT_EVENTS_MAX_BODY,
                        help="max bytes of a POST .../events body (default 1048576)")
    parser.add_argument("--verbose", action="store_true", help="log each request to stderr")
    parser.add_argument("--tls-cert", default=None, help="serve HTTPS with this PEM certificate (chain)")
    parser.add_argument("--tls-key", default=None, help="the PEM private key of --tls-cert")
    parser.add_argument("--fault", action="append", default=[], metavar="JSON",
                        help="arm this fault (the body of POST /admin/faults) before serving; repeatable")
    parser.add_argument("--request-log-limit", type=int, default=REQUEST_LOG_LIMIT,
                        help=f"entries the request log keeps (default {REQUEST_LOG_LIMIT})")
    args = parser.parse_args(argv)
    faults = []
    for text in args.fault:
        try:
            spec = json.loads(text)
        except ValueError:
            parser.error(f"--fault is not JSON: {text}")
        if not isinstance(spec, dict):
            parser.error(f"--fault must be a JSON object: {text}")
        faults.append(spec)

    try:
        server = DevServer(args.host, args.port, args.db, seed_demo=args.seed_demo,
                           events_max_body=args.events_max_body, sse_keepalive=args.sse_keepalive,
                           verbose=args.verbose, tls_cert=args.tls_cert, tls_key=args.tls_key,
                           faults=faults, request_log_limit=args.request_log_limit)
    except ApiError as exc:
        parser.error(exc.message)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    if args.port_file:
        write_port_file(args.port_file, server.port)
    print(f"appnorth-devserver listening on {server.url}", flush=True)
    while not stop.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
