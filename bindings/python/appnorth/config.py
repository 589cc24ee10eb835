"""Remote config: :class:`Config`.

A config is one JSON object of top-level keys, resolved over tiers, highest
first: remote (received by this object), cached (persisted in the data
directory by an earlier fetch), bundled (the host's JSON file), default
(nothing: every getter returns the caller's default). The effective config
is the whole document of the highest tier available; tiers are not merged.

Reads are served from memory and never wait for the network. A fetched
config is fresh for the TTL (3600 s by default); a read of a stale one
starts a background fetch and returns the stale value at once.
:meth:`Config.start_live` keeps it current over the server's event stream
(with reconnect backoff and polling as fallback) on a library thread.

Listeners (:meth:`Config.add_listener`, :meth:`Config.on_update`) receive
``(config: dict, changed_keys: list[str], tier: int)`` on every change of
the effective config's content, on that library thread or on the thread
running :meth:`Config.refresh` (the caller's; on the main thread, the worker
thread the binding runs it on so that Ctrl-C can interrupt it). An exception raised by a listener is logged
to the ``"appnorth"`` logger (with its traceback) and never reaches the
library; the other listeners and later updates are unaffected.

Closing a config stops its library thread before ``close()`` returns, and
live configs are closed at interpreter exit, so no library thread calls into
a finalising interpreter. ``close()`` from inside a listener (or any other
library callback) raises WrongStateError: close it from another thread, or
call :meth:`Config.stop_live` or :meth:`Config.remove_listener` there,
which are allowed.
"""

from __future__ import annotations

import ctypes
import threading

from . import _lib, errors
from ._fork import reopenable
from ._handle import Handle, report_callback_error
from ._lib import C, appnorth_error
from .client import LOGGER_NAME, Client, _make_log_callback, _min_library_level, parse_json
from .offline import ManualClock

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Any, Callable, Dict, List, Optional, Tuple, Union

    from ._config_types import ConfigListener, ConfigSource, ConfigStatus, ConfigStatusListener, FetchStatus
    from ._lib import PathArg, TextArg
    from .client import LoggerArg
