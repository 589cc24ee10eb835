"""Analytics events: :class:`Events`.

``track()`` appends each event to a journal file in the data directory
before it returns (it survives the process being killed); one library
thread moves events into SQLite and uploads the queue in batches (every 30 s, as
soon as 20 events wait, or on ``flush()``), with retries, a circuit breaker
and consent. That thread may log through the client's logger at any time,
so an Events object is closed at interpreter exit like every handle, and it
keeps the client's log callback alive for as long as it runs.

Identity values (anonymous id, user id, push token) live in a secure store:
``identity.json`` (0600) in the data directory, or any ``MutableMapping``
you pass as ``secure_store`` (a keyring adapter, for instance).
"""

from __future__ import annotations

import ctypes
import os

from . import _lib
from . import errors as appnorth_errors
from ._fork import reopenable
from ._handle import Handle
from ._lib import C, appnorth_error
from .client import Client, json_text, parse_json
from .offline import ManualClock

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Any, Callable, Dict, List, MutableMapping, Optional, Union

    from ._lib import TextArg
    from .client import JSONArg

__all__ = ["Events"]

# The library's defaults (see the header), used when only some of a group of
# settings is given.
DEFAULT_FLUSH_INTERVAL_MS = 30000
DEFAULT_BATCH_THRESHOLD = 20
DEFAULT_MAX_EVENTS = 10000
DEFAULT_MAX_BYTES = 5 * 1024 * 1024
DEFAULT_MAX_EVENT_BYTES = 65536
DEFAULT_RETRY_BASE_DELAY_MS = 1000
DEFAULT_RETRIES = 3
DEFAULT_RETRY_AFTER_CAP_MS = 120000
DEFAULT_BREAKER_THRESHOLD = 5
DEFAULT_SESSION_IDLE_TIMEOUT_MS = 30 * 60 * 1000
DEFAULT_SESSION_MAX_LENGTH_MS = 24 * 60 * 60 * 1000
#: How long close(), ``with`` exit and the interpreter-exit hook upload what
#: is queued before stopping, unless ``close_timeout_ms`` says otherwise.
DEFAULT_CLOSE_TIMEOUT_MS = 2000


def _pick(value: Optional[int], default: int, name: str) -> int:
    return _lib.to_int32(default if value is None else value, name)


def _secure_store_thunks(store: MutableMapping[str, str]) -> Any:
    def c_get(user_data: Optional[int], key: Optional[bytes], buffer: Any) -> int:
        try:
            with _lib.in_callback():
                value = store.get((key or b"").decode("utf-8"))
                if value is not None:
                    raw = value.encode("utf-8")
                    C.appnorth_buffer_set(buffer, raw, len(raw), appnorth_error())
            return 0
        except BaseException as exc:  # noqa: BLE001 - never propagate into C
            _lib.stash_callback_error(exc, "a secure store get callback")
            return -1

    def c_set(user_data: Optional[int], key: Optional[bytes], value: Optional[bytes]) -> int:
        try:
            with _lib.in_callback():
                name = (key or b"").decode("utf-8")
                if value is None:
                    store.pop(name, None)
                else:
                    store[name] = value.decode("utf-8")
            return 0
        except BaseException as exc:  # noqa: BLE001 - never propagate into C
            _lib.stash_callback_error(exc, "a secure store set callback")
            return -1

    return _lib.SECURE_GET_FN(c_get), _lib.SECURE_SET_FN(c_set)


