"""Shared test helpers: paths, constants and the dev server's admin API.

A module with a unique name (not conftest) so that test files can import it
even when pytest collects several test folders in one run.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

BINDING_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = BINDING_DIR.parents[1]
HEADER = REPO_ROOT / "include" / "appnorth.h"
DEVSERVER = REPO_ROOT / "devserver" / "appnorth_devserver.py"

#: App id most tests use.
APP = "pytest-app"
#: Short timeouts keep failure tests fast.
FAST_TIMEOUT_MS = 2000


def campaign(env: Optional[str], quick: int, soak: int) -> int:
    """The size of a campaign (forks, kill -9 rounds): ``quick`` in make
    test, ``soak`` in make test-soak (APPNORTH_SOAK=1); a positive number in
    the environment variable ``env`` overrides both."""
    given = os.environ.get(env, "") if env else ""
    if given.isdigit() and int(given) > 0:
        return int(given)
    return soak if os.environ.get("APPNORTH_SOAK", "0") not in ("", "0") else quick


class Admin:
    """The dev server's /admin endpoints, through urllib."""

    def __init__(self, url: str, context: Optional[ssl.SSLContext] = None) -> None:
        self.url = url.rstrip("/")
        self.context = context  # trusts the test CA for an https:// server

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]] = None, *,
              text: Optional[str] = None) -> Any:
        """One admin call; ``text`` sends a JSON body exactly as written."""
        data = text.encode("utf-8") if text is not None else (
            None if body is None else json.dumps(body).encode("utf-8"))
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10, context=self.context) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"admin {method} {path} -> HTTP {exc.code}: {exc.read()!r}") from None

    def reset(self) -> None:
        self._call("POST", "/admin/reset", {})

    def add_board(self, app: str, name: str, description: str = "") -> Dict[str, Any]:
        result: Dict[str, Any] = self._call(
            "POST", f"/admin/apps/{app}/boards", {"name": name, "description": description})["board"]
        return result

    def add_idea(self, app: str, board_id: str, title: str, body: str = "",
                 status: str = "open") -> Dict[str, Any]:
        result: Dict[str, Any] = self._call(
            "POST", f"/admin/apps/{app}/ideas",
            {"board_id": board_id, "title": title, "body": body, "status": status})["idea"]
        return result

    def delete_idea(self, app: str, idea_id: str) -> None:
        """Remove an idea (and its comments): later comments on it get 404."""
        self._call("DELETE", f"/admin/apps/{app}/ideas/{idea_id}")

    def add_user(self, app: str, email: str, token: str) -> None:
        self._call("POST", "/admin/users", {"app": app, "email": email, "token": token})

    def publish_config(self, app: str, config: Union[Dict[str, Any], str]) -> int:
        """Publish a config version: a dict, or JSON object text that the
        server keeps as written (so ``9.99`` or ``1.50`` are served as is).
        Returns the new version number."""
        text = config if isinstance(config, str) else json.dumps(config)
        version: int = self._call("POST", f"/admin/apps/{app}/config", text=f'{{"config":{text}}}')["version"]
        return version

    def publish_raw_config(self, app: str, raw: str) -> int:
        """Publish a deliberately broken payload: ``raw`` is served in place
        of the config object."""
        version: int = self._call("POST", f"/admin/apps/{app}/config", {"raw": raw})["version"]
        return version

    def add_fault(self, **spec: Any) -> Dict[str, Any]:
        result: Dict[str, Any] = self._call("POST", "/admin/faults", spec)
        return result

    def settings(self, **spec: Any) -> Dict[str, Any]:
        """Change dev server settings, e.g. ``rejected_event_names``."""
        result: Dict[str, Any] = self._call("POST", "/admin/settings", spec)["settings"]
        return result

    def faults(self) -> List[Dict[str, Any]]:
        """The injected faults not used up yet."""
        result: List[Dict[str, Any]] = self._call("GET", "/admin/faults")["faults"]
        return result

    def clear_faults(self) -> None:
        self._call("DELETE", "/admin/faults")

    def held(self) -> int:
        """How many requests wait out a delay fault at the server now."""
        held: int = self._call("GET", "/admin/faults")["held"]
        return held

    def wait_held(self, count: int, timeout: float = 30.0) -> None:
        """Waits until ``count`` requests are held (a long ``delay_ms``
        holds one until release()); the timeout only catches a hang."""
        deadline = time.monotonic() + timeout
        while self.held() < count:
            assert time.monotonic() < deadline, f"{self.held()} of {count} requests held at the server"
            time.sleep(0.005)

    def release(self) -> int:
        """Ends every delay in progress: the held requests go on."""
        released: int = self._call("POST", "/admin/faults/release", {})["released"]
        return released

    def outage(self, count: int = 50) -> None:
        """Every API request drops its connection until clear_faults().
        (One drop is not an outage: libcurl retries a request once when a
        reused connection turns out to be closed.)"""
        self.add_fault(drop=True, count=count)

    def requests(self, expect: int = 0, since: int = 0, timeout: float = 30.0) -> List[Dict[str, Any]]:
        """API requests the server received (admin calls are not logged).

        The dev server logs a request just after answering it, so a test
        that asks right after a call may be early: ``expect`` waits (up to
        ``timeout`` s, a watchdog) until at least that many entries are there."""
        deadline = time.monotonic() + timeout
        while True:
            result: List[Dict[str, Any]] = self._call("GET", f"/admin/requests?since={since}")["requests"]
            if len(result) >= expect or time.monotonic() > deadline:
                return result
            time.sleep(0.01)

    def assert_nothing_sent(self, app: str = APP) -> None:
        """No API request arrived since the last reset. Proved with a
        sentinel request: once its log entry is there, an earlier request
        would have been logged too."""
        import appnorth

        with appnorth.Client(self.url, app, api_timeout_ms=FAST_TIMEOUT_MS) as sentinel:
            sentinel.list_boards()
        requests = self.requests(expect=1)
        assert [(r["method"], r["path"]) for r in requests] == [("GET", f"/v1/apps/{app}/boards")], requests

    def state(self, app: str) -> Dict[str, Any]:
        result: Dict[str, Any] = self._call("GET", f"/admin/apps/{app}/state")
        return result


def wait_for_port_file(path: Path, process: subprocess.Popen, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"dev server exited with {process.returncode}: "
                               f"{process.stderr.read().decode(errors='replace') if process.stderr else ''}")
        try:
            text = path.read_text().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.02)
    raise RuntimeError(f"dev server did not write {path} within {timeout} s")


def fork_child(fn: Callable[[], int]) -> int:
    """Forks; the child runs ``fn`` and exits with its result (98 if it
    raised, 99 if it never returned). Returns the child's pid."""
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork() in a multi-threaded process; the
        # fork tests are about exactly that.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        except BaseException:  # noqa: BLE001 - reported through the exit code
            code = 98
        finally:
            os._exit(code)
    return pid