else:
    def __getattr__(name: str) -> object:
        """ConfigListener, ConfigSource and FetchStatus, on first use (they
        need typing: see appnorth._config_types)."""
        if name in ("ConfigListener", "ConfigSource", "ConfigStatus", "ConfigStatusListener", "FetchStatus"):
            from . import _config_types

            return getattr(_config_types, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_GET_STRING = _lib.thin("appnorth_config_get_string")
_GET_INT = _lib.thin("appnorth_config_get_int")
_GET_DOUBLE = _lib.thin("appnorth_config_get_double")
_GET_BOOL = _lib.thin("appnorth_config_get_bool")
_GET_JSON = _lib.thin("appnorth_config_get_json")


def _tier(value: int) -> "_lib.ConfigTier":
    """A tier from the library as the enum (a value this binding does not
    know, from a newer library, is kept as a plain int)."""
    try:
        return _lib.ConfigTier(value)
    except ValueError:
        return value  # type: ignore[return-value]


__all__ = ["Config", "ConfigListener", "ConfigSource", "ConfigStatus", "ConfigStatusListener", "FetchStatus",
           "BundledConfigWarning"]

class BundledConfigWarning(RuntimeWarning):
    """The bundled config file could not be used: the config opened without
    it (on the cached tier or the getters' defaults). ``error`` is the
    reason, also kept as :attr:`Config.bundled_error`. Turn it into an
    exception with ``warnings.simplefilter("error", BundledConfigWarning)``
    to refuse to open without the bundle."""

    def __init__(self, error: errors.AppNorthError) -> None:
        super().__init__(str(error))
        self.error = error


#: Statuses of appnorth_config_options_set_bundled_path() that mean "this file
#: cannot be used" (the config then opens without it), as opposed to a bad
#: argument.
_BAD_BUNDLE = frozenset({errors.E_STORAGE, errors.E_INVALID_JSON, errors.E_TOO_LARGE})


def _report_listener_error(listener: Optional[ConfigListener]) -> None:
    """Log the exception being handled (raised by a listener) with its
    traceback. Falls back to stderr if logging itself fails."""
    try:
        import logging

        logging.getLogger(LOGGER_NAME).error(
            "exception in config listener %r ignored", listener, exc_info=True)
    except BaseException:  # noqa: BLE001 - never propagate into C
        report_callback_error("a config listener")


def _loads(text: Optional[bytes], empty: Any) -> Any:
    return parse_json(text.decode("utf-8")) if text else empty


class _Listeners:
    """The Python side of one config's listeners.

    The library calls a single CFUNCTYPE object (:attr:`thunk`) for every
    registration, with a per-registration key as ``user_data``; the key
    selects the Python function. The thunk therefore lives exactly as long
    as the config (no thunk is ever dropped while the library may still be
    running it, e.g. when a listener removes itself), and holds no
    reference to the Config object, so a Config can still be garbage
    collected, and closed, while listeners are registered.
    """

    def __init__(self, local: threading.local) -> None:
        self._make_thunk()
        self._lock = threading.Lock()
        self._functions: Dict[int, ConfigListener] = {}  # key -> listener
        self._keys: Dict[int, int] = {}  # library token -> key
        self._next_key = 1
        self._closing = False
        self._local = local

    def _make_thunk(self) -> None:
        self.thunk = _lib.CONFIG_LISTENER_FN(self._deliver)

    def reserve(self, listener: ConfigListener) -> int:
        with self._lock:
            key = self._next_key
            self._next_key += 1
            self._functions[key] = listener
            return key

    def bind(self, key: int, token: int) -> None:
        with self._lock:
            self._keys[token] = key

    def forget_key(self, key: int) -> None:
        with self._lock:
            self._functions.pop(key, None)

    def forget_token(self, token: int) -> None:
        with self._lock:
            key = self._keys.pop(token, None)
            if key is not None:
                self._functions.pop(key, None)

    def tokens_of(self, listener: ConfigListener) -> List[int]:
        with self._lock:
            return [token for token, key in self._keys.items() if self._functions.get(key) == listener]

    def registered(self) -> List[Tuple[int, ConfigListener]]:
        """Every registration as ``(token, listener)``, oldest first."""
        with self._lock:
            return [(token, self._functions[key]) for token, key in sorted(self._keys.items(), key=lambda i: i[1])
                    if key in self._functions]

    def registered_tokens(self) -> List[int]:
        with self._lock:
            return list(self._keys)

    def count(self) -> int:
        with self._lock:
            return len(self._keys)

    def stop(self) -> None:
        """No listener call starts after this (close() has begun)."""
        with self._lock:
            self._closing = True

    def _deliver(self, config_json: Optional[bytes], changed_json: Optional[bytes], tier: int,
                 user_data: Optional[int]) -> None:
        self._call(user_data, lambda listener: listener(_loads(config_json, {}), _loads(changed_json, []), _tier(tier)))

    def _call(self, user_data: Optional[int], run: Callable[[Any], Any]) -> None:
        listener: Optional[ConfigListener] = None
        try:
            with self._lock:
                if not self._closing:
                    listener = self._functions.get(user_data or 0)
            if listener is None:
                return
            # Marks this thread as inside the config's callback: Config.close()
            # refuses to run here.
            self._local.in_callback = getattr(self._local, "in_callback", 0) + 1
            try:
                with _lib.in_callback():
                    run(listener)
            finally:
                self._local.in_callback -= 1
        except Exception:  # noqa: BLE001 - reported, never propagated into C
            _report_listener_error(listener)
        except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt, SystemExit
            # Re-raised by refresh() when delivered on its thread, else reported.
            _lib.stash_callback_error(exc, "a config listener")


def _status(status: "_lib.appnorth_data_source_status") -> "ConfigStatus":
    """The library's struct as a ConfigStatus (a state this binding does not
    know, from a newer library, is kept as a plain int)."""
    from ._config_types import ConfigStatus

    try:
        state = _lib.ConfigState(status.state)
    except ValueError:
        state = status.state  # type: ignore[assignment]
    error: Optional[errors.AppNorthError] = None
    last = status.last_error
    if last.code != errors.OK:
        error = errors.make_error(last.code, last.text() or str(C.appnorth_status_str(last.code)), last.http_status)
    return ConfigStatus(state, status.since_ms, error, status.last_error_ms)


class _StatusListeners(_Listeners):
    """The status listeners: the same bookkeeping, another thunk."""

    def _make_thunk(self) -> None:
        self.thunk = _lib.CONFIG_STATUS_FN(self._deliver_status)

    def _deliver_status(self, status: Any, user_data: Optional[int]) -> None:
        value = _status(status.contents)
        self._call(user_data, lambda listener: listener(value))


def _int32_or_none(value: Optional[int], name: str) -> Optional[int]:
    return None if value is None else _lib.to_int32(value, name)


class Config(Handle):
    """Remote config for one client's API and App ID (``appnorth_config``).

    Args:
        client: whose API URL, App ID, credential and timeouts the config
            uses. The config keeps its own reference: the client may be
            closed first.
        data_dir: the data directory that holds the cached tier (created
            0700), or None for none (nothing persisted). One config per
            data directory and App ID may be open in a process.
        bundled_path: a JSON object file used as the bundled tier (the
            seed's ``appdna-config.json``), read and checked here. A file
            that cannot be used (missing or unreadable: StorageError; not a
            JSON object: InvalidJSONError; over 16 MiB: TooLargeError, each
            naming the file) does not stop the config from opening: it
            opens without the bundle, on the cached tier or the getters'
            defaults, keeps the error in :attr:`bundled_error` and issues a
            :class:`BundledConfigWarning`.
        ttl_seconds: how long a fetched config is fresh, 1 to 31536000
            (default CONFIG_DEFAULT_TTL_SECONDS, 3600; 0 also means it).
        clock: a ManualClock TTLs and fetch times are read from, or None
            for the system clock.
        poll_interval_ms: polling period while the live stream is down, 10
            to 86400000 (default CONFIG_DEFAULT_POLL_INTERVAL_MS, 60000).
        reconnect_backoff_ms: ``(base_ms, max_ms)`` for stream reconnects
            and after a failed background fetch: the n-th consecutive
            failure waits up to ``base * 2**(n-1)``, capped at ``max``, less
            random jitter (default (1000, 60000); 0 picks a default).
        reconnect_jitter_percent: the largest share of each reconnect wait
            that jitter removes (default 50; 0 to 100). Spreads the
            reconnects of a fleet that lost its streams together.
        logger: None (the default) logs through the client's logger;
            ``True`` to the ``"appnorth"`` logger; a :class:`logging.Logger`
            to that one; ``False`` turns the config's logging off.

    No network traffic happens here and no thread starts. Calls are
    thread-safe.

    Made before fork(), it works in the child: on first use there it makes
    a new handle with the same arguments, registers its listeners again
    (their tokens still remove them) and starts live updates if they were
    on. Not when made with a ManualClock (WrongStateError).
    """

    _kind = "config"
    _listeners: Optional[_Listeners] = None
    _status_listeners: Optional[_StatusListeners] = None
    #: Why the bundled file was left out (StorageError, InvalidJSONError or
    #: TooLargeError, naming the file), or None.
    bundled_error: Optional[errors.AppNorthError] = None
    #: start_live() was called last (not stop_live()): a forked child's
    #: reopen starts live updates again.
    _live_wanted = False
    #: In a forked child: the parent's listener tokens -> the new handle's.
    _token_alias: Optional[Dict[int, int]] = None

    @reopenable
    def __init__(
        self,
        client: Client,
        data_dir: PathArg,
        *,
        bundled_path: PathArg = None,
        ttl_seconds: Optional[int] = None,
        clock: Optional[ManualClock] = None,
        poll_interval_ms: Optional[int] = None,
        reconnect_backoff_ms: Optional[Tuple[int, int]] = None,
        reconnect_jitter_percent: Optional[int] = None,
        logger: LoggerArg = None,
    ) -> None:
        self._init_state()
        if not isinstance(client, Client):
            raise TypeError(f"client must be a Client, not {type(client).__name__}")
        if clock is not None and not isinstance(clock, ManualClock):
            raise TypeError(f"clock must be a ManualClock or None, not {type(clock).__name__}")
        c_dir = _lib.to_c_path(data_dir, "data_dir")
        c_bundled = _lib.to_c_path(bundled_path, "bundled_path")
        ttl = _int32_or_none(ttl_seconds, "ttl_seconds")
        poll = _int32_or_none(poll_interval_ms, "poll_interval_ms")
        jitter = _int32_or_none(reconnect_jitter_percent, "reconnect_jitter_percent")
        backoff: Optional[Tuple[int, int]] = None
        if reconnect_backoff_ms is not None:
            if not isinstance(reconnect_backoff_ms, (tuple, list)) or len(reconnect_backoff_ms) != 2:
                raise TypeError("reconnect_backoff_ms must be a (base_ms, max_ms) pair")
            backoff = (_lib.to_int32(reconnect_backoff_ms[0], "reconnect_backoff_ms[0]"),
                       _lib.to_int32(reconnect_backoff_ms[1], "reconnect_backoff_ms[1]"))
        py_logger = None if logger is None or logger is False else Client._resolve_logger(logger)

        err = appnorth_error()
        log_callback = None
        bundled_error: Optional[errors.AppNorthError] = None
        options = C.appnorth_config_options_new()
        try:
            with client._use() as c:
                C.appnorth_config_options_set_client(options, c, err)
            if c_dir is not None:
                C.appnorth_config_options_set_data_dir(options, c_dir, err)
            if c_bundled is not None:
                try:
                    C.appnorth_config_options_set_bundled_path(options, c_bundled, err)
                except errors.AppNorthError as exc:
                    if exc.code not in _BAD_BUNDLE:
                        raise
                    # The library leaves the file out and the config still
                    # opens (include/appnorth.h): report it, loudly.
                    bundled_error = exc
                    import warnings

                    warnings.warn(BundledConfigWarning(exc), stacklevel=3)  # the caller of reopenable's wrapper
            if ttl is not None:
                C.appnorth_config_options_set_ttl_seconds(options, ttl, err)
            if clock is not None:
                with clock._use() as clock_ptr:
                    C.appnorth_config_options_set_clock(options, clock_ptr, err)
            if poll is not None:
                C.appnorth_config_options_set_poll_interval_ms(options, poll, err)
            if backoff is not None:
                C.appnorth_config_options_set_reconnect_backoff_ms(options, backoff[0], backoff[1], err)
            if jitter is not None:
                C.appnorth_config_options_set_reconnect_jitter(options, jitter, err)
            if logger is False:
                C.appnorth_config_options_set_logger(options, _lib.NULL_LOG_FN, _lib.LOG_ERROR, None, err)
            elif py_logger is not None:
                log_callback = _make_log_callback(py_logger, self._local)
                C.appnorth_config_options_set_logger(
                    options, log_callback, _min_library_level(py_logger), None, err)
            handle = _lib.ConfigPtr()
            with _lib.callback_errors(), errors.naming_path(data_dir):
                C.appnorth_config_new(options, handle, err)
        finally:
            C.appnorth_config_options_free(options)

        self.bundled_error = bundled_error
        listeners = _Listeners(self._local)
        self._listeners = listeners
        status_listeners = _StatusListeners(self._local)
        self._status_listeners = status_listeners
        # Kept until appnorth_config_free() has returned: the listener thunks,
        # and the log callback the config's thread logs through (its own, or
        # the client's, which it keeps using after the client is closed).
        keep: List[Any] = [listeners.thunk, status_listeners.thunk]
        keep += [log_callback] if log_callback is not None else list(client._keep)
        # Logging through the client's logger: follow that logger's level.
        self._log_client = client if log_callback is None and logger is not False else None
        # refresh() is cancelled through it on Ctrl-C (while it is open).
        self._client = client
        self._attach(handle, keep=keep)

    _log_client: Optional[Client] = None

    def _sync_log_level(self) -> None:
        if self._log_client is not None:
            self._log_client.sync_log_level()

    def _free(self, ptr: Any) -> None:
        # Stops live updates, joins the library thread and waits for a
        # listener call in flight: no callback of this config runs after.
        C.appnorth_config_free(ptr)

    def _on_close(self) -> None:
        if self._listeners is not None:
            self._listeners.stop()
        if self._status_listeners is not None:
            self._status_listeners.stop()

    def close(self) -> None:
        """Stop live updates, join the config's library thread and free the
        handle. Idempotent. Waits for calls in progress on other threads and
        for a listener running on another thread; no listener call starts
        once close() has begun. Raises WrongStateError when called from
        inside a listener or another library callback."""
        super().close()

    def _call(self, func: Any, *args: Any) -> None:
        with self._use() as config, _lib.callback_errors():
            func(config, *args, appnorth_error())

    # -- reads ---------------------------------------------------------------
    #
    # Keys are top-level keys matched exactly ("a.b" is the key "a.b"). A
    # missing key, or a value of another type, gives the default. Reads never
    # block on I/O; a read of a stale config starts a background fetch.

    # The getters take the thin path (Handle._thin): no lock, no context
    # manager, no allocation beyond the arguments and the result. A string
    # the library returns is freed before the scratch goes back.

    def get_string(self, key: TextArg, default: Optional[str] = None) -> Optional[str]:
        """A string value, else ``default``."""
        c_key, c_default = _lib.to_c_string(key, "key"), _lib.to_c_string(default, "default")
        self._sync_log_level()
        out = self._thin(_GET_STRING, c_key, c_default)
        text = _lib.take_string(out.string)
        _lib.SCRATCH.append(out)
        return text

    def get_int(self, key: TextArg, default: int = 0) -> int:
        """An integer value (a JSON number without fraction or exponent:
        ``3.0`` is not one), else ``default`` (an int64)."""
        c_key, c_default = _lib.to_c_string(key, "key"), _lib.to_int64(default, "default")
        self._sync_log_level()
        out = self._thin(_GET_INT, c_key, c_default)
        value = out.int64.value
        _lib.SCRATCH.append(out)
        return value

    def get_double(self, key: TextArg, default: float = 0.0) -> float:
        """A number (integer or real) as a float, else ``default``."""
        if isinstance(default, bool) or not isinstance(default, (int, float)):
            raise TypeError(f"default must be a float, not {type(default).__name__}")
        c_key = _lib.to_c_string(key, "key")
        self._sync_log_level()
        out = self._thin(_GET_DOUBLE, c_key, float(default))
        value = out.double.value
        _lib.SCRATCH.append(out)
        return value

    def get_bool(self, key: TextArg, default: bool = False) -> bool:
        """A JSON ``true``/``false``, else ``default``."""
        if not isinstance(default, bool):
            raise TypeError(f"default must be a bool, not {type(default).__name__}")
        c_key = _lib.to_c_string(key, "key")
        self._sync_log_level()
        out = self._thin(_GET_BOOL, c_key, int(default))
        value = out.int32.value != 0
        _lib.SCRATCH.append(out)
        return value

    def get_json(self, key: TextArg, default: Any = None) -> Any:
        """Any value, parsed (dict, list, str, int, float, bool or None for
        JSON ``null``), else ``default`` (returned as given)."""
        text = self.get_json_text(key)
        return default if text is None else parse_json(text)

    def get_json_text(self, key: TextArg, default: TextArg = None) -> Optional[str]:
        """Any value as JSON text, exactly as served (``9.99`` stays
        ``9.99``), else ``default``: JSON text (validated even when the key
        exists: InvalidJSONError) or None."""
        c_key, c_default = _lib.to_c_string(key, "key"), _lib.to_c_string(default, "default")
        self._sync_log_level()
        out = self._thin(_GET_JSON, c_key, c_default)
        text = _lib.take_string(out.string)
        _lib.SCRATCH.append(out)
        return text

    def snapshot_json(self) -> str:
        """The whole effective config object as JSON text, exactly as served
        or bundled (``"{}"`` for the default tier)."""
        with self._use() as config, _lib.callback_errors():
            return _lib.call_returning_string(C.appnorth_config_snapshot, config)

    def snapshot(self) -> Dict[str, Any]:
        """The whole effective config object, parsed."""
        result: Dict[str, Any] = parse_json(self.snapshot_json())
        return result

    @property
    def source(self) -> ConfigSource:
        """``(tier, fetched_ms)`` of the effective config. Like the getters,
        it may start a background fetch of a stale config."""
        from ._config_types import ConfigSource

        tier, fetched = ctypes.c_int32(-1), ctypes.c_int64(0)
        self._call(C.appnorth_config_source, tier, fetched)
        return ConfigSource(_tier(tier.value), fetched.value)

    def last_fetch_status(self) -> FetchStatus:
        """The outcome of the latest refresh, background fetch, poll, stream
        connection attempt or stream event: ``(error or None, time_ms)``.
        An invalid payload shows here as InvalidJSONError while the last
        good config stays in effect."""
        from ._config_types import FetchStatus

        status, at = appnorth_error(), ctypes.c_int64(0)
        self._call(C.appnorth_config_last_fetch_status, status, at)
        error: Optional[errors.AppNorthError] = None
        if status.code != errors.OK:
            message = status.text() or str(C.appnorth_status_str(status.code))
            error = errors.make_error(status.code, message, status.http_status)
        return FetchStatus(error, at.value)

    # -- fetching and live updates --------------------------------------------

    def refresh(self) -> None:
        """Fetch the config now (a conditional GET) and apply it. A change
        calls the listeners before this returns, usually on the thread
        making the fetch (unless another thread is delivering a change right
        then). Raises the fetch's error (NetworkError, NotFoundError when
        nothing is published, ServerError, InvalidJSONError for an invalid
        payload, ...); the effective config is then unchanged. Blocks for
        at most the client's resource timeout.

        On the main thread the fetch runs on a worker thread (so the
        listeners run there) while this waits: Ctrl-C cancels it through
        the client and raises KeyboardInterrupt at once, like the client's
        own network calls. Once the client is closed, the fetch runs here
        and is not interruptible."""
        with self._use() as config:
            def work() -> None:
                with _lib.callback_errors():
                    C.appnorth_config_refresh(config, appnorth_error())

            self._client._cancellable(work)

    def start_live(self) -> None:
        """Start live updates (the event stream, its reconnects and polling)
        on the config's library thread. Returns at once; a no-op while live."""
        self._call(C.appnorth_config_start_live)
        self._live_wanted = True

    def stop_live(self) -> None:
        """Stop live updates and background fetches and join the library
        thread (from inside a listener it returns at once and the thread
        ends after the listener). Reads keep working. A no-op when not live."""
        self._call(C.appnorth_config_stop_live)
        self._live_wanted = False

    def _carry_over(self) -> Optional[Callable[[], None]]:
        """In a forked child: the listeners, in their order, and live
        updates come back on the new handle; the parent's tokens still
        remove them (unless the new handle gave the same number to another
        registration: then the new one is meant)."""
        registered = self._listeners.registered() if self._listeners is not None else []
        statuses = self._status_listeners.registered() if self._status_listeners is not None else []
        live = self._live_wanted
        earlier = self._token_alias or {}

        def again() -> None:
            alias = {token: self.add_listener(listener) for token, listener in registered}
            # Tokens a grandparent gave, aliased in an earlier reopen.
            alias.update({first: alias[mid] for first, mid in earlier.items() if mid in alias})
            self._token_alias = alias
            for _, status_listener in statuses:
                self.add_status_listener(status_listener)
            if live:
                self.start_live()

        return again

    # -- listeners -------------------------------------------------------------

    def add_listener(self, listener: ConfigListener) -> int:
        """Call ``listener(config, changed_keys, tier)`` on every change of
        the effective config's content (not for the current one: read that
        with the getters). Returns a token for :meth:`remove_listener`.

        It runs on the config's library thread (live updates, polls,
        background fetches) or on a thread calling :meth:`refresh`; calls of
        one config never overlap and arrive in order. An exception it raises
        is logged to the ``"appnorth"`` logger and otherwise ignored.
        """
        return self._add(self._listeners, C.appnorth_config_add_listener, listener)

    def on_update(self, listener: ConfigListener) -> ConfigListener:
        """:meth:`add_listener` as a decorator; returns ``listener``
        unchanged. Remove it with ``remove_listener(listener)``."""
        self.add_listener(listener)
        return listener

    def remove_listener(self, listener: Union[int, ConfigListener]) -> None:
        """Unregister a listener, given its token or the function itself
        (every registration of it). It is never called after this returns:
        a call running on another thread is waited for; called from inside
        that listener, this returns at once. An unknown token or function
        raises InvalidArgumentError."""
        listeners = self._listeners
        if isinstance(listener, bool) or not (isinstance(listener, int) or callable(listener)):
            raise TypeError(f"listener must be a token (int) or a function, not {type(listener).__name__}")
        if isinstance(listener, int):
            token = _lib.to_int64(listener, "token")
            alias = self._token_alias
            if alias and listeners is not None and token in alias and token not in listeners.registered_tokens():
                token = alias[token]
            tokens = [token]
        else:
            tokens = listeners.tokens_of(listener) if listeners is not None else []
            if not tokens:
                if self._closed:
                    raise errors.WrongStateError("config is closed")
                raise errors.InvalidArgumentError(f"{listener!r} is not a registered listener")
        for token in tokens:
            self._call(C.appnorth_config_remove_listener, token)
            if listeners is not None:
                listeners.forget_token(token)

    # -- data-source status ------------------------------------------------------

    @property
    def status(self) -> ConfigStatus:
        """The data-source status: ``(state, since_ms, last_error,
        last_error_ms)``. ``state`` is a :class:`ConfigState`: INITIALIZING
        (nothing ended yet), VALID (the server answered with a config or a
        304), INTERRUPTED (an error status, an invalid payload, or a dropped
        stream; retrying), OFFLINE (no answer; retrying) or OFF
        (:meth:`stop_live`). ``last_error`` (an exception instance, not
        raised) is kept after a recovery. Reads memory; starts no fetch."""
        value = _lib.appnorth_data_source_status()
        self._call(C.appnorth_config_status, ctypes.byref(value))
        return _status(value)

    def add_status_listener(self, listener: ConfigStatusListener) -> int:
        """Call ``listener(status)`` (a :class:`ConfigStatus`) when the
        state changes or the last error's kind or HTTP status does (a
        repeated failure of one kind calls nothing). It runs where config
        listeners run: the config's library thread, a thread whose
        refresh/start_live/stop_live changed the status, or, for a client in
        dispatch mode, inside :meth:`Client.dispatch` (statuses between two
        dispatches come as the latest). Not called for the current status.
        Returns a token for :meth:`remove_status_listener`. An exception it
        raises is logged to the ``"appnorth"`` logger and otherwise ignored."""
        return self._add(self._status_listeners, C.appnorth_config_add_status_listener, listener)

    def on_status(self, listener: ConfigStatusListener) -> ConfigStatusListener:
        """:meth:`add_status_listener` as a decorator; returns ``listener``
        unchanged. Remove it with ``remove_status_listener(listener)``."""
        self.add_status_listener(listener)
        return listener

    def remove_status_listener(self, listener: Union[int, ConfigStatusListener]) -> None:
        """Unregister a status listener, given its token or the function
        (every registration of it). It is never called after this returns: a
        call running on another thread is waited for. An unknown token or
        function raises InvalidArgumentError. (In a forked child, use the
        function: the child's registrations have new tokens.)"""
        listeners = self._status_listeners
        if isinstance(listener, bool) or not (isinstance(listener, int) or callable(listener)):
            raise TypeError(f"listener must be a token (int) or a function, not {type(listener).__name__}")
        if isinstance(listener, int):
            tokens = [_lib.to_int64(listener, "token")]
        else:
            tokens = listeners.tokens_of(listener) if listeners is not None else []
            if not tokens:
                if self._closed:
                    raise errors.WrongStateError("config is closed")
                raise errors.InvalidArgumentError(f"{listener!r} is not a registered status listener")
        for token in tokens:
            self._call(C.appnorth_config_remove_status_listener, token)
            if listeners is not None:
                listeners.forget_token(token)

    def _add(self, listeners, add_fn, listener) -> int:
        """Registers `listener` in `listeners` (the config or the status
        registry) through the C function `add_fn`; returns its token."""
        if not callable(listener):
            raise TypeError(f"listener must be callable, not {type(listener).__name__}")
        if listeners is None:  # pragma: no cover - only if __init__ failed
            raise errors.WrongStateError("config is closed")
        key = listeners.reserve(listener)
        token = ctypes.c_int64(0)
        try:
            self._call(add_fn, listeners.thunk, key, token)
        except BaseException:
            listeners.forget_key(key)
            raise
        listeners.bind(key, token.value)
        return token.value

    def __repr__(self) -> str:
        return f"<appnorth.Config {'closed' if self._closed else 'open'}>"
