"""Idempotency-Key replay."""

from __future__ import annotations

from typing import Callable

from .protocol import ApiError, Response
from .storage import Storage


class IdempotencyGuard:
    """Runs a write at most once per (app, identity, Idempotency-Key).

    The lookup, the write and the stored record share one transaction, so a
    concurrent retry with the same key waits and then replays. Only 2xx
    responses are stored: a retry after an error gets a fresh attempt."""

    def __init__(self, store: Storage):
        self.store = store

    def run(self, app: str, identity: str, key: str, method: str, path: str,
            body_sha256: str, write: Callable[[], Response]) -> Response:
        with self.store.transaction():
            record = self.store.idempotency_lookup(app, identity, key)
            if record is not None:
                if (record["method"], record["path"], record["body_sha256"]) != (method, path, body_sha256):
                    raise ApiError(409, "idempotency_conflict",
                                   "Idempotency-Key was already used for a different request")
                return Response(record["status"], record["response"].encode("utf-8"),
                                [("Idempotent-Replayed", "true")])
            response = write()
            if 200 <= response.status < 300:
                self.store.idempotency_store(app, identity, key, method, path, body_sha256,
                                             response.status, response.body.decode("utf-8"))
            return response
