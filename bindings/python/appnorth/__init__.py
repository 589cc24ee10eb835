"""Python binding for libappnorth, the offline-first AppNorth client SDK core.

Reads and writes::

    import appnorth

    with appnorth.Client("http://127.0.0.1:8080", "demo") as client:
        boards = client.list_boards()["boards"]
        client.submit_idea(boards[0]["id"], "Dark mode")

Offline writes and cached reads::

    queue = appnorth.OfflineQueue(appnorth.Storage.sqlite(data_dir, "queue"))
    queue.submit_idea(client, board_id, "Dark mode")  # False: kept while offline
    queue.flush(client)                                # later: sends it, same key
    cache = appnorth.ReadCache(appnorth.Storage.sqlite(data_dir, "cache"))
    for source, boards in cache.read_boards(client):   # cache first, then network
        ...

Remote config with live updates::

    config = appnorth.Config(client, data_dir, bundled_path="appdna-config.json")

    @config.on_update
    def changed(values, changed_keys, tier):  # on a library thread
        ...

    config.start_live()
    price = config.get_double("price", 4.99)

The shared library is found through ``APPNORTH_LIBRARY`` (a path to
libappnorth.so), then the package folder, then the repository's build
folders (``dist/lib``, ``.build/release``, ``.build/debug``).
:data:`LIBRARY_PATH` is the file actually loaded.

Failures raise subclasses of :class:`AppNorthError`, one per status code.
Live handles (clients, event queues, configs) are closed at interpreter exit.
"""

from __future__ import annotations

from . import _lib
from ._lib import (
    CACHE_DEFAULT_TTL_SECONDS,
    CONFIG_DEFAULT_BACKOFF_BASE_MS,
    CONFIG_DEFAULT_BACKOFF_MAX_MS,
    CONFIG_DEFAULT_POLL_INTERVAL_MS,
    CONFIG_DEFAULT_TTL_SECONDS,
    CONFIG_AUTH_HOLD_MS,
    CONFIG_MAX_STREAM_EVENT_BYTES,
    CONFIG_STATE_INITIALIZING,
    CONFIG_STATE_INTERRUPTED,
    CONFIG_STATE_OFF,
    CONFIG_STATE_OFFLINE,
    CONFIG_STATE_VALID,
    CONFIG_TIER_BUNDLED,
    CONFIG_TIER_CACHED,
    CONFIG_TIER_DEFAULT,
    CONFIG_TIER_REMOTE,
    CONSENT_GRANTED,
    CONSENT_REVOKED,
    CONSENT_UNKNOWN,
    LIBRARY_PATH,
    ConfigState,
    ConfigTier,
    Consent,
    LogLevel,
    NetworkType,
    Source,
    LOG_DEBUG,
    LOG_ERROR,
    LOG_INFO,
    LOG_WARNING,
    MAX_DIAGNOSTICS_BYTES,
    MAX_FEEDBACK_TEXT_CHARS,
    MAX_CA_PEM_BYTES,
    GZIP_WRITE_THRESHOLD_BYTES,
    MAX_SCREENSHOT_BYTES,
    MAX_BUFFER_BYTES,
    MAX_SCREENSHOTS,
    MAX_TEXT_CHARS,
    MAX_TITLE_CHARS,
    MAX_URL_BYTES,
    DISPATCH_LOG_LIMIT,
    BEFORE_SEND_DROP,
    BEFORE_SEND_KEEP,
    BEFORE_SEND_REPLACE,
    NETWORK_CELLULAR,
    NETWORK_EXPENSIVE_CELLULAR,
    NETWORK_UNKNOWN,
    NETWORK_WIFI,
    QUEUE_DEFAULT_LIMIT,
    SOURCE_CACHE,
    SOURCE_NETWORK,
)
from ._lib import C as _C
from .client import DEFAULT_API_TIMEOUT_MS, DEFAULT_RESOURCE_TIMEOUT_MS, LOGGER_NAME, Client, Feedback
from .errors import (
    E_AUTHENTICATION,
    E_CONFLICT,
    E_HTTP,
    E_CANCELLED,
    E_INTERNAL,
    E_INVALID_ARGUMENT,
    E_INVALID_JSON,
    E_INVALID_UTF8,
    E_NETWORK,
    E_NOT_FOUND,
    E_QUEUE_FULL,
    E_SERVER,
    E_STORAGE,
    E_TIMEOUT,
    E_TOO_LARGE,
    E_VALIDATION,
    E_WRONG_STATE,
    OK,
    AppNorthError,
    AppNorthTimeoutError,
    AuthenticationError,
    CancelledError,
    ConflictError,
    HTTPError,
    InternalError,
    InvalidArgumentError,
    InvalidJSONError,
    InvalidUTF8Error,
    NetworkError,
    NotFoundError,
    QueueFullError,
    ServerError,
    Status,
    StorageError,
    TimeoutError,
    TooLargeError,
    ValidationError,
    WrongStateError,
)

