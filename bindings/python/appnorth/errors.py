"""The exception hierarchy: one class per APPNORTH_E_* status.

Every failing library call raises a subclass of :class:`AppNorthError`
carrying the status ``code``, the server's ``http_status`` (0 when no server
answered) and the library's ``message``. Errors the binding detects itself
(a closed client, a wrong argument type aside) use the same classes, so a
caller needs one ``except`` clause per condition, whichever side found it.

Argument-shaped errors also derive from :class:`ValueError`, and
:class:`WrongStateError` from :class:`RuntimeError`, so generic handlers
keep working.
"""

from __future__ import annotations

import builtins
import enum
import os
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Dict, Iterator, Optional, Type


class Status(enum.IntEnum):
    """The library's status codes (``APPNORTH_OK``, ``APPNORTH_E_*``)."""

    OK = 0
    E_INVALID_ARGUMENT = 1
    E_INVALID_JSON = 2
    E_INVALID_UTF8 = 3
    E_TOO_LARGE = 4
    E_NETWORK = 5
    E_VALIDATION = 6
    E_AUTHENTICATION = 7
    E_NOT_FOUND = 8
    E_CONFLICT = 9
    E_SERVER = 10
    E_HTTP = 11
    E_STORAGE = 12
    E_QUEUE_FULL = 13
    E_WRONG_STATE = 14
    E_INTERNAL = 15
    E_TIMEOUT = 16
    E_CANCELLED = 17


# Module-level names, mirroring the enum in include/appnorth.h (a test checks it).
OK = Status.OK
E_INVALID_ARGUMENT = Status.E_INVALID_ARGUMENT
E_INVALID_JSON = Status.E_INVALID_JSON
E_INVALID_UTF8 = Status.E_INVALID_UTF8
E_TOO_LARGE = Status.E_TOO_LARGE
E_NETWORK = Status.E_NETWORK
E_VALIDATION = Status.E_VALIDATION
E_AUTHENTICATION = Status.E_AUTHENTICATION
E_NOT_FOUND = Status.E_NOT_FOUND
E_CONFLICT = Status.E_CONFLICT
E_SERVER = Status.E_SERVER
E_HTTP = Status.E_HTTP
E_STORAGE = Status.E_STORAGE
E_QUEUE_FULL = Status.E_QUEUE_FULL
E_WRONG_STATE = Status.E_WRONG_STATE
E_INTERNAL = Status.E_INTERNAL
E_TIMEOUT = Status.E_TIMEOUT
E_CANCELLED = Status.E_CANCELLED

__all__ = [
    "Status",
    "AppNorthError",
    "InvalidArgumentError",
    "InvalidJSONError",
    "InvalidUTF8Error",
    "TooLargeError",
    "NetworkError",
    "ValidationError",
    "AuthenticationError",
    "NotFoundError",
    "ConflictError",
    "ServerError",
    "HTTPError",
    "StorageError",
    "QueueFullError",
    "WrongStateError",
    "InternalError",
    "AppNorthTimeoutError",
    "CancelledError",
    "error_class",
    "make_error",
]


class AppNorthError(Exception):
    """A libappnorth call failed.

    Attributes:
        code: the APPNORTH_E_* status.
        http_status: the server's HTTP status, or 0 when no server answered.
        message: the library's human-readable message (never holds tokens or
            identity values).
        entry_id: for an OfflineQueue.flush error, the id of the pending
            entry that failed; None otherwise.
        sent: for an OfflineQueue.flush error, how many entries were sent
            before it.
    """

    #: The status this class stands for; the base class covers unknown codes.
    status_code: int = -1

    def __init__(self, message: str, code: Optional[int] = None, http_status: int = 0) -> None:
        super().__init__(message)
        raw = self.status_code if code is None else code
        self.code: int = Status(raw) if raw in Status._value2member_map_ else raw
        self.http_status: int = http_status
        self.message: str = message
        #: Set by OfflineQueue.flush: the id of the entry whose error this
        #: is (still pending), and how many entries were sent before it.
        self.entry_id: Optional[str] = None
        self.sent: int = 0

    def __str__(self) -> str:
        # The status once: library messages often name it already.
        if not self.http_status or f"HTTP {self.http_status}" in self.message:
            return self.message
        return f"{self.message} (HTTP {self.http_status})" if self.message else f"HTTP {self.http_status}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(message={self.message!r}, code={self.code}, "
                f"http_status={self.http_status})")


