"""The config stream hub and the Server-Sent Events framing."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class ConfigHub:
    """Wakes config streams when a version is published.

    Streams wait on one Condition and compare a per-app generation; a reset
    bumps the epoch so streams restart their version count from zero."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._epoch = 0
        self._gens: dict[str, int] = {}
        self._stopping = False
        self._active = 0

    def generation(self, app: str) -> tuple[int, int]:
        with self._cond:
            return self._epoch, self._gens.get(app, 0)

    def published(self, app: str) -> None:
        with self._cond:
            self._gens[app] = self._gens.get(app, 0) + 1
            self._cond.notify_all()

    def reset(self) -> None:
        with self._cond:
            self._epoch += 1
            self._gens.clear()
            self._cond.notify_all()

    def wait(self, app: str, seen: tuple[int, int], timeout: float) -> tuple[tuple[int, int], bool]:
        """Block until the app's generation differs from `seen`, stop, or timeout."""
        with self._cond:
            self._cond.wait_for(
                lambda: self._stopping or (self._epoch, self._gens.get(app, 0)) != seen,
                timeout=max(timeout, 0))
            return (self._epoch, self._gens.get(app, 0)), self._stopping

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stopping

    @contextlib.contextmanager
    def stream(self) -> Iterator[None]:
        with self._cond:
            self._active += 1
        try:
            yield
        finally:
            with self._cond:
                self._active -= 1

    @property
    def active_streams(self) -> int:
        with self._cond:
            return self._active


def sse_event(version: int, document: str) -> bytes:
    data = f'{{"version":{version},"config":{document}}}'
    # Raw (deliberately broken) payloads may hold newlines: SSE spells those as
    # several data: lines, which a conforming client joins with "\n".
    lines = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"id: {version}\nevent: config\n{lines}\n".encode("utf-8")
