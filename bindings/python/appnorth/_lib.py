"""Loading libappnorth.so and declaring its C functions.

Everything that touches ctypes' function objects lives here:

- :func:`candidate_paths` / :func:`load` locate the shared library
  (``APPNORTH_LIBRARY``, then the package folder, then the repository's build
  folders) and load it with :class:`ctypes.CDLL` (never ``PyDLL``: library
  threads must be able to take the GIL while a call is blocked in C).
- :data:`DECLARATIONS` is the single table of every C function the binding
  uses; :func:`ffi` applies one entry (argtypes, restype, errcheck) when
  :data:`C` first looks the function up, so no call site can forget its
  error check and ``import appnorth`` binds none of them.
- The errcheck functions turn status codes into exceptions
  (:mod:`appnorth.errors`) and static ``const char *`` results into ``str``.
- :func:`take_string` reads and frees a string the library handed out
  through a ``char **`` out-parameter.

Nothing in this module is public API: use :mod:`appnorth` instead.
"""

from __future__ import annotations

import atexit
import ctypes
import enum
import os
import sys
import threading
import weakref
from contextlib import contextmanager
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char,
    c_char_p,
    c_double,
    c_int32,
    c_int64,
    c_size_t,
    c_uint64,
    c_void_p,
)

from . import errors

# Names used only in annotations. ``import appnorth`` never imports typing
# (nor logging, json or traceback: each is imported where first needed).
# Together they were a third of the import time (bench/README.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple, Union

    TextArg = Union[str, bytes, bytearray, None]
    PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]", None]
    Errcheck = Callable[[Any, Any, Tuple[Any, ...]], Any]

#: The library major version this binding is written against. A library
#: with another major version has an incompatible ABI and is refused.
EXPECTED_MAJOR = 0

#: Environment variable naming the shared library to load (a file path).
LIBRARY_ENV = "APPNORTH_LIBRARY"

# Mirrors of the header's macros and enums (tests compare them to the header).
ERROR_MESSAGE_SIZE = 256


class LogLevel(enum.IntEnum):
    """``APPNORTH_LOG_*``."""

    DEBUG = 0
    INFO = 1
    WARNING = 2
    ERROR = 3


class Source(enum.IntEnum):
    """Where a cached-then-fresh read's data came from (``APPNORTH_SOURCE_*``)."""

    CACHE = 1
    NETWORK = 2


class NetworkType(enum.IntEnum):
    """``APPNORTH_NETWORK_*``: sets the event batch size."""

    UNKNOWN = 0
    WIFI = 1
    CELLULAR = 2
    EXPENSIVE_CELLULAR = 3


class Consent(enum.IntEnum):
    """``APPNORTH_CONSENT_*``: the analytics consent state."""

    UNKNOWN = -1
    REVOKED = 0
    GRANTED = 1


class ConfigTier(enum.IntEnum):
    """``APPNORTH_CONFIG_TIER_*``: where the effective config comes from."""

    DEFAULT = 0
    BUNDLED = 1
    CACHED = 2
    REMOTE = 3


class ConfigState(enum.IntEnum):
    """``APPNORTH_CONFIG_STATE_*``: the state of a config's data source."""

    INITIALIZING = 0
    VALID = 1
    INTERRUPTED = 2
    OFFLINE = 3
    OFF = 4


LOG_DEBUG = LogLevel.DEBUG
LOG_INFO = LogLevel.INFO
LOG_WARNING = LogLevel.WARNING
LOG_ERROR = LogLevel.ERROR
SOURCE_CACHE = Source.CACHE
SOURCE_NETWORK = Source.NETWORK
MAX_TITLE_CHARS = 200
MAX_TEXT_CHARS = 10000
MAX_FEEDBACK_TEXT_CHARS = 20000
MAX_DIAGNOSTICS_BYTES = 256 * 1024
MAX_URL_BYTES = 2048
#: Log lines that may wait for Client.dispatch(); later ones are dropped and counted.
DISPATCH_LOG_LIMIT = 1000
MAX_SCREENSHOTS = 5
MAX_SCREENSHOT_BYTES = 2 * 1024 * 1024
#: Largest in-memory CA bundle for Client(ca_pem=...), in bytes.
MAX_CA_PEM_BYTES = 4 * 1024 * 1024
MAX_BUFFER_BYTES = 1024 * 1024 * 1024
#: Write bodies this size or larger go gzip-compressed (event batches always do).
GZIP_WRITE_THRESHOLD_BYTES = 1024
QUEUE_DEFAULT_LIMIT = 50
NETWORK_UNKNOWN = NetworkType.UNKNOWN
NETWORK_WIFI = NetworkType.WIFI
NETWORK_CELLULAR = NetworkType.CELLULAR
NETWORK_EXPENSIVE_CELLULAR = NetworkType.EXPENSIVE_CELLULAR
#: What a before_send hook returns (the Python hook's None/dict map to them).
BEFORE_SEND_KEEP = 0
BEFORE_SEND_DROP = 1
BEFORE_SEND_REPLACE = 2
CONSENT_UNKNOWN = Consent.UNKNOWN
CONSENT_REVOKED = Consent.REVOKED
CONSENT_GRANTED = Consent.GRANTED
CACHE_DEFAULT_TTL_SECONDS = 300
CONFIG_TIER_DEFAULT = ConfigTier.DEFAULT
CONFIG_TIER_BUNDLED = ConfigTier.BUNDLED
CONFIG_TIER_CACHED = ConfigTier.CACHED
CONFIG_TIER_REMOTE = ConfigTier.REMOTE
CONFIG_DEFAULT_TTL_SECONDS = 3600
CONFIG_DEFAULT_POLL_INTERVAL_MS = 60000
CONFIG_DEFAULT_BACKOFF_BASE_MS = 1000
CONFIG_DEFAULT_BACKOFF_MAX_MS = 60000
CONFIG_MAX_STREAM_EVENT_BYTES = 16 * 1024 * 1024
CONFIG_STATE_INITIALIZING = ConfigState.INITIALIZING
CONFIG_STATE_VALID = ConfigState.VALID
CONFIG_STATE_INTERRUPTED = ConfigState.INTERRUPTED
CONFIG_STATE_OFFLINE = ConfigState.OFFLINE
CONFIG_STATE_OFF = ConfigState.OFF
#: How long a 401 or 403 holds back a config's library thread, in ms.
CONFIG_AUTH_HOLD_MS = 300000