def _before_send_thunk(hook: Callable[[Dict[str, Any]], Any]) -> Any:
    """The C hook around a Python one: it gets the event as a dict and
    returns it (changed or not) to keep it, another dict to replace it, or
    None to drop it. An exception, or anything else returned, drops the
    event (fails closed); the library logs it once per burst."""
    import json

    def c_hook(user_data: Optional[int], event_json: Optional[bytes], buffer: Any) -> int:
        try:
            with _lib.in_callback():
                event = json.loads(event_json or b"")
                before = json.dumps(event, separators=(",", ":"), ensure_ascii=False)
                result = hook(event)
                if result is None:
                    return _lib.BEFORE_SEND_DROP
                if not isinstance(result, dict):
                    raise TypeError(f"before_send must return a dict or None, not {type(result).__name__}")
                after = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
                if after == before:
                    return _lib.BEFORE_SEND_KEEP  # the text as the library made it
                raw = after.encode()
                C.appnorth_buffer_set(buffer, raw, len(raw), appnorth_error())
                return _lib.BEFORE_SEND_REPLACE
        except BaseException as exc:  # noqa: BLE001 - never propagate into C; the event is dropped
            try:
                reason = f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")[:512]
                C.appnorth_buffer_set(buffer, reason, len(reason), appnorth_error())
            except BaseException:  # noqa: BLE001
                pass
            return -1

    return _lib.BEFORE_SEND_FN(c_hook)


_TRACK = _lib.thin("appnorth_events_track")


def _required_json(properties: JSONArg) -> bytes:
    if properties is None:
        raise TypeError("properties must be a dict or JSON object text, not None")
    text = json_text(properties, "properties")
    assert text is not None
    return text