class InvalidArgumentError(AppNorthError, ValueError):
    """A required argument was missing (None), empty, malformed or out of range."""

    status_code = E_INVALID_ARGUMENT


class InvalidJSONError(AppNorthError, ValueError):
    """Text that must be JSON did not parse, or had the wrong shape."""

    status_code = E_INVALID_JSON


class InvalidUTF8Error(AppNorthError, ValueError):
    """A string was not valid UTF-8."""

    status_code = E_INVALID_UTF8


class TooLargeError(AppNorthError, ValueError):
    """A value was larger than the library or the server accepts."""

    status_code = E_TOO_LARGE


class NetworkError(AppNorthError, ConnectionError):
    """No HTTP response: connection refused or dropped, DNS, TLS, timeout.
    Also a built-in :class:`ConnectionError`, so generic network handlers
    catch it."""

    status_code = E_NETWORK


class ValidationError(AppNorthError):
    """The server refused the request's content (HTTP 400 or 422)."""

    status_code = E_VALIDATION


class AuthenticationError(AppNorthError):
    """The credential was missing or refused (HTTP 401 or 403)."""

    status_code = E_AUTHENTICATION


class NotFoundError(AppNorthError):
    """The addressed object does not exist (HTTP 404)."""

    status_code = E_NOT_FOUND


class ConflictError(AppNorthError):
    """The request conflicts with stored state (HTTP 409)."""

    status_code = E_CONFLICT


class ServerError(AppNorthError):
    """The server failed (HTTP 5xx); see ``http_status``."""

    status_code = E_SERVER


class HTTPError(AppNorthError):
    """Any other unexpected HTTP status; see ``http_status``."""

    status_code = E_HTTP


class StorageError(AppNorthError):
    """The local store (SQLite, files, host storage callbacks) failed.
    ``path`` is the file or folder involved, when one is (also in the
    message)."""

    status_code = E_STORAGE
    path: Optional[str] = None


class QueueFullError(AppNorthError):
    """The offline queue is at its entry limit; nothing was added."""

    status_code = E_QUEUE_FULL


class WrongStateError(AppNorthError, RuntimeError):
    """The call is not allowed in the object's current state (e.g. closed)."""

    status_code = E_WRONG_STATE


class InternalError(AppNorthError):
    """A bug or an impossible condition inside the library."""

    status_code = E_INTERNAL


class AppNorthTimeoutError(AppNorthError, builtins.TimeoutError):
    """The operation did not finish within the time the caller allowed.
    Also a built-in :class:`TimeoutError`, so ``except TimeoutError``
    catches it. ``appnorth.TimeoutError`` is the same class, left out of
    ``__all__`` so that ``from appnorth import *`` keeps the built-in."""

    status_code = E_TIMEOUT


class CancelledError(AppNorthError):
    """:meth:`Client.cancel` (``appnorth_client_cancel``) ended the call
    while it was in flight. Ctrl-C on the main thread raises
    KeyboardInterrupt instead."""

    status_code = E_CANCELLED


#: The old name (``appnorth.TimeoutError``), kept for existing code.
TimeoutError = AppNorthTimeoutError  # noqa: A001


_BY_CODE: Dict[int, Type[AppNorthError]] = {
    cls.status_code: cls
    for cls in (
        InvalidArgumentError, InvalidJSONError, InvalidUTF8Error, TooLargeError,
        NetworkError, ValidationError, AuthenticationError, NotFoundError,
        ConflictError, ServerError, HTTPError, StorageError, QueueFullError,
        WrongStateError, InternalError, AppNorthTimeoutError, CancelledError,
    )
}


def error_class(code: int) -> Type[AppNorthError]:
    """The exception class for a status code (AppNorthError for unknown ones)."""
    return _BY_CODE.get(code, AppNorthError)


def make_error(code: int, message: str, http_status: int = 0) -> AppNorthError:
    """An exception instance of the right class for ``code``."""
    return error_class(code)(message, code=code, http_status=http_status)


@contextmanager
def naming_path(path: object) -> Iterator[None]:
    """Around a call that opens ``path``: its StorageError names it."""
    try:
        yield
    except StorageError as error:
        name_path(error, path)
        raise


def name_path(error: BaseException, path: object) -> None:
    """Make a StorageError name ``path``: in ``.path`` and, unless the
    library's message already shows it, at the end of the message."""
    if not isinstance(error, StorageError) or path is None or error.path is not None:
        return
    text = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else str(path)
    error.path = text
    if text not in error.message:
        error.message = f"{error.message} ({text})"
        error.args = (error.message,)