INT32_MIN = -(2 ** 31)
INT32_MAX = 2 ** 31 - 1
INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1


# ---------------------------------------------------------------------------
# C types
# ---------------------------------------------------------------------------

class appnorth_error(Structure):
    """``struct appnorth_error``: written by the library on every call."""

    _fields_ = [
        ("code", c_int32),
        ("http_status", c_int32),
        ("message", c_char * ERROR_MESSAGE_SIZE),
    ]

    def text(self) -> str:
        """The message, decoded from UTF-8 (the library truncates on a
        character boundary; anything else is replaced, never raised)."""
        return bytes(self.message).split(b"\0", 1)[0].decode("utf-8", errors="replace")


class appnorth_data_source_status(Structure):
    """``struct appnorth_data_source_status``: a config's data-source status."""

    _fields_ = [
        ("state", c_int32),
        ("since_ms", c_int64),
        ("last_error_ms", c_int64),
        ("last_error", appnorth_error),
    ]


class _Opaque(Structure):
    """Base of the opaque handle types: only pointers to them are used."""


class appnorth_client_options(_Opaque):
    pass


class appnorth_client(_Opaque):
    pass


class appnorth_feedback(_Opaque):
    pass


class appnorth_storage(_Opaque):
    pass


class appnorth_buffer(_Opaque):
    pass


class appnorth_queue(_Opaque):
    pass


class appnorth_clock(_Opaque):
    pass


class appnorth_cache(_Opaque):
    pass


class appnorth_events_options(_Opaque):
    pass


class appnorth_events(_Opaque):
    pass


class appnorth_config_options(_Opaque):
    pass


class appnorth_config(_Opaque):
    pass


# Typed handle pointers: ctypes refuses a handle of the wrong kind.
ClientOptionsPtr = POINTER(appnorth_client_options)
ClientPtr = POINTER(appnorth_client)
FeedbackPtr = POINTER(appnorth_feedback)
StoragePtr = POINTER(appnorth_storage)
BufferPtr = POINTER(appnorth_buffer)
QueuePtr = POINTER(appnorth_queue)
ClockPtr = POINTER(appnorth_clock)
CachePtr = POINTER(appnorth_cache)
EventsOptionsPtr = POINTER(appnorth_events_options)
EventsPtr = POINTER(appnorth_events)
ConfigOptionsPtr = POINTER(appnorth_config_options)
ConfigPtr = POINTER(appnorth_config)
ErrorPtr = POINTER(appnorth_error)
Int32Out = POINTER(c_int32)
Int64Out = POINTER(c_int64)
DoubleOut = POINTER(c_double)
#: ``char **`` out-parameters are read as ``void *`` so that ctypes never
#: converts (and loses) the library-owned pointer before it is freed.
StringOut = POINTER(c_void_p)
OpOut = POINTER(c_uint64)

# Callback types. Keep every instance referenced for as long as the library
# may call it. ``const char *`` arguments are borrowed for the duration of
# the call, so ``c_char_p`` (copied into ``bytes``, never freed) is right
# for them; binary data arrives as ``void *`` plus a length.

#: ``void (*appnorth_log_fn)(int32_t level, const char *message, void *user_data)``
LOG_FN = CFUNCTYPE(None, c_int32, c_char_p, c_void_p)
#: ``int32_t (*appnorth_storage_load_fn)(void *user_data, appnorth_buffer *out)``
STORAGE_LOAD_FN = CFUNCTYPE(c_int32, c_void_p, BufferPtr)
#: ``int32_t (*appnorth_storage_save_fn)(void *user_data, const void *bytes, size_t length)``
STORAGE_SAVE_FN = CFUNCTYPE(c_int32, c_void_p, c_void_p, c_size_t)
#: ``void (*appnorth_release_fn)(void *user_data)``
RELEASE_FN = CFUNCTYPE(None, c_void_p)
#: ``void (*appnorth_read_fn)(int32_t source, const char *json, void *user_data)``
READ_FN = CFUNCTYPE(None, c_int32, c_char_p, c_void_p)
#: ``int32_t (*appnorth_secure_get_fn)(void *user_data, const char *key, appnorth_buffer *out)``
SECURE_GET_FN = CFUNCTYPE(c_int32, c_void_p, c_char_p, BufferPtr)
#: ``int32_t (*appnorth_secure_set_fn)(void *user_data, const char *key, const char *value)``
SECURE_SET_FN = CFUNCTYPE(c_int32, c_void_p, c_char_p, c_char_p)
#: appnorth_before_send_fn
BEFORE_SEND_FN = CFUNCTYPE(c_int32, c_void_p, c_char_p, BufferPtr)
#: ``void (*appnorth_config_listener_fn)(const char *config_json,
#: const char *changed_keys_json, int32_t tier, void *user_data)``
CONFIG_LISTENER_FN = CFUNCTYPE(None, c_char_p, c_char_p, c_int32, c_void_p)
#: ``void (*appnorth_config_status_fn)(const appnorth_data_source_status *status,
#: void *user_data)``
CONFIG_STATUS_FN = CFUNCTYPE(None, POINTER(appnorth_data_source_status), c_void_p)
#: ``void (*appnorth_completion_fn)(uint64_t op, int32_t status,
#: const appnorth_error *err, const char *result_json, void *user_data)``
COMPLETION_FN = CFUNCTYPE(None, c_uint64, c_int32, c_void_p, c_char_p, c_void_p)

