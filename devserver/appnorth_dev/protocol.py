"""Limits, constants, errors and the request/response types every module shares."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import Any


MAX_BODY = 10 * 1024 * 1024            # any request body
DEFAULT_EVENTS_MAX_BODY = 1024 * 1024  # POST .../events body
DEFAULT_SSE_KEEPALIVE = 15.0           # seconds between ": keepalive" comments
OVERSIZE_DRAIN_SECONDS = 2.0           # see _reject_oversize
SSE_DISCONNECT_POLL = 0.25             # how often an idle stream checks its socket
REQUEST_LOG_LIMIT = 10_000

IDEA_STATUSES = ("open", "planned", "in_progress", "done", "declined")
SCREENSHOT_TYPES = ("image/png", "image/jpeg")
MAX_SCREENSHOTS = 5
MAX_SCREENSHOT_BYTES = 2 * 1024 * 1024
MAX_EVENTS_PER_BATCH = 1000
MAX_SQLITE_INT = 2 ** 63 - 1

APP_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,128}")
IDEMPOTENCY_KEY_RE = re.compile(r"[\x20-\x7e]{1,255}")
PRINTABLE_ASCII_RE = re.compile(r"[\x20-\x7e]*")
CURSOR_RE = re.compile(r"v1:([0-9]{1,18})")

# Error code for each status the server produces on its own.
ERROR_CODES = {
    400: "validation",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "idempotency_conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}

JSON_TYPE = "application/json"
SERVER_NAME = "appnorth-devserver/1.0"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# --------------------------------------------------------------------------
# Errors, requests, responses
# --------------------------------------------------------------------------

class ApiError(Exception):
    """An error that becomes a JSON error response."""

    def __init__(self, status: int, code: str, message: str,
                 headers: list[tuple[str, str]] | None = None, close: bool = False,
                 extra: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or []
        self.close = close  # close the connection after answering
        self.extra = extra or {}  # more members of the error object (e.g. "rejected")


def validation(message: str) -> ApiError:
    return ApiError(400, "validation", message)


def not_found(message: str) -> ApiError:
    return ApiError(404, "not_found", message)


def error_body(code: str, message: str, extra: dict | None = None) -> bytes:
    return json_bytes({"error": {"code": code, "message": message, **(extra or {})}})


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@dataclasses.dataclass
class Response:
    status: int
    body: bytes = b""
    headers: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    content_type: str | None = JSON_TYPE
    # More members for this request's entry in the request log.
    log: dict | None = None


def json_response(status: int, obj: Any, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json_bytes(obj), headers or [])


@dataclasses.dataclass
class StreamResponse:
    """Returned by the config-stream endpoint; the HTTP layer runs the stream."""
    app: str
    last_event_id: int | None


@dataclasses.dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Any  # http.client.HTTPMessage
    body: bytes
    params: dict[str, str]

    @property
    def app(self) -> str:
        return self.params["app"]

    def header(self, name: str) -> str | None:
        return self.headers.get(name)

    def json(self, *, empty_ok: bool = False) -> tuple[dict, str]:
        """The body as a JSON object plus its decoded text (400 on anything else)."""
        from .jsonutil import decode_json_object  # jsonutil raises this module's errors
        return decode_json_object(self.body, empty_ok=empty_ok)