class Events(Handle):
    """The analytics event queue and its upload thread (``appnorth_events``).

    Args:
        client: whose API URL, App ID, credential and logger uploads use.
        data_dir: where the queue's database (and, by default, the identity
            file) live; created 0700.
        flush_interval_ms, batch_threshold: automatic flush period (default
            30000) and queue length that starts a flush at once (default 20).
        max_events, max_bytes, max_event_bytes: queue limits (defaults
            10000 events, 5 MB, 64 KB per event).
        retry_base_delay_ms, retries, retry_after_cap_ms, breaker_threshold:
            the retry policy (defaults 1000, 3, 120000, 5).
        retry_jitter_percent: each retry waits its nominal delay +/- up to
            this share of it (default 20; 0 to 100). Keeps a fleet that
            failed together from retrying in step.
        require_consent: store nothing until consent is granted.
        session_idle_timeout_ms, session_max_length_ms: automatic sessions:
            a new session id with the first event after this long without
            one (default 30 min), and once a session is this old (default
            24 h); 0 turns that rotation off. Never on a timer: the event
            that ends a session starts the next one (``session_id``).
        clock: a :class:`ManualClock` event timestamps, sessions and the
            upload timers read (tests), or None for the system clock.
        sample_rate: the share of installs that track, 0.0 to 1.0 (default
            1.0). Decided per install by its anonymous id, not per event;
            a sampled-out install's ``track()`` returns False and counts
            the event in ``stats()["dropped"]["sampled"]``.
        remote_settings: follow the config key ``"appnorth.events"`` of the
            ``Config`` objects made with the same client (default True):
            ``{"enabled", "sample_rate", "blocked_events",
            "flush_interval_ms", "batch_threshold"}`` override these
            options live, from the bundled, cached or remote tier. False:
            the host opts out, only these options count.
        before_send: a filter every event goes through before it is stored,
            called inside ``track()`` on its thread with the event as a dict
            (name, properties with the super properties, ids, session,
            timestamp): return it (changed or not) or another dict to store
            that, or None to drop it. It fails closed: an exception, or a
            result that is not a valid event, drops the event
            (``stats()["dropped"]["filtered"]``, logged once per burst).
        secure_store: a ``MutableMapping[str, str]`` for identity values
            (keys "anonymous_id", "user_id", "push_token"), instead of the
            0600 file.
        close_timeout_ms: how long ``close()``, leaving a ``with`` block and
            the interpreter-exit hook upload what is queued before the
            upload thread stops (default 2000; 0: no upload at close).

    Calls are thread-safe. Events that were not sent by close stay on disk
    and are uploaded soon after the next open of the same data directory.

    Made before fork(), it works in the child: on first use there it makes
    a new handle on the same data directory (its client reopens too), and
    the events of every process are uploaded once. Not with a
    ``secure_store``: that one raises WrongStateError in the child (the
    mapping is host state); make a new Events there.
    """

    _kind = "events"
    #: The last set_network_type() value, set again in a forked child.
    _network_type: Optional[int] = None

    @reopenable
    def __init__(
        self,
        client: Client,
        data_dir: Union[str, bytes, "os.PathLike[str]"],
        *,
        flush_interval_ms: Optional[int] = None,
        batch_threshold: Optional[int] = None,
        max_events: Optional[int] = None,
        max_bytes: Optional[int] = None,
        max_event_bytes: Optional[int] = None,
        retry_base_delay_ms: Optional[int] = None,
        retries: Optional[int] = None,
        retry_after_cap_ms: Optional[int] = None,
        breaker_threshold: Optional[int] = None,
        retry_jitter_percent: Optional[int] = None,
        require_consent: bool = False,
        session_idle_timeout_ms: Optional[int] = None,
        session_max_length_ms: Optional[int] = None,
        clock: Optional[ManualClock] = None,
        sample_rate: Optional[float] = None,
        remote_settings: bool = True,
        before_send: Optional[Callable[[Dict[str, Any]], Optional[Dict[str, Any]]]] = None,
        secure_store: Optional[MutableMapping[str, str]] = None,
        close_timeout_ms: int = DEFAULT_CLOSE_TIMEOUT_MS,
    ) -> None:
        self._init_state()
        self._close_timeout_ms = _lib.to_int32(close_timeout_ms, "close_timeout_ms")
        if self._close_timeout_ms < 0:
            raise appnorth_errors.InvalidArgumentError("close_timeout_ms must be 0 or more")
        if not isinstance(client, Client):
            raise TypeError(f"client must be a Client, not {type(client).__name__}")
        path = data_dir if data_dir is None or isinstance(data_dir, (str, bytes)) else os.fspath(data_dir)
        c_dir = _lib.to_c_string(path, "data_dir")
        err = appnorth_error()
        options = C.appnorth_events_options_new()
        try:
            with client._use() as c:
                C.appnorth_events_options_set_client(options, c, err)
            C.appnorth_events_options_set_data_dir(options, c_dir, err)
            if flush_interval_ms is not None or batch_threshold is not None:
                C.appnorth_events_options_set_flush_policy(
                    options, _pick(flush_interval_ms, DEFAULT_FLUSH_INTERVAL_MS, "flush_interval_ms"),
                    _pick(batch_threshold, DEFAULT_BATCH_THRESHOLD, "batch_threshold"), err)
            if max_events is not None or max_bytes is not None or max_event_bytes is not None:
                limit_bytes = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
                if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int):
                    raise TypeError(f"max_bytes must be an int, not {type(limit_bytes).__name__}")
                C.appnorth_events_options_set_limits(
                    options, _pick(max_events, DEFAULT_MAX_EVENTS, "max_events"), limit_bytes,
                    _pick(max_event_bytes, DEFAULT_MAX_EVENT_BYTES, "max_event_bytes"), err)
            if any(v is not None for v in (retry_base_delay_ms, retries, retry_after_cap_ms, breaker_threshold)):
                C.appnorth_events_options_set_retry(
                    options, _pick(retry_base_delay_ms, DEFAULT_RETRY_BASE_DELAY_MS, "retry_base_delay_ms"),
                    _pick(retries, DEFAULT_RETRIES, "retries"),
                    _pick(retry_after_cap_ms, DEFAULT_RETRY_AFTER_CAP_MS, "retry_after_cap_ms"),
                    _pick(breaker_threshold, DEFAULT_BREAKER_THRESHOLD, "breaker_threshold"), err)
            if retry_jitter_percent is not None:
                C.appnorth_events_options_set_retry_jitter(
                    options, _lib.to_int32(retry_jitter_percent, "retry_jitter_percent"), err)
            if require_consent:
                C.appnorth_events_options_set_require_consent(options, 1, err)
            if session_idle_timeout_ms is not None or session_max_length_ms is not None:
                C.appnorth_events_options_set_session_policy(
                    options,
                    _pick(session_idle_timeout_ms, DEFAULT_SESSION_IDLE_TIMEOUT_MS, "session_idle_timeout_ms"),
                    _pick(session_max_length_ms, DEFAULT_SESSION_MAX_LENGTH_MS, "session_max_length_ms"), err)
            if before_send is not None:
                if not callable(before_send):
                    raise TypeError(f"before_send must be callable, not {type(before_send).__name__}")
                thunk = _before_send_thunk(before_send)
                hook_key = _lib.pin([thunk], [before_send])
                try:
                    C.appnorth_events_options_set_before_send(options, thunk, hook_key, _lib.RELEASE, err)
                except BaseException:
                    _lib.unpin(hook_key)
                    raise
            if clock is not None:
                if not isinstance(clock, ManualClock):
                    raise TypeError(f"clock must be a ManualClock or None, not {type(clock).__name__}")
                with clock._use() as clock_ptr:
                    C.appnorth_events_options_set_clock(options, clock_ptr, err)
            if sample_rate is not None:
                if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, float)):
                    raise TypeError(f"sample_rate must be a float, not {type(sample_rate).__name__}")
                C.appnorth_events_options_set_sample_rate(options, float(sample_rate), err)
            if not remote_settings:
                C.appnorth_events_options_set_remote_settings(options, 0, err)
            if secure_store is not None:
                self._cannot_reopen = ("its secure_store is host state the child would share with the parent, "
                                       "or hold a diverging copy of")
                get_fn, set_fn = _secure_store_thunks(secure_store)
                # Released by the library when the store's last user goes
                # (these options, or the events handle made from them).
                key = _lib.pin([get_fn, set_fn], [secure_store])
                try:
                    C.appnorth_events_options_set_secure_store(options, get_fn, set_fn, _lib.RELEASE, key, err)
                except BaseException:
                    _lib.unpin(key)
                    raise
            handle = _lib.EventsPtr()
            with _lib.callback_errors(), appnorth_errors.naming_path(path):
                C.appnorth_events_new(options, handle, err)
        finally:
            C.appnorth_events_options_free(options)
        # The upload thread logs through the client's log callback: keep it
        # alive for as long as this handle, even if the client closes first.
        self._client = client
        self._attach(handle, keep=list(client._keep))

    def _sync_log_level(self) -> None:
        self._client.sync_log_level()

    def _free(self, ptr: Any) -> None:
        C.appnorth_events_free(ptr)

    def close(self, flush_timeout_ms: Optional[int] = None) -> None:
        """Upload what is queued, stop the upload thread and free the handle.
        Idempotent.

        The upload waits at most ``flush_timeout_ms`` (default: the
        ``close_timeout_ms`` given at creation, 2000; 0 skips it). Its
        failure is not raised: events that were not sent stay on disk for
        the next open, and the library logs why.
        """
        if flush_timeout_ms is None:
            flush_timeout_ms = getattr(self, "_close_timeout_ms", 0)
        timeout = _lib.to_int32(flush_timeout_ms, "flush_timeout_ms")
        if timeout < 0:
            raise appnorth_errors.InvalidArgumentError("flush_timeout_ms must be 0 or more")
        # The base close() refuses (WrongStateError) inside a call or a
        # callback and in a forked child; only flush where it would free.
        can_flush = (timeout > 0 and not self._closed and not self._stale and self._pid == os.getpid()
                     and not getattr(self._local, "depth", 0) and not _lib.inside_callback())
        if can_flush:
            try:
                with self._use() as events:
                    self._wait(C.appnorth_events_close, events, timeout)
            except appnorth_errors.WrongStateError:
                pass  # closed meanwhile by another thread
            finally:
                super().close()
        else:
            super().close()  # raises WrongStateError inside a call or callback

    def _wait(self, func: Any, *args: Any) -> None:
        """Call a waiting function (flush, close) so that Ctrl-C on the
        main thread cancels it through the client, when the client is still
        open (else the call waits out its timeout)."""
        def work() -> None:
            with _lib.callback_errors():
                func(*args, appnorth_error())

        self._client._cancellable(work)

    def _call(self, func: Any, *args: Any) -> None:
        with self._use() as events, _lib.callback_errors():
            func(events, *args, appnorth_error())

    def track(self, name: TextArg, properties: JSONArg = None) -> bool:
        """Queue an event; returns False when it was dropped (consent, or the
        config key "appnorth.events": switched off, sampled out, blocked). Properties:
        a dict, or JSON object text stored and sent exactly as given."""
        # Handle._thin, inlined: this is the hottest call of the binding.
        if name.__class__ is str and "\0" not in name and name.isascii():
            c_name: Optional[bytes] = name.encode()
        else:
            c_name = _lib.to_c_string(name, "name")
        c_props = json_text(properties, "properties")
        self._client.sync_log_level()
        scratch = _lib.SCRATCH
        try:
            out = scratch.pop()
        except IndexError:
            out = _lib.CallScratch()
        if self._addr is None and self._stale:
            self._reopen_after_fork()  # inherited through fork(): appnorth._fork
        calls = self._calls
        calls.append(None)
        try:
            addr = self._addr
            if addr is None:
                raise self._closed_error()
            status = _TRACK(addr, c_name, c_props, out.value_addr, out.err_addr)
        finally:
            calls.pop()
        if status:
            error = _lib.status_error(status, out.err)
            scratch.append(out)
            raise error
        queued = out.int32.value != 0
        scratch.append(out)
        return queued

    def flush(self, timeout_ms: int = 10000) -> int:
        """Upload everything now, waiting up to ``timeout_ms``; returns how
        many events the server accepted. Raises the error that ended the
        upload, WrongStateError while the circuit breaker pauses uploads,
        or TimeoutError; the exception's ``sent`` attribute holds the events
        accepted before it."""
        sent = ctypes.c_int64(0)
        try:
            c_timeout = _lib.to_int32(timeout_ms, "timeout_ms")
            with self._use() as events:
                self._wait(C.appnorth_events_flush_sent, events, c_timeout, sent)
        except appnorth_errors.AppNorthError as error:
            error.sent = sent.value
            raise
        return sent.value

    def set_network_type(self, network_type: int) -> None:
        """NETWORK_UNKNOWN, _WIFI, _CELLULAR or _EXPENSIVE_CELLULAR: sets the batch size."""
        value = _lib.to_int32(network_type, "network_type")
        self._call(C.appnorth_events_set_network_type, value)
        self._network_type = value

    def _carry_over(self) -> Optional[Callable[[], None]]:
        network_type = self._network_type
        if network_type is None:
            return None
        return lambda: self.set_network_type(network_type)

    def start_session(self) -> None:
        """A new app session: new session id; uploads resume if paused."""
        self._call(C.appnorth_events_start_session)

    @property
    def session_id(self) -> str:
        """The session id the next event carries, unless that event starts a
        new session (after the idle timeout or the maximum length)."""
        with self._use() as events, _lib.callback_errors():
            return _lib.call_returning_string(C.appnorth_events_session_id, events)

    def foreground(self) -> None:
        """The app came to the foreground: uploads resume and a flush starts."""
        self._call(C.appnorth_events_foreground)

    def set_consent(self, granted: bool) -> None:
        """Grant or revoke analytics consent (persisted; revoking purges the
        queue). Every other handle on the data directory, in this process or
        another, adopts the change at its next call; once a revocation
        returns, no handle uploads an event (docs/events.md, "Consent across
        processes")."""
        self._call(C.appnorth_events_set_consent, 1 if granted else 0)

    @property
    def consent(self) -> _lib.Consent:
        """CONSENT_UNKNOWN, CONSENT_REVOKED or CONSENT_GRANTED (a :class:`Consent`)."""
        state = ctypes.c_int32(0)
        self._call(C.appnorth_events_consent, state)
        return _lib.Consent(state.value)

    def identify(self, user_id: TextArg) -> None:
        """Set the user id (kept in the secure store)."""
        self._call(C.appnorth_events_identify, _lib.to_c_string(user_id, "user_id"))

    def reset(self) -> None:
        """Clear the user id and the super properties (logout); the
        anonymous id stays."""
        self._call(C.appnorth_events_reset)

    def register(self, properties: JSONArg) -> None:
        """Super properties: save these (a dict, or JSON object text) in the
        data directory, to be added to every event's properties by every
        handle on it, from its next ``track()``; a key already registered
        gets the new value. A property passed to ``track()`` wins. They
        survive a restart; ``reset()`` clears them. Raises
        InvalidJSONError (not an object), TooLargeError (over half of
        ``max_event_bytes``) or InvalidArgumentError (a reserved key: id,
        name, timestamp, anonymous_id, user_id, session_id, properties)."""
        self._call(C.appnorth_events_register, _required_json(properties))

    def register_once(self, properties: JSONArg) -> None:
        """``register()``, but a key already registered keeps its value."""
        self._call(C.appnorth_events_register_once, _required_json(properties))

    def unregister(self, key: TextArg) -> None:
        """Remove one super property (a key not registered is no error)."""
        self._call(C.appnorth_events_unregister, _lib.to_c_string(key, "key"))

    @property
    def super_properties(self) -> Dict[str, Any]:
        """The registered super properties (the data directory's)."""
        with self._use() as events, _lib.callback_errors():
            text = _lib.call_returning_string(C.appnorth_events_super_properties, events)
        result: Dict[str, Any] = parse_json(text)
        return result

    def set_push_token(self, token: TextArg) -> None:
        """Set, or with None clear, the push token (kept in the secure store)."""
        self._call(C.appnorth_events_set_push_token, _lib.to_c_string(token, "token"))

    @property
    def anonymous_id(self) -> str:
        """The anonymous id, made on first use and persisted."""
        with self._use() as events, _lib.callback_errors():
            return _lib.call_returning_string(C.appnorth_events_anonymous_id, events)

    def stats(self) -> Dict[str, Any]:
        """Queue statistics: queued (the whole data directory, journals
        included), queued_bytes (what those events take in the files, at
        their database pages: the byte limit trims by it), journals (files),
        disk_bytes (database, WAL and journals on disk), dropped counts,
        breaker, last error, ..."""
        with self._use() as events, _lib.callback_errors():
            text = _lib.call_returning_string(C.appnorth_events_stats, events)
        result: Dict[str, Any] = parse_json(text)
        return result

    def pending(self, max: int = 10000) -> List[Dict[str, Any]]:
        """The queued events, oldest first (at most ``max``, 1 to 2**31-1),
        as the server would receive them: the event objects of a batch
        body, parsed. For a host's own tests: assert what was tracked
        without a server. It first imports this handle's journal on the
        calling thread; other handles' and processes' events are included
        once they are in the database (``appnorth_events_pending``). Sends
        nothing."""
        limit = _lib.to_int32(max, "max")
        with self._use() as events, _lib.callback_errors():
            text = _lib.call_returning_string(C.appnorth_events_pending, events, limit)
        result: List[Dict[str, Any]] = parse_json(text)
        return result

    def __repr__(self) -> str:
        return f"<appnorth.Events {'closed' if self._closed else 'open'}>"
