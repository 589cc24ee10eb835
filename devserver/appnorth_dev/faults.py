"""Fault injection: the queue of faults the admin endpoints arm."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import threading
import time
from typing import Any

from .protocol import ERROR_CODES, PRINTABLE_ASCII_RE, json_bytes, validation


@dataclasses.dataclass
class Fault:
    id: str
    kind: str                 # "status" | "drop" | "delay" | "endless_line" | "raw_response"
    path_prefix: str | None
    method: str | None
    remaining: int
    status: int | None = None
    retry_after: str | None = None
    body: bytes | None = None
    delay_ms: float = 0
    # With for_ms: the fault serves every matching request until this
    # time.monotonic() deadline (and at most `remaining` of them).
    for_ms: float | None = None
    until: float | None = None

    def matches(self, method: str, path: str) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path_prefix is None or path.startswith(self.path_prefix)))

    def expired(self, now: float) -> bool:
        return self.until is not None and now >= self.until

    def describe(self) -> dict:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "path_prefix": self.path_prefix,
                               "method": self.method, "count": self.remaining}
        if self.kind == "status":
            out.update(status=self.status, retry_after=self.retry_after)
        elif self.kind == "drop":
            out["drop"] = True
        elif self.kind == "endless_line":
            out["endless_line"] = True
        elif self.kind == "raw_response":
            out["raw_response"] = base64.b64encode(self.body or b"").decode("ascii")
        if self.delay_ms or self.kind == "delay":
            out["delay_ms"] = self.delay_ms
        if self.for_ms is not None:
            out["for_ms"] = self.for_ms
        return out


class FaultQueue:
    """FIFO list of injected faults; the first fault matching a request serves it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._next_id = 1
        # Requests waiting out a delay now, and the releases that end them.
        self._released = threading.Condition(self._lock)
        self._releases = 0
        self._held = 0

    def add(self, spec: dict) -> Fault:
        fault = self._parse(spec)
        with self._lock:
            fault.id = f"fault_{self._next_id}"
            self._next_id += 1
            if fault.for_ms is not None:  # the window opens when the fault is armed
                fault.until = time.monotonic() + fault.for_ms / 1000
            self._faults.append(fault)
        return fault

    def take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            now = time.monotonic()
            self._faults = [f for f in self._faults if not f.expired(now)]
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def hold(self, seconds: float, stopped: threading.Event) -> None:
        """Waits out a delay fault: `seconds`, or until release() or the server stops."""
        deadline = time.monotonic() + seconds
        with self._released:
            releases = self._releases
            self._held += 1
            try:
                while self._releases == releases and not stopped.is_set():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._released.wait(min(left, 0.05))
            finally:
                self._held -= 1

    def release(self) -> int:
        """Ends every delay in progress now; returns how many requests it freed."""
        with self._released:
            freed = self._held
            self._releases += 1
            self._released.notify_all()
            return freed

    def held(self) -> int:
        """How many requests wait out a delay now."""
        with self._lock:
            return self._held

    def list(self) -> list[dict]:
        with self._lock:
            now = time.monotonic()
            return [f.describe() for f in self._faults if not f.expired(now)]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @staticmethod
    def _parse(spec: dict) -> Fault:
        prefix = spec.get("path_prefix")
        if prefix is not None and (not isinstance(prefix, str) or not prefix.startswith("/")):
            raise validation("'path_prefix' must be a string starting with '/'")
        method = spec.get("method")
        if method is not None and (not isinstance(method, str) or not method.isalpha()):
            raise validation("'method' must be an HTTP method name")
        window = spec.get("for_ms")
        if window is not None and (not isinstance(window, (int, float)) or isinstance(window, bool)
                                   or not 1 <= window <= 3_600_000):
            raise validation("'for_ms' must be a number 1-3600000")
        # A time window serves every matching request in it unless a count is given too.
        count = spec.get("count", 1 if window is None else 1_000_000)
        if not _is_int(count) or not 1 <= count <= 1_000_000:
            raise validation("'count' must be an integer >= 1")
        kinds = [k for k in ("status", "drop", "endless_line", "raw_response") if spec.get(k) is not None] or (
            ["delay_ms"] if spec.get("delay_ms") is not None else [])
        if len(kinds) != 1:
            raise validation("give exactly one of 'status', 'drop', 'delay_ms', 'endless_line' or 'raw_response'"
                             " (a delay may precede status or drop)")
        if kinds[0] in ("endless_line", "raw_response") and spec.get("delay_ms") is not None:
            raise validation("'delay_ms' may precede 'status' or 'drop' only")
        fault = Fault("", "", prefix, method.upper() if method else None, count)
        fault.for_ms = window
        delay = spec.get("delay_ms")
        if delay is not None:
            if not isinstance(delay, (int, float)) or isinstance(delay, bool) or not 0 <= delay <= 600_000:
                raise validation("'delay_ms' must be a number 0-600000")
            fault.delay_ms = delay
        if kinds[0] == "status":
            status = spec["status"]
            if not _is_int(status) or not 100 <= status <= 599:
                raise validation("'status' must be an integer 100-599")
            fault.kind, fault.status = "status", status
            retry_after = spec.get("retry_after")
            if retry_after is not None:
                if not isinstance(retry_after, str) or not PRINTABLE_ASCII_RE.fullmatch(retry_after):
                    raise validation("'retry_after' must be a printable ASCII string")
                fault.retry_after = retry_after
            body = spec.get("body")
            if body is None:
                code = ERROR_CODES.get(status, "injected")
                body = {"error": {"code": "injected" if status >= 500 else code,
                                  "message": f"injected fault: HTTP {status}"}}
            # A string body is sent verbatim (e.g. an HTML page from a proxy).
            fault.body = body.encode("utf-8") if isinstance(body, str) else json_bytes(body)
        elif kinds[0] == "drop":
            if spec["drop"] is not True:
                raise validation("'drop' must be true")
            fault.kind = "drop"
        elif kinds[0] == "endless_line":
            if spec["endless_line"] is not True:
                raise validation("'endless_line' must be true")
            fault.kind = "endless_line"
        elif kinds[0] == "raw_response":
            raw = spec["raw_response"]
            try:
                fault.body = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
            except binascii.Error:
                fault.body = None
            if not fault.body:
                raise validation("'raw_response' must be non-empty base64 (the bytes sent as the whole response)")
            fault.kind = "raw_response"
        else:
            fault.kind = "delay"
        return fault


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
