"""Shared fixtures: the real local dev server, reset before every test that
uses it, and admin helpers that arrange server state and read what arrived.

The server is devserver/appnorth_devserver.py, started once per session as a
subprocess on a free port (or reused from ``APPNORTH_TEST_SERVER``, a base
URL such as ``http://127.0.0.1:8080``). Under pytest-xdist (make test-python
runs ``-n 2``) every worker starts its own, since tests reset the server
and read its whole request log. Nothing here mocks HTTP.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Any, Iterator

import pytest

from appnorth_test_support import APP, DEVSERVER, FAST_TIMEOUT_MS, HEADER, Admin, wait_for_port_file

def pytest_report_header(config: pytest.Config) -> str:
    try:
        import appnorth
    except ImportError as exc:
        return f"appnorth: not importable: {exc}"
    line = f"appnorth: library {appnorth.LIBRARY_PATH} (version {appnorth.version()})"
    if HEADER.is_file() and os.path.getmtime(appnorth.LIBRARY_PATH) < os.path.getmtime(HEADER):
        line += " -- older than include/appnorth.h: rebuild it (make dist) or set APPNORTH_LIBRARY"
    return line


@pytest.fixture(scope="session")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a running dev server for the whole session."""
    reuse = None if os.environ.get("PYTEST_XDIST_WORKER") else os.environ.get("APPNORTH_TEST_SERVER")
    if reuse:
        yield reuse.rstrip("/")
        return
    if not DEVSERVER.is_file():
        pytest.skip(f"dev server not found at {DEVSERVER}")
    work = tmp_path_factory.mktemp("devserver")
    port_file = work / "port"
    process = subprocess.Popen(
        [sys.executable, str(DEVSERVER), "--host", "127.0.0.1", "--port", "0",
         "--port-file", str(port_file), "--db", str(work / "devserver.sqlite3")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        port = wait_for_port_file(port_file, process, timeout=15)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


@pytest.fixture(scope="session")
def _admin_session(server_url: str) -> Admin:
    return Admin(server_url)


@pytest.fixture
def admin(_admin_session: Admin) -> Admin:
    """Admin helpers for a freshly reset server."""
    return _admin_session


@pytest.fixture(autouse=True)
def _reset_server(request: pytest.FixtureRequest) -> None:
    """POST /admin/reset before every test that talks to the server, so each
    starts from an empty database, no faults and an empty request log.
    Tests that need no server do not start one."""
    if {"admin", "server_url", "client"} & set(request.fixturenames):
        request.getfixturevalue("_admin_session").reset()


@pytest.fixture
def client(server_url: str) -> Iterator[Any]:
    """An anonymous client for APP on the dev server, closed afterwards."""
    import appnorth

    with appnorth.Client(server_url, APP, api_timeout_ms=FAST_TIMEOUT_MS,
                         resource_timeout_ms=FAST_TIMEOUT_MS) as c:
        yield c


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port with nothing listening: bound (so nobody else takes
    it) but not listening, so a connect is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()