#: A NULL ``appnorth_log_fn`` (ctypes refuses None for a function pointer
#: argument): turns a handle's logging off.
NULL_LOG_FN = LOG_FN()


# ---------------------------------------------------------------------------
# Error checks
# ---------------------------------------------------------------------------

def _find_error(arguments: Sequence[Any]) -> Optional[appnorth_error]:
    """The appnorth_error the caller passed (by convention the last argument)."""
    for argument in reversed(arguments):
        if isinstance(argument, appnorth_error):
            return argument
        obj = getattr(argument, "_obj", None)  # byref(err)
        if isinstance(obj, appnorth_error):
            return obj
    return None


def status_error(code: int, err: Optional[appnorth_error]) -> errors.AppNorthError:
    """The exception for a failed call's status and its error struct."""
    if err is not None:
        return errors.make_error(code, err.text() or _status_name(code), err.http_status)
    return errors.make_error(code, _status_name(code))


def check_status(result: int, func: Any, arguments: Tuple[Any, ...]) -> int:
    """errcheck for calls returning an ``int32_t`` status: raise on failure."""
    if result == errors.OK:
        return result
    raise status_error(result, _find_error(arguments))


def static_string(result: Optional[int], func: Any, arguments: Tuple[Any, ...]) -> str:
    """errcheck for ``const char *`` results the library owns (never freed)."""
    if not result:
        raise errors.InternalError(f"{func.__name__} returned NULL")
    return ctypes.string_at(result).decode("utf-8", errors="replace")


def non_null(result: Any, func: Any, arguments: Tuple[Any, ...]) -> Any:
    """errcheck for constructors that return NULL only when out of memory."""
    if not result:
        raise MemoryError(f"{func.__name__} returned NULL (out of memory)")
    return result


def _status_name(code: int) -> str:
    try:
        return str(C.appnorth_status_str(code))
    except Exception:  # the library itself is unusable: still say something
        return f"status {code}"


# ---------------------------------------------------------------------------
# The declaration table
# ---------------------------------------------------------------------------

class Declaration:
    """One C function: its name, argument types, result type and error
    check (what :func:`ffi` applies)."""

    __slots__ = ("name", "argtypes", "restype", "errcheck")

    def __init__(self, name: str, argtypes: Sequence[Any], restype: Any, errcheck: Optional[Errcheck]) -> None:
        self.name = name
        self.argtypes = argtypes
        self.restype = restype
        self.errcheck = errcheck

    def __repr__(self) -> str:
        return f"Declaration({self.name!r})"


