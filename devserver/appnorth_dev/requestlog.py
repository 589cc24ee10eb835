"""The request log that tests read through /admin/requests."""

from __future__ import annotations

import collections
import threading
import time

from .protocol import REQUEST_LOG_LIMIT


class RequestLog:
    """Bounded log of API (non-admin) requests for tests to inspect."""

    def __init__(self, limit: int = REQUEST_LOG_LIMIT) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[dict] = collections.deque(maxlen=limit)
        self._seq = 0
        # Monotonic ms of the last clear: a request that started before it
        # (one a fault held past the end of an earlier test) is not logged
        # when it finishes, or it would show up in the next test's log.
        self._cleared_ms = float("-inf")

    def add(self, entry: dict) -> None:
        with self._lock:
            if entry.get("mono_ms", self._cleared_ms) < self._cleared_ms:
                return
            self._seq += 1
            entry["seq"] = self._seq
            self._entries.append(entry)

    def since(self, seq: int) -> list[dict]:
        with self._lock:
            return [dict(e) for e in self._entries if e["seq"] > seq]

    def clear(self) -> None:
        # seq keeps counting so a stale ?since= never re-reads old entries.
        with self._lock:
            self._entries.clear()
            self._cleared_ms = time.monotonic() * 1000