from .config import BundledConfigWarning, Config
from .events import Events
from .offline import ManualClock, OfflineQueue, ReadCache, Storage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._config_types import ConfigListener, ConfigSource, ConfigStatus, FetchStatus
else:
    def __getattr__(name: str) -> object:
        """ConfigListener, ConfigSource and FetchStatus, on first use: they
        need typing, which ``import appnorth`` leaves out (see
        appnorth._config_types)."""
        if name in ("ConfigListener", "ConfigSource", "ConfigStatus", "FetchStatus"):
            from . import _config_types

            return getattr(_config_types, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: The binding's own version (the library's is :func:`version`).
__version__ = "0.4.0"


def version() -> str:
    """The loaded library's version, ``"MAJOR.MINOR.PATCH"``."""
    result: str = _C.appnorth_version()
    return result


def version_number() -> int:
    """The loaded library's version as ``MAJOR * 10000 + MINOR * 100 + PATCH``."""
    return int(_C.appnorth_version_number())


def status_str(code: int) -> str:
    """The library's name for a status code, e.g. ``"network error"``
    (``"unknown status"`` for codes it does not know)."""
    result: str = _C.appnorth_status_str(_lib.to_int32(code, "code"))
    return result


def shutdown(timeout_ms: int = 2000) -> None:
    """Stop the library for good (``appnorth_shutdown``): every handle's
    threads stop, no callback is ever called again, and every later call
    raises :class:`WrongStateError`. The ``atexit`` hook calls it after
    closing the live handles; call it yourself from an exit path that
    ``atexit`` does not cover. Waits up to ``timeout_ms`` for callbacks
    running on other threads (:class:`TimeoutError` past it); raises
    :class:`WrongStateError` from inside a library callback."""
    _C.appnorth_shutdown(_lib.to_int32(timeout_ms, "timeout_ms"), _lib.appnorth_error())


__all__ = [
    "__version__",
    "LIBRARY_PATH",
    "version",
    "shutdown",
    "version_number",
    "status_str",
    "Client",
    "Feedback",
    "Storage",
    "OfflineQueue",
    "ReadCache",
    "ManualClock",
    "Events",
    "Config",
    "ConfigListener",
    "ConfigSource",
    "FetchStatus",
    "ConfigStatus",
    "BundledConfigWarning",
    "CONFIG_TIER_DEFAULT",
    "CONFIG_TIER_BUNDLED",
    "CONFIG_TIER_CACHED",
    "CONFIG_TIER_REMOTE",
    "CONFIG_DEFAULT_TTL_SECONDS",
    "CONFIG_DEFAULT_POLL_INTERVAL_MS",
    "CONFIG_DEFAULT_BACKOFF_BASE_MS",
    "CONFIG_DEFAULT_BACKOFF_MAX_MS",
    "CONFIG_MAX_STREAM_EVENT_BYTES",
    "CONFIG_AUTH_HOLD_MS",
    "CONFIG_STATE_INITIALIZING",
    "CONFIG_STATE_VALID",
    "CONFIG_STATE_INTERRUPTED",
    "CONFIG_STATE_OFFLINE",
    "CONFIG_STATE_OFF",
    "NETWORK_UNKNOWN",
    "NETWORK_WIFI",
    "NETWORK_CELLULAR",
    "NETWORK_EXPENSIVE_CELLULAR",
    "BEFORE_SEND_DROP",
    "BEFORE_SEND_KEEP",
    "BEFORE_SEND_REPLACE",
    "CONSENT_UNKNOWN",
    "CONSENT_REVOKED",
    "CONSENT_GRANTED",
    "DEFAULT_API_TIMEOUT_MS",
    "DEFAULT_RESOURCE_TIMEOUT_MS",
    "LOGGER_NAME",
    "LOG_DEBUG",
    "LOG_INFO",
    "LOG_WARNING",
    "LOG_ERROR",
    "SOURCE_CACHE",
    "SOURCE_NETWORK",
    "MAX_TITLE_CHARS",
    "MAX_TEXT_CHARS",
    "MAX_FEEDBACK_TEXT_CHARS",
    "MAX_DIAGNOSTICS_BYTES",
    "MAX_URL_BYTES",
    "DISPATCH_LOG_LIMIT",
    "MAX_SCREENSHOTS",
    "MAX_CA_PEM_BYTES",
    "GZIP_WRITE_THRESHOLD_BYTES",
    "MAX_SCREENSHOT_BYTES",
    "MAX_BUFFER_BYTES",
    "QUEUE_DEFAULT_LIMIT",
    "CACHE_DEFAULT_TTL_SECONDS",
    "OK",
    "E_INVALID_ARGUMENT",
    "E_INVALID_JSON",
    "E_INVALID_UTF8",
    "E_TOO_LARGE",
    "E_NETWORK",
    "E_VALIDATION",
    "E_AUTHENTICATION",
    "E_NOT_FOUND",
    "E_CONFLICT",
    "E_SERVER",
    "E_HTTP",
    "E_STORAGE",
    "E_QUEUE_FULL",
    "E_WRONG_STATE",
    "E_INTERNAL",
    "E_TIMEOUT",
    "E_CANCELLED",
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
    # Not "TimeoutError": `from appnorth import *` must keep the built-in.
    # appnorth.TimeoutError is AppNorthTimeoutError, a subclass of it.
    "Status",
    "LogLevel",
    "Source",
    "NetworkType",
    "Consent",
    "ConfigTier",
    "ConfigState",
]