#: Every C function of include/appnorth.h, in header order: the single
#: source of truth for the binding's C signatures. Each is bound on first use
#: (:data:`C`), not at import. tests/test_header_coverage.py fails when the
#: header has one this lacks, or when an entry's argument count differs from
#: the header's.
_S = check_status
#: The tail of every appnorth_*_async function: on_done, user_data, out_op, err.
_ASYNC = (COMPLETION_FN, c_void_p, OpOut, ErrorPtr)
DECLARATIONS: Tuple[Declaration, ...] = (
    # Version
    Declaration("appnorth_version", [], c_void_p, static_string),
    Declaration("appnorth_version_number", [], c_int32, None),
    # Status codes and errors
    Declaration("appnorth_status_str", [c_int32], c_void_p, static_string),
    Declaration("appnorth_string_free", [c_void_p], None, None),
    # Process exit
    Declaration("appnorth_shutdown", [c_int32, ErrorPtr], c_int32, _S),
    # fork()
    Declaration("appnorth_callbacks_hold", [c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_callbacks_resume", [], None, None),
    # Client options
    Declaration("appnorth_client_options_new", [], ClientOptionsPtr, non_null),
    Declaration("appnorth_client_options_free", [ClientOptionsPtr], None, None),
    Declaration("appnorth_client_options_set_api_url", [ClientOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_app_id", [ClientOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_credential",
                [ClientOptionsPtr, c_char_p, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_allow_cleartext_host", [ClientOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_timeouts",
                [ClientOptionsPtr, c_int32, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_logger",
                [ClientOptionsPtr, LOG_FN, c_int32, c_void_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_ca_file", [ClientOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_ca_pem",
                [ClientOptionsPtr, c_void_p, c_size_t, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_pinned_public_keys",
                [ClientOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_proxy",
                [ClientOptionsPtr, c_char_p, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_options_set_compression", [ClientOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    # Dispatch mode
    Declaration("appnorth_client_options_set_dispatch_mode", [ClientOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_dispatch", [ClientPtr, c_int32, POINTER(c_int32), ErrorPtr], c_int32, _S),
    Declaration("appnorth_dispatch_fd", [ClientPtr, POINTER(c_int32), ErrorPtr], c_int32, _S),
    # Client: reads
    Declaration("appnorth_client_new", [ClientOptionsPtr, POINTER(ClientPtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_free", [ClientPtr], None, None),
    Declaration("appnorth_client_set_log_level", [ClientPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_scope", [ClientPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_cancel", [ClientPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_list_boards", [ClientPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_list_ideas", [ClientPtr, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    # Client: writes
    Declaration("appnorth_client_submit_idea",
                [ClientPtr, c_char_p, c_char_p, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_submit_comment",
                [ClientPtr, c_char_p, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_submit_feedback",
                [ClientPtr, FeedbackPtr, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_vote", [ClientPtr, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_send_chat_message",
                [ClientPtr, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_list_chat_messages", [ClientPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_list_comments", [ClientPtr, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    # Non-blocking operations (appnorth._ops, appnorth.aio)
    Declaration("appnorth_op_cancel", [c_uint64, ErrorPtr], c_int32, _S),
    Declaration("appnorth_client_list_boards_async", [ClientPtr, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_list_ideas_async", [ClientPtr, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_list_comments_async", [ClientPtr, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_list_chat_messages_async", [ClientPtr, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_submit_idea_async",
                [ClientPtr, c_char_p, c_char_p, c_char_p, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_submit_comment_async", [ClientPtr, c_char_p, c_char_p, c_char_p, *_ASYNC],
                c_int32, _S),
    Declaration("appnorth_client_submit_feedback_async", [ClientPtr, FeedbackPtr, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_vote_async", [ClientPtr, c_char_p, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_client_send_chat_message_async", [ClientPtr, c_char_p, c_char_p, *_ASYNC], c_int32, _S),
    # Feedback builder
    Declaration("appnorth_feedback_new", [], FeedbackPtr, non_null),
    Declaration("appnorth_feedback_free", [FeedbackPtr], None, None),
    Declaration("appnorth_feedback_set_text", [FeedbackPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_feedback_set_diagnostics", [FeedbackPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_feedback_add_screenshot",
                [FeedbackPtr, c_void_p, c_size_t, c_char_p, ErrorPtr], c_int32, _S),
    # Storage
    Declaration("appnorth_buffer_set", [BufferPtr, c_void_p, c_size_t, ErrorPtr], c_int32, _S),
    Declaration("appnorth_storage_new_sqlite",
                [c_char_p, c_char_p, POINTER(StoragePtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_storage_new_memory", [POINTER(StoragePtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_storage_new_callbacks",
                [STORAGE_LOAD_FN, STORAGE_SAVE_FN, RELEASE_FN, c_void_p, POINTER(StoragePtr), ErrorPtr],
                c_int32, _S),
    Declaration("appnorth_storage_set_logger", [StoragePtr, LOG_FN, c_int32, c_void_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_storage_free", [StoragePtr], None, None),
    Declaration("appnorth_storage_erase", [StoragePtr, ErrorPtr], c_int32, _S),
    # Offline write queue
    Declaration("appnorth_queue_new", [StoragePtr, c_int32, POINTER(QueuePtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_free", [QueuePtr], None, None),
    Declaration("appnorth_queue_submit_idea",
                [QueuePtr, ClientPtr, c_char_p, c_char_p, c_char_p, c_char_p, Int32Out, ErrorPtr],
                c_int32, _S),
    Declaration("appnorth_queue_submit_comment",
                [QueuePtr, ClientPtr, c_char_p, c_char_p, c_char_p, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_submit_feedback",
                [QueuePtr, ClientPtr, FeedbackPtr, c_char_p, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_flush", [QueuePtr, ClientPtr, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_flush_v2", [QueuePtr, ClientPtr, Int32Out, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_submit_idea_async",
                [QueuePtr, ClientPtr, c_char_p, c_char_p, c_char_p, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_queue_submit_comment_async",
                [QueuePtr, ClientPtr, c_char_p, c_char_p, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_queue_submit_feedback_async",
                [QueuePtr, ClientPtr, FeedbackPtr, c_char_p, *_ASYNC], c_int32, _S),
    Declaration("appnorth_queue_flush_async", [QueuePtr, ClientPtr, *_ASYNC], c_int32, _S),
    Declaration("appnorth_queue_pending_count", [QueuePtr, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_entries", [QueuePtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_discard", [QueuePtr, c_char_p, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_queue_discard_entry", [QueuePtr, c_char_p, Int32Out, ErrorPtr], c_int32, _S),
    # Clocks
    Declaration("appnorth_clock_new_manual", [c_int64, POINTER(ClockPtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_clock_free", [ClockPtr], None, None),
    Declaration("appnorth_clock_advance", [ClockPtr, c_int64, ErrorPtr], c_int32, _S),
    Declaration("appnorth_clock_set_wall", [ClockPtr, c_int64, ErrorPtr], c_int32, _S),
    # Read cache
    Declaration("appnorth_cache_new",
                [StoragePtr, c_int32, ClockPtr, POINTER(CachePtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_cache_free", [CachePtr], None, None),
    Declaration("appnorth_cache_store_boards", [CachePtr, c_char_p, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_cache_store_ideas",
                [CachePtr, c_char_p, c_char_p, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_cache_boards", [CachePtr, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_cache_ideas", [CachePtr, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_cache_clear", [CachePtr, c_char_p, ErrorPtr], c_int32, _S),
    # Cached-then-fresh reads
    Declaration("appnorth_read_boards", [CachePtr, ClientPtr, READ_FN, c_void_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_read_ideas",
                [CachePtr, ClientPtr, c_char_p, READ_FN, c_void_p, ErrorPtr], c_int32, _S),
    # Analytics events: options
    Declaration("appnorth_events_options_new", [], EventsOptionsPtr, non_null),
    Declaration("appnorth_events_options_free", [EventsOptionsPtr], None, None),
    Declaration("appnorth_events_options_set_client", [EventsOptionsPtr, ClientPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_data_dir", [EventsOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_flush_policy",
                [EventsOptionsPtr, c_int32, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_limits",
                [EventsOptionsPtr, c_int32, c_int64, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_retry",
                [EventsOptionsPtr, c_int32, c_int32, c_int32, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_retry_jitter",
                [EventsOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_require_consent",
                [EventsOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_session_policy",
                [EventsOptionsPtr, c_int32, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_before_send",
                [EventsOptionsPtr, BEFORE_SEND_FN, c_void_p, RELEASE_FN, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_clock", [EventsOptionsPtr, ClockPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_sample_rate",
                [EventsOptionsPtr, c_double, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_remote_settings",
                [EventsOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_options_set_secure_store",
                [EventsOptionsPtr, SECURE_GET_FN, SECURE_SET_FN, RELEASE_FN, c_void_p, ErrorPtr], c_int32, _S),
    # Analytics events
    Declaration("appnorth_events_new", [EventsOptionsPtr, POINTER(EventsPtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_free", [EventsPtr], None, None),
    Declaration("appnorth_events_close", [EventsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_track", [EventsPtr, c_char_p, c_char_p, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_flush", [EventsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_flush_sent", [EventsPtr, c_int32, Int64Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_flush_async", [EventsPtr, c_int32, *_ASYNC], c_int32, _S),
    Declaration("appnorth_events_set_network_type", [EventsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_start_session", [EventsPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_foreground", [EventsPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_session_id", [EventsPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_register", [EventsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_register_once", [EventsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_unregister", [EventsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_super_properties", [EventsPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_set_consent", [EventsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_consent", [EventsPtr, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_identify", [EventsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_reset", [EventsPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_set_push_token", [EventsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_anonymous_id", [EventsPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_stats", [EventsPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_events_pending", [EventsPtr, c_int32, StringOut, ErrorPtr], c_int32, _S),
    # Remote config: options
    Declaration("appnorth_config_options_new", [], ConfigOptionsPtr, non_null),
    Declaration("appnorth_config_options_free", [ConfigOptionsPtr], None, None),
    Declaration("appnorth_config_options_set_client", [ConfigOptionsPtr, ClientPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_data_dir", [ConfigOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_bundled_path", [ConfigOptionsPtr, c_char_p, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_ttl_seconds", [ConfigOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_clock", [ConfigOptionsPtr, ClockPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_poll_interval_ms",
                [ConfigOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_reconnect_backoff_ms",
                [ConfigOptionsPtr, c_int32, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_reconnect_jitter",
                [ConfigOptionsPtr, c_int32, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_options_set_logger",
                [ConfigOptionsPtr, LOG_FN, c_int32, c_void_p, ErrorPtr], c_int32, _S),
    # Remote config
    Declaration("appnorth_config_new", [ConfigOptionsPtr, POINTER(ConfigPtr), ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_free", [ConfigPtr], None, None),
    Declaration("appnorth_config_get_string",
                [ConfigPtr, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_get_int", [ConfigPtr, c_char_p, c_int64, Int64Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_get_double",
                [ConfigPtr, c_char_p, c_double, DoubleOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_get_bool", [ConfigPtr, c_char_p, c_int32, Int32Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_get_json",
                [ConfigPtr, c_char_p, c_char_p, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_snapshot", [ConfigPtr, StringOut, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_source", [ConfigPtr, Int32Out, Int64Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_refresh", [ConfigPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_refresh_async", [ConfigPtr, *_ASYNC], c_int32, _S),
    Declaration("appnorth_config_start_live", [ConfigPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_stop_live", [ConfigPtr, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_add_listener",
                [ConfigPtr, CONFIG_LISTENER_FN, c_void_p, Int64Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_remove_listener", [ConfigPtr, c_int64, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_status", [ConfigPtr, POINTER(appnorth_data_source_status), ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_add_status_listener",
                [ConfigPtr, CONFIG_STATUS_FN, c_void_p, Int64Out, ErrorPtr], c_int32, _S),
    Declaration("appnorth_config_remove_status_listener", [ConfigPtr, c_int64, ErrorPtr], c_int32, _S),
    # out_status is an appnorth_error too; check_status reads the last one, err.
    Declaration("appnorth_config_last_fetch_status",
                [ConfigPtr, ErrorPtr, Int64Out, ErrorPtr], c_int32, _S),
)

#: The declarations by name.
BY_NAME = {d.name: d for d in DECLARATIONS}
#: Declared names, for lookups and the header coverage test.
DECLARED_NAMES = frozenset(BY_NAME)


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

# os.path rather than pathlib: pathlib's imports alone cost about 10 ms,
# a fifth of the import-time budget.
_PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
#: bindings/python/appnorth/_lib.py -> the repository root, when the package
#: is imported from a checkout (see :func:`checkout_root`).
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_PACKAGE_DIR)))
#: The name the system's dynamic loader is asked for (the SONAME).
SYSTEM_NAME = f"libappnorth.so.{EXPECTED_MAJOR}"


def checkout_root() -> Optional[str]:
    """The repository root when this package is the one inside a libappnorth
    checkout (bindings/python/appnorth), else None: an installed package
    never looks into folders that merely happen to sit three levels up."""
    marker = os.path.join(REPO_ROOT, "include", "appnorth.h")
    inside = os.path.join(REPO_ROOT, "bindings", "python", "appnorth")
    if os.path.isfile(marker) and os.path.realpath(inside) == _PACKAGE_DIR:
        return REPO_ROOT
    return None


def _library_files(folder: str) -> List[str]:
    """libappnorth.so* files in ``folder``, the unversioned name first."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    found = sorted((n for n in names if n.startswith("libappnorth.so")), key=lambda n: (n != "libappnorth.so", n))
    return [os.path.join(folder, n) for n in found]


def candidate_paths() -> List[str]:
    """Where the library is looked for when ``APPNORTH_LIBRARY`` is unset,
    in order: the package folder, the system search path (by SONAME), then
    the repository's build folders when imported from a checkout."""
    paths = _library_files(_PACKAGE_DIR) + [SYSTEM_NAME]
    root = checkout_root()
    if root is not None:
        paths += [os.path.join(root, "dist", "lib", "libappnorth.so"),
                  os.path.join(root, ".build", "release", "libappnorth.so"),
                  os.path.join(root, ".build", "debug", "libappnorth.so")]
    return paths


def _explicit_paths(value: str) -> List[str]:
    """``APPNORTH_LIBRARY``: a library file, or a folder holding one."""
    path = os.path.expanduser(value)
    if os.path.isdir(path):
        return _library_files(path) or [os.path.join(path, "libappnorth.so")]
    return [path]


def _fail(tried: List[Tuple[str, str]]) -> ImportError:
    lines = "\n".join(f"  {path}: {reason}" for path, reason in tried)
    return ImportError(
        "appnorth: cannot load libappnorth.so. Tried:\n"
        f"{lines}\n"
        "Install the wheel that carries it (`make wheel`, then `pip install "
        "dist/appnorth-*.whl`), install the library (`make install`), or set "
        "APPNORTH_LIBRARY to libappnorth.so or its folder (built by `make dist` "
        "in the libappnorth repository).")


def load() -> Tuple[ctypes.CDLL, str]:
    """Find and load the library; returns it and the path loaded.

    When ``APPNORTH_LIBRARY`` is set, only it is tried: an explicit choice
    that fails must not silently fall back to another build.
    """
    tried: List[Tuple[str, str]] = []
    explicit = os.environ.get(LIBRARY_ENV)
    paths = _explicit_paths(explicit) if explicit else candidate_paths()
    if not explicit and not _library_files(_PACKAGE_DIR):
        tried.append((os.path.join(_PACKAGE_DIR, "libappnorth.so*"), "none there (a wheel puts it there)"))
    for path in paths:
        by_name = os.sep not in path
        if not by_name and not os.path.isfile(path):
            tried.append((path, "not found"))
            continue
        try:
            dll = ctypes.CDLL(path)
        except OSError as exc:
            place = f"{path} (the system search path: LD_LIBRARY_PATH, ld.so.cache)" if by_name else path
            tried.append((place, f"failed to load: {exc}"))
            continue
        return dll, _loaded_path(dll, path) if by_name else path
    if explicit:
        tried[-1] = (tried[-1][0], tried[-1][1] + f" (from {LIBRARY_ENV}={explicit})")
    raise _fail(tried)


def _loaded_path(dll: ctypes.CDLL, name: str) -> str:
    """The file the dynamic loader picked for ``name`` (from /proc/self/maps)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                if line.rstrip().endswith(name) or f"/{name}" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return name


#: Declared functions found missing from the loaded library (an older minor
#: version: the API grows by addition) when first used; calling one raises
#: InternalError. :func:`missing_functions` checks them all.
MISSING: "set[str]" = set()


def _missing_function(name: str) -> Callable[..., Any]:
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise errors.InternalError(
            f"{LIBRARY_PATH} (version {C.appnorth_version()}) does not export {name}: "
            f"the library is older than this binding. Rebuild it (`make dist`) or "
            f"point {LIBRARY_ENV} at a current build.")

    missing.__name__ = name
    return missing


def _symbol(name: str) -> Any:
    """A new ctypes function object for ``name`` (``DLL[name]``: never the
    one ``DLL.<name>`` caches, so no two users share argtypes), or None when
    the library does not export it."""
    try:
        return DLL[name]
    except AttributeError:
        MISSING.add(name)
        return None


def ffi(declaration: Declaration) -> Any:
    """Declare one C function of the loaded library (libarchive-c style):
    argument types, result type and error check, in one place."""
    func = _symbol(declaration.name)
    if func is None:
        return _missing_function(declaration.name)
    func.argtypes = list(declaration.argtypes)
    func.restype = declaration.restype
    if declaration.errcheck is not None:
        func.errcheck = declaration.errcheck
    return func


class _Functions:
    """The declared functions, by name: ``C.appnorth_client_new(...)``.

    Each is bound from its :data:`DECLARATIONS` entry (:func:`ffi`) the
    first time it is looked up, then stored as a plain attribute, so later
    lookups cost what any attribute does (binding all of them at import
    cost about 1 ms, and most programs use a few). Two threads binding one
    at the same moment each make an identical function object; either may
    be kept."""

    def __getattr__(self, name: str) -> Any:
        declaration = BY_NAME.get(name)
        if declaration is None:
            raise AttributeError(f"{name} is not declared in appnorth._lib.DECLARATIONS")
        func = ffi(declaration)
        setattr(self, name, func)
        return func


DLL, LIBRARY_PATH = load()

#: The declared functions, by name: ``C.appnorth_client_new(...)``.
C = _Functions()


def missing_functions() -> "set[str]":
    """Every declared function the loaded library does not export."""
    return {d.name for d in DECLARATIONS if _symbol(d.name) is None}


def thin(name: str) -> Any:
    """A second ctypes function for a hot call (``Events.track``, config
    getters), declared from the same table entry but cheaper to call: every
    pointer argument is a plain address (``int``; the handle's
    ``Handle._addr``, a :class:`CallScratch` field) and there is no errcheck,
    so the caller checks the status itself (:func:`status_error`)."""
    declaration = BY_NAME[name]
    func = _symbol(name)  # a new function object: C.<name> keeps its errcheck
    if func is None:
        return _missing_function(name)
    func.argtypes = [c_void_p if isinstance(t, type) and issubclass(t, ctypes._Pointer) else t
                     for t in declaration.argtypes]
    func.restype = declaration.restype
    return func


class CallScratch:
    """Out-parameters for one thin call: the error struct and an 8-byte
    value slot read as whichever type the call writes (``int32``,
    ``int64``, ``double`` or a ``char *``). Scratches are reused through
    :data:`SCRATCH` so that a call that succeeds allocates nothing."""

    __slots__ = ("err", "err_addr", "value", "value_addr", "int32", "int64", "double", "string")

    def __init__(self) -> None:
        self.err = appnorth_error()
        self.err_addr = ctypes.addressof(self.err)
        self.value = (c_char * 8)()
        self.value_addr = ctypes.addressof(self.value)
        self.int32 = c_int32.from_buffer(self.value)
        self.int64 = c_int64.from_buffer(self.value)
        self.double = c_double.from_buffer(self.value)
        self.string = c_void_p.from_buffer(self.value)


#: Idle scratches. A call pops one (or makes one when none is idle) and
#: appends it back when done: both atomic under the GIL, so each scratch has
#: one user at a time whatever the threads, and a call made from inside
#: another (a library callback, a signal handler) gets its own.
SCRATCH: List[CallScratch] = []


def _check_version() -> None:
    if _symbol("appnorth_version") is None:
        raise ImportError(f"appnorth: {LIBRARY_PATH} does not export appnorth_version: "
                          "it is not libappnorth")
    text = C.appnorth_version()
    try:
        major = int(text.split(".", 1)[0])
    except ValueError:
        raise ImportError(f"appnorth: {LIBRARY_PATH} reports a malformed version {text!r}") from None
    if major != EXPECTED_MAJOR:
        raise ImportError(
            f"appnorth: {LIBRARY_PATH} is version {text}, but this binding needs "
            f"major version {EXPECTED_MAJOR}. Install a matching library or binding.")


_check_version()


# ---------------------------------------------------------------------------
# Helpers used by the object layer
# ---------------------------------------------------------------------------

def to_c_string(value: TextArg, name: str) -> Optional[bytes]:
    """A ``const char *`` argument: None -> NULL, ``str`` -> UTF-8,
    ``bytes`` passed through unchanged (the library validates the UTF-8).

    Raises InvalidUTF8Error for a ``str`` that cannot be encoded (lone
    surrogates), InvalidArgumentError for an embedded NUL (C would silently
    cut the string there), TypeError for other types.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if "\0" in value:
            raise errors.InvalidArgumentError(f"{name} contains a NUL character")
        try:
            return value.encode()
        except UnicodeEncodeError as exc:
            raise errors.InvalidUTF8Error(f"{name} is not valid UTF-8: {exc.reason}") from None
    if isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise TypeError(f"{name} must be str, bytes or None, not {type(value).__name__}")
    if b"\0" in data:
        raise errors.InvalidArgumentError(f"{name} contains a NUL character")
    return data


def _to_int(value: Any, name: str, low: int, high: int) -> int:
    """A fixed-width integer argument; ctypes would silently wrap values
    outside [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not low <= value <= high:
        raise errors.InvalidArgumentError(f"{name} is out of range: {value}")
    return value


def to_int32(value: Any, name: str) -> int:
    """An ``int32_t`` argument."""
    return _to_int(value, name, INT32_MIN, INT32_MAX)


def to_int64(value: Any, name: str) -> int:
    """An ``int64_t`` argument."""
    return _to_int(value, name, INT64_MIN, INT64_MAX)


def to_c_path(value: PathArg, name: str) -> Optional[bytes]:
    """A file or directory path argument: ``str``, ``bytes`` or any
    ``os.PathLike``; None -> NULL."""
    if value is None:
        return None
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"{name} must be a str, bytes or os.PathLike, not {type(value).__name__}")
    return to_c_string(os.fspath(value), name)


def take_string(out: c_void_p) -> Optional[str]:
    """Read a library-owned string from a ``char **`` out-parameter, free it
    with appnorth_string_free() and clear the pointer. NULL gives None."""
    address = out.value
    if not address:
        return None
    try:
        return ctypes.string_at(address).decode("utf-8")
    finally:
        out.value = None
        C.appnorth_string_free(address)


def call_returning_string(func: Any, *args: Any) -> str:
    """Call ``func(*args, char **out, appnorth_error *err)`` and return the
    string it hands out (freed here, on success or failure)."""
    out = c_void_p()
    err = appnorth_error()
    try:
        func(*args, out, err)
    finally:
        text = take_string(out)
    if text is None:
        raise errors.InternalError(f"{func.__name__} succeeded but returned NULL")
    return text


# ---------------------------------------------------------------------------
# Exceptions raised inside callbacks that run on the calling thread
# ---------------------------------------------------------------------------

_callback_state = threading.local()


def stash_callback_error(exc: BaseException, where: str) -> None:
    """Record an exception raised inside a synchronous callback (storage,
    read delivery) so that the Python call that triggered it re-raises it
    (see :func:`callback_errors`). Outside such a call it is reported to
    stderr. Either way it never unwinds into C."""
    if getattr(_callback_state, "depth", 0):
        if getattr(_callback_state, "exc", None) is None:
            _callback_state.exc = exc
        return
    from ._handle import report_callback_error

    report_callback_error(where)


@contextmanager
def callback_errors() -> Iterator[None]:
    """Around a call whose callbacks run on this thread: a callback's
    exception becomes the ``__cause__`` of the call's AppNorthError, or is
    re-raised itself when the call succeeded."""
    saved = getattr(_callback_state, "exc", None)
    _callback_state.exc = None
    _callback_state.depth = getattr(_callback_state, "depth", 0) + 1
    try:
        try:
            yield
        except errors.AppNorthError as error:
            pending = _callback_state.exc
            if pending is not None and error.__cause__ is None:
                raise error from pending
            raise
        pending = _callback_state.exc
        if pending is not None:
            raise pending
    finally:
        _callback_state.depth -= 1
        _callback_state.exc = saved


@contextmanager
def in_callback() -> Iterator[None]:
    """Marks the current thread as running a library callback (see
    :func:`inside_callback`)."""
    _callback_state.running = getattr(_callback_state, "running", 0) + 1
    try:
        yield
    finally:
        _callback_state.running -= 1


def inside_callback() -> bool:
    """True while this thread runs a callback the library called. Handles
    must not be freed there: the library may be using them further up the
    stack (and appnorth_events_free must not run in a log callback)."""
    return bool(getattr(_callback_state, "running", 0))


# ---------------------------------------------------------------------------
# Callbacks released by the library (appnorth_release_fn)
# ---------------------------------------------------------------------------

# Host callbacks whose lifetime the library ends with a release call (host
# storages, secure stores) stay referenced here until that call. Afterwards
# their thunks are kept, emptied of the Python functions, in _released: a
# thunk must not be freed while it may still be returning into C.
_pinned: "dict[int, Tuple[Any, ...]]" = {}
_released: List[Tuple[Any, ...]] = []
_pin_lock = threading.Lock()
_next_pin = [1]


def pin(thunks: Sequence[Any], payload: Sequence[Any] = ()) -> int:
    """Keep CFUNCTYPE ``thunks`` (and Python ``payload``) alive until the
    library calls :data:`RELEASE` with the returned key as user_data."""
    with _pin_lock:
        key = _next_pin[0]
        _next_pin[0] += 1
        _pinned[key] = (tuple(thunks), tuple(payload))
    return key


def unpin(key: int) -> None:
    """Forget a pin the library will never release (creation failed early)."""
    with _pin_lock:
        _pinned.pop(key, None)


def pending_pins() -> int:
    """How many pinned callback sets the library has not released yet."""
    with _pin_lock:
        return len(_pinned)


def _release(user_data: Optional[int]) -> None:
    with _pin_lock:
        entry = _pinned.pop(user_data or 0, None)
        if entry is not None:
            _released.append(entry[0])


#: The appnorth_release_fn handed out with every pinned callback set.
RELEASE = RELEASE_FN(_release)


# ---------------------------------------------------------------------------
# Live handles: closed at interpreter exit
# ---------------------------------------------------------------------------

_live: "weakref.WeakSet[Any]" = weakref.WeakSet()
_live_lock = threading.Lock()


_exit_hook_registered = False


def register_live(obj: Any) -> None:
    """Track ``obj`` (weakly) so that it is closed at interpreter exit."""
    if not _exit_hook_registered:
        _register_exit_hook()
    with _live_lock:
        _live.add(obj)


def _register_exit_hook() -> None:
    """Register :func:`close_all_live` with :mod:`atexit`, once, when the
    first handle is made. logging is imported first: importing it registers
    its own shutdown hook, and atexit runs hooks last-in first-out, so
    handles close while logging still works and their last log lines are
    delivered. The fork hooks (:func:`_before_fork`) are registered then
    too, after logging's: before-hooks run last-registered first, so the
    hold waits for callbacks before logging takes its lock for the fork."""
    global _exit_hook_registered
    import logging  # noqa: F401

    with _live_lock:
        if _exit_hook_registered:
            return
        _exit_hook_registered = True
    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(before=_before_fork, after_in_parent=_resume_callbacks,
                            after_in_child=_resume_callbacks)


#: How long a fork waits for library callbacks running on other threads.
FORK_HOLD_MS = 1000


def _before_fork() -> None:
    """os.fork() is about to run: no library thread may be entering Python
    at that moment. CPython before 3.11.10 / 3.12.1 (gh-112275) makes a
    foreign thread's thread state under its runtime lock without the GIL,
    and a child forked meanwhile hangs in PyOS_AfterFork_Child (22 of 9,000
    forks here, with completions on the transfer thread). The hold stops
    new callbacks and waits, with the GIL released by ctypes, for running
    ones to return (at most FORK_HOLD_MS: a callback that blocks longer
    does not stop the fork)."""
    try:
        C.appnorth_callbacks_hold(FORK_HOLD_MS, appnorth_error())
    except Exception:  # a timeout: the fork goes ahead, held callbacks wait for the resume
        pass


def _resume_callbacks() -> None:
    C.appnorth_callbacks_resume()


def _at_exit() -> None:
    """The interpreter exits: close every live handle (an Events queue
    uploads for at most 2 s first), then appnorth_shutdown(), so that no
    library thread runs and no callback reaches Python while it finalises,
    whatever was left open (handles made after this point, or kept alive
    by a reference cycle, included)."""
    close_all_live()
    try:
        C.appnorth_shutdown(2000, appnorth_error())
    except Exception as exc:  # pragma: no cover - reported, not raised
        try:
            sys.stderr.write(f"appnorth: appnorth_shutdown at exit: {exc!r}\n")
        except Exception:
            pass


def unregister_live(obj: Any) -> None:
    with _live_lock:
        _live.discard(obj)


# Handles garbage-collected inside a library callback, where they cannot be
# freed (the library may be using them further up the stack): kept alive,
# with their callbacks, and closed at exit instead of being leaked with a
# library thread still calling into freed CFUNCTYPE objects.
_orphans: List[Any] = []


def keep_orphan(obj: Any) -> None:
    """Keep ``obj`` (a handle whose close was refused during garbage
    collection) strongly referenced until :func:`close_all_live`."""
    with _live_lock:
        _orphans.append(obj)


def close_all_live() -> None:
    """Close every live handle. Registered with :mod:`atexit`: a library
    thread calling into Python (a log callback, a config listener) while the
    interpreter is finalising crashes the process, and closing stops those
    threads first. Errors are reported, never raised, so every handle gets
    its turn."""
    with _live_lock:
        objects = list(_live) + _orphans
        _orphans.clear()
    for obj in objects:
        try:
            obj.close()
        except Exception as exc:  # pragma: no cover - reported, not raised
            try:
                sys.stderr.write(f"appnorth: error closing {obj!r} at exit: {exc!r}\n")
            except Exception:
                pass


def _after_fork_in_child() -> None:
    """A forked child starts with fresh binding locks (a parent thread may
    have held one at the moment of fork()) and without the parent's live
    handles, which are not the child's to close: each live object forgets
    its pointer here, on the child's only thread, and makes a new handle on
    its first use (appnorth._fork). The library quiesces its own locks
    across fork() itself."""
    global _live_lock, _pin_lock, _live
    inherited = list(_live)
    _live_lock = threading.Lock()
    _pin_lock = threading.Lock()
    _live = weakref.WeakSet()
    _orphans.clear()
    for obj in inherited:
        try:
            obj._forget_after_fork()
        except Exception:  # pragma: no cover - never stop a fork; the object then refuses (pid check)
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

