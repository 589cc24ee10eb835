"""The community API client: :class:`Client` (and :class:`Feedback`).

A :class:`Client` owns one ``appnorth_client`` handle. It builds the C
options with the setters, creates the handle and frees the options before
returning, so there is no options object to manage in Python.

Threads: a client may be used from several threads at once (the library is
thread-safe and ctypes releases the GIL during every call). :meth:`close`
waits for calls in progress on other threads, then frees the handle; after
that every method raises :class:`~appnorth.errors.WrongStateError`.

fork(): native handles do not survive fork(). A Client made before a fork
makes a new handle, with the same arguments and logger, on its first use
in the child (a pre-fork server's worker); the parent's stays the parent's
(:mod:`appnorth._fork`). A Feedback made before a fork cannot be used in
the child (WrongStateError): make it there.
"""

from __future__ import annotations

import ctypes
import os

from . import _lib, errors
from ._fork import reopenable
from ._handle import Handle, report_callback_error, run_interruptible
from ._lib import C, appnorth_error

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: logging and json are imported where first needed (see appnorth._lib)
    import logging
    import threading
    from typing import Any, Callable, Dict, Iterable, List, NoReturn, Optional, Sequence, Tuple, TypeVar, Union

    from ._lib import PathArg, TextArg

    LoggerArg = Union[bool, logging.Logger, None]
    #: JSON given as a Python value (serialised here) or as text (sent unchanged).
    JSONArg = Union[Dict[str, Any], str, bytes, None]
    Screenshot = Tuple[bytes, str]
    _T = TypeVar("_T")

__all__ = [
    "Client",
    "Feedback",
    "DEFAULT_API_TIMEOUT_MS",
    "DEFAULT_RESOURCE_TIMEOUT_MS",
    "LOGGER_NAME",
]

#: The library's defaults (see appnorth_client_options_new in the header).
DEFAULT_API_TIMEOUT_MS = 30000
DEFAULT_RESOURCE_TIMEOUT_MS = 60000

#: The logger the library's lines go to unless ``Client(logger=...)`` says otherwise.
LOGGER_NAME = "appnorth"


def _debug_from_environment() -> None:
    """``APPNORTH_DEBUG=1`` (which also lowers the library's own level):
    the ``appnorth`` logger shows DEBUG lines on stderr even in a script
    that configured no logging."""
    if os.environ.get("APPNORTH_DEBUG") != "1":
        return
    import logging

    logger = logging.getLogger(LOGGER_NAME)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.DEBUG)
    if not logger.hasHandlers():
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("appnorth %(levelname)s: %(message)s"))
        logger.addHandler(handler)


_debug_from_environment()

# logging's level numbers (logging.DEBUG, INFO, WARNING, ERROR): fixed by
# its documentation, spelled out so that importing appnorth does not import
# logging (a Client with a logger does).
_DEBUG, _INFO, _WARNING, _ERROR = 10, 20, 30, 40

_PY_LEVELS: Dict[int, int] = {
    _lib.LOG_DEBUG: _DEBUG,
    _lib.LOG_INFO: _INFO,
    _lib.LOG_WARNING: _WARNING,
    _lib.LOG_ERROR: _ERROR,
}


def _min_library_level(logger: logging.Logger) -> int:
    """The lowest APPNORTH_LOG_* level ``logger`` would emit right now, so
    the library does not call into Python for lines that would be dropped."""
    level = logger.getEffectiveLevel()
    if level <= _DEBUG:
        return _lib.LOG_DEBUG
    if level <= _INFO:
        return _lib.LOG_INFO
    if level <= _WARNING:
        return _lib.LOG_WARNING
    return _lib.LOG_ERROR


def _make_log_callback(logger: logging.Logger, local: threading.local) -> Any:
    """A CFUNCTYPE log sink forwarding to ``logger``. It may run on any
    thread. ``local`` marks the thread as inside this client's callback, so
    that Client.close() refuses to run there."""

    def log_sink(level: int, message: Optional[bytes], user_data: Optional[int]) -> None:
        local.in_callback = getattr(local, "in_callback", 0) + 1
        try:
            with _lib.in_callback():
                text = message.decode("utf-8", errors="replace") if message else ""
                logger.log(_PY_LEVELS.get(level, _ERROR), "%s", text)
        except BaseException:  # noqa: BLE001 - never propagate into C
            report_callback_error("the appnorth log callback")
        finally:
            local.in_callback -= 1

    return _lib.LOG_FN(log_sink)


def _json_encoder() -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False)``, minus the encoder that
    dumps builds on every call (for any non-default argument): the C
    encoder json itself uses, made once. Without a circular-reference check
    (a shared one is not thread-safe): a circular value raises RecursionError
    instead of ValueError. Used only when it gives exactly dumps' output on a
    sample of every JSON type; otherwise (another Python, another json) it
    is dumps' own encoder."""
    import json

    slow = json.JSONEncoder(ensure_ascii=False)
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return slow.encode
    sample = {"s": "\u00e9\u2028\x00\"\\", "f": [9.99, -0.0, 1e300, float("inf")], "i": -3,
              "t": True, "n": None, "d": {"k": []}}
    try:
        fast = make(None, slow.default, json.encoder.encode_basestring, None,
                    slow.key_separator, slow.item_separator, False, False, True)

        def encode(value: Any) -> str:
            return "".join(fast(value, 0))

        if encode(sample) == json.dumps(sample, ensure_ascii=False):
            return encode
    except Exception:  # noqa: BLE001 - any mismatch: use the slow path
        pass
    return slow.encode


def _first_encode(value: Any) -> str:
    """The first serialisation: makes the encoder (importing json), puts it
    in _encode_json's place, and uses it; later calls go straight to it."""
    global _encode_json
    _encode_json = _json_encoder()
    return _encode_json(value)


#: Serialises the dicts and lists handed to the library (json_text).
_encode_json: Callable[[Any], str] = _first_encode


def json_text(value: JSONArg, name: str) -> Optional[bytes]:
    """JSON for the library: dicts and lists are serialised (UTF-8, no ASCII
    escaping); ``str``/``bytes`` are sent as given, so the host's own
    spelling (``9.99``) survives and the library validates it."""
    if value.__class__ is str and "\0" not in value and value.isascii():
        return value.encode()  # the common case, first (nothing to check)
    if isinstance(value, (dict, list)):
        # JSON text never holds a raw NUL (it is escaped), so only the
        # UTF-8 encoding can fail (a lone surrogate).
        text = _encode_json(value)
        try:
            return text.encode()
        except UnicodeEncodeError as exc:
            raise errors.InvalidUTF8Error(f"{name} is not valid UTF-8: {exc.reason}") from None
    if value is None or isinstance(value, (str, bytes, bytearray)):
        return _lib.to_c_string(value, name)
    raise TypeError(f"{name} must be a dict, list, str, bytes or None, not {type(value).__name__}")


def parse_json(text: str) -> Any:
    """``json.loads``; json is imported on first use. A value nested deeper
    than Python's recursion limit (the library accepts 2048 levels) is
    parsed without recursion instead, so every value the library accepts
    reaches the host (listeners included)."""
    import json

    try:
        return json.loads(text)
    except RecursionError:
        return _parse_json_deep(text)


def _parse_json_deep(text: str) -> Any:
    """The JSON grammar with an explicit stack: no recursion at any depth."""
    import json
    import re
    from json.decoder import scanstring
    from json.scanner import NUMBER_RE  # type: ignore[attr-defined]

    space = re.compile(r"[ \t\n\r]*")
    literals = (("true", True), ("false", False), ("null", None))
    stack: List[Any] = []  # [container, pending key] per open container
    pos = space.match(text, 0).end()  # type: ignore[union-attr]

    def fail(what: str) -> NoReturn:
        raise json.JSONDecodeError(what, text, pos)

    def key_at(at: int) -> Tuple[str, int]:
        if text[at:at + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
        key, at = scanstring(text, at + 1)
        at = space.match(text, at).end()  # type: ignore[union-attr]
        if text[at:at + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", text, at)
        return key, space.match(text, at + 1).end()  # type: ignore[union-attr]

    while True:
        ch = text[pos:pos + 1]
        value: Any
        if ch in ("{", "["):
            pos = space.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[pos:pos + 1] == ("}" if ch == "{" else "]"):
                value, pos = ({} if ch == "{" else []), pos + 1
            elif ch == "{":
                key, pos = key_at(pos)
                stack.append([{}, key])
                continue
            else:
                stack.append([[], None])
                continue
        elif ch == '"':
            value, pos = scanstring(text, pos + 1)
        else:
            for word, literal in literals:
                if text.startswith(word, pos):
                    value, pos = literal, pos + len(word)
                    break
            else:
                match = NUMBER_RE.match(text, pos)
                if match is None:
                    fail("Expecting value")
                integer, fraction, exponent = match.groups()
                value = float(integer + (fraction or "") + (exponent or "")) if fraction or exponent else int(integer)
                pos = match.end()
        while True:  # attach the value; close every container it ends
            pos = space.match(text, pos).end()  # type: ignore[union-attr]
            if not stack:
                if pos != len(text):
                    fail("Extra data")
                return value
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)
            ch = text[pos:pos + 1]
            if ch == ",":
                pos = space.match(text, pos + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    stack[-1][1], pos = key_at(pos)
                break
            if ch != ("}" if isinstance(container, dict) else "]"):
                fail("Expecting ',' delimiter")
            pos += 1
            value = stack.pop()[0]


class Feedback(Handle):
    """A feedback report under construction (``appnorth_feedback``).

    Args:
        text: the report text (required before submitting; 1 to
            MAX_FEEDBACK_TEXT_CHARS characters).
        diagnostics: a JSON object as a dict (serialised here) or as text
            (sent exactly as given).
        screenshots: ``(data, content_type)`` pairs; content type
            ``"image/png"`` or ``"image/jpeg"``, at most MAX_SCREENSHOTS.

    Not thread-safe: build it on one thread. Submitting only reads it; the
    queue copies it. Close it (or use ``with``) when done. One made before
    a fork() cannot be used in the child (WrongStateError): make it there.
    """

    _kind = "feedback"
    _cannot_reopen = "its text, diagnostics and screenshots went into the parent's handle"

    def __init__(self, text: TextArg = None, *, diagnostics: JSONArg = None,
                 screenshots: Iterable[Screenshot] = ()) -> None:
        self._init_state()
        self._attach(C.appnorth_feedback_new())
        try:
            if text is not None:
                self.set_text(text)
            if diagnostics is not None:
                self.set_diagnostics(diagnostics)
            for data, content_type in screenshots:
                self.add_screenshot(data, content_type)
        except BaseException:
            self.close()
            raise

    def _free(self, ptr: Any) -> None:
        C.appnorth_feedback_free(ptr)

    def set_text(self, text: TextArg) -> None:
        c_text = _lib.to_c_string(text, "text")
        with self._use() as handle:
            C.appnorth_feedback_set_text(handle, c_text, appnorth_error())

    def set_diagnostics(self, diagnostics: JSONArg) -> None:
        """A JSON object (dict, or text kept as given); None clears them."""
        c_json = json_text(diagnostics, "diagnostics")
        with self._use() as handle:
            C.appnorth_feedback_set_diagnostics(handle, c_json, appnorth_error())

    def add_screenshot(self, data: Union[bytes, bytearray, memoryview], content_type: TextArg) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"screenshot data must be bytes, not {type(data).__name__}")
        raw = bytes(data)
        c_type = _lib.to_c_string(content_type, "content_type")
        with self._use() as handle:
            C.appnorth_feedback_add_screenshot(handle, raw, len(raw), c_type, appnorth_error())

    def __repr__(self) -> str:
        return f"<appnorth.Feedback {'closed' if self._closed else 'open'}>"


class Client(Handle):
    """A connection to one AppNorth API for one App ID and one identity.

    Args:
        api_url: the API's base URL, ``http://`` or ``https://``.
        app_id: 1 to 128 characters of ``A-Z a-z 0-9 . _ -``.
        email, token: the user's credential; both or neither (anonymous).
            The token stays in memory, is never logged and never stored.
        api_timeout_ms: API request timeout, 1 to 600000 (default 30000).
        resource_timeout_ms: resource download timeout, 1 to 600000
            (default 60000).
        logger: where the library's log lines go: the ``"appnorth"``
            logger by default (``None`` or ``True``), another
            :class:`logging.Logger`, or ``False`` for silence. The library
            follows the logger's effective level as it changes (re-read on
            every call into the library); lines below it are never made.
        ca_file: a PEM CA bundle file to verify the server with, instead of
            the system store (``str``, ``bytes`` or a path object).
        ca_pem: a PEM CA bundle in memory (``bytes`` or ``str``); wins over
            ``ca_file``.
        pinned_public_keys: one ``"sha256//<base64>"`` pin or a list of
            them; the server's key must match one.
        proxy: an explicit proxy URL such as ``"http://proxy:3128"``.
        proxy_from_environment: ``False`` ignores curl's proxy environment
            variables (``http_proxy``, ``https_proxy``, ``no_proxy``...);
            they are honoured by default.
        compress_uploads: ``True`` (default) sends event batches, and write
            bodies from 1 KiB up, gzip-compressed; a server that answers 415
            to gzip gets them uncompressed from then on. ``False`` never
            compresses.
        dispatch_mode: ``True`` runs every callback of this client and of
            the handles made with it (log lines, config listeners) only
            inside :meth:`dispatch`, on the thread that calls it, never on
            a library thread; :meth:`dispatch_fd` says when something
            waits. ``False`` (default): library threads call back directly.
            See docs/threading.md.
        allow_cleartext_hosts: host names (or addresses) to which a
            credential may go over plain ``http://``. Without one, a
            credential on an ``http://`` URL to a host that is not loopback
            raises :class:`InvalidArgumentError`; an allowed host is logged
            as a warning.

    A TLS failure (untrusted, expired or wrong-host certificate, or a pin
    that does not match) raises :class:`NetworkError` with curl's reason.

    Text arguments take ``str`` (encoded to UTF-8) or ``bytes`` (passed
    unchanged). No network traffic happens here.

    Raises:
        InvalidArgumentError: missing (None) or malformed URL, App ID,
            credential or timeout.
        InvalidUTF8Error: text that is not valid UTF-8.
    """

    _kind = "client"

    @reopenable
    def __init__(
        self,
        api_url: TextArg,
        app_id: TextArg,
        *,
        email: TextArg = None,
        token: TextArg = None,
        api_timeout_ms: Optional[int] = None,
        resource_timeout_ms: Optional[int] = None,
        logger: LoggerArg = None,
        ca_file: PathArg = None,
        ca_pem: Union[bytes, str, None] = None,
        pinned_public_keys: Union[TextArg, Sequence[str]] = None,
        proxy: TextArg = None,
        proxy_from_environment: bool = True,
        compress_uploads: bool = True,
        dispatch_mode: bool = False,
        allow_cleartext_hosts: Sequence[str] = (),
    ) -> None:
        self._init_state()
        self._description = f"api_url={api_url!r}, app_id={app_id!r}"

        c_url = _lib.to_c_string(api_url, "api_url")
        c_app = _lib.to_c_string(app_id, "app_id")
        c_email = _lib.to_c_string(email, "email")
        c_token = _lib.to_c_string(token, "token")
        timeouts = None
        if api_timeout_ms is not None or resource_timeout_ms is not None:
            timeouts = (
                _lib.to_int32(DEFAULT_API_TIMEOUT_MS if api_timeout_ms is None else api_timeout_ms,
                              "api_timeout_ms"),
                _lib.to_int32(DEFAULT_RESOURCE_TIMEOUT_MS if resource_timeout_ms is None
                              else resource_timeout_ms, "resource_timeout_ms"),
            )
        py_logger = self._resolve_logger(logger)
        c_ca_file = _lib.to_c_path(ca_file, "ca_file")
        pem = ca_pem.encode("utf-8") if isinstance(ca_pem, str) else ca_pem
        if pem is not None and not isinstance(pem, bytes):
            raise TypeError(f"ca_pem must be bytes or str, not {type(ca_pem).__name__}")
        if pinned_public_keys is not None and not isinstance(pinned_public_keys, (str, bytes, bytearray)):
            pinned_public_keys = ";".join(pinned_public_keys)
        c_pins = _lib.to_c_string(pinned_public_keys, "pinned_public_keys")
        c_proxy = _lib.to_c_string(proxy, "proxy")
        if not isinstance(proxy_from_environment, bool):
            raise TypeError("proxy_from_environment must be a bool")
        if not isinstance(compress_uploads, bool):
            raise TypeError("compress_uploads must be a bool")
        if not isinstance(dispatch_mode, bool):
            raise TypeError("dispatch_mode must be a bool")
        if isinstance(allow_cleartext_hosts, (str, bytes)):
            allow_cleartext_hosts = (allow_cleartext_hosts,)
        c_cleartext = [_lib.to_c_string(h, "allow_cleartext_hosts") for h in allow_cleartext_hosts]

        err = appnorth_error()
        callback = None
        options = C.appnorth_client_options_new()
        try:
            C.appnorth_client_options_set_api_url(options, c_url, err)
            C.appnorth_client_options_set_app_id(options, c_app, err)
            if c_email is not None or c_token is not None:
                C.appnorth_client_options_set_credential(options, c_email, c_token, err)
            for c_host in c_cleartext:
                C.appnorth_client_options_allow_cleartext_host(options, c_host, err)
            if timeouts is not None:
                C.appnorth_client_options_set_timeouts(options, timeouts[0], timeouts[1], err)
            if py_logger is not None:
                callback = _make_log_callback(py_logger, self._local)
                self._library_level = _min_library_level(py_logger)
                C.appnorth_client_options_set_logger(options, callback, self._library_level, None, err)
            if c_ca_file is not None:
                C.appnorth_client_options_set_ca_file(options, c_ca_file, err)
            if pem is not None:
                C.appnorth_client_options_set_ca_pem(options, pem, len(pem), err)
            if c_pins is not None:
                C.appnorth_client_options_set_pinned_public_keys(options, c_pins, err)
            if c_proxy is not None or not proxy_from_environment:
                C.appnorth_client_options_set_proxy(options, c_proxy, 0 if proxy_from_environment else 1, err)
            if not compress_uploads:
                C.appnorth_client_options_set_compression(options, 0, err)
            if dispatch_mode:
                C.appnorth_client_options_set_dispatch_mode(options, 1, err)
            handle = _lib.ClientPtr()
            C.appnorth_client_new(options, handle, err)
        finally:
            C.appnorth_client_options_free(options)

        # The CFUNCTYPE object must outlive every call the library may make
        # into it: it is dropped only after appnorth_client_free() returned.
        self._py_logger = py_logger
        cache = getattr(py_logger, "_cache", None)
        self._level_cache = cache if isinstance(cache, dict) else None
        self._level_key = ("appnorth level", id(self))
        self._dispatch_mode = dispatch_mode
        self._attach(handle, keep=[callback] if callback is not None else [])

    _dispatch_mode = False

    # -- dispatch mode -------------------------------------------------------

    @property
    def dispatch_mode(self) -> bool:
        """Whether this client was made with ``dispatch_mode=True``."""
        return self._dispatch_mode

    def dispatch(self, max_callbacks: int = 0) -> int:
        """Run this dispatch-mode client's queued callbacks on the calling
        thread (``appnorth_dispatch``): log lines reaching ``logging``,
        config listeners of configs made with it. ``max_callbacks`` 0 runs
        every callback queued when the call began; a positive number, at
        most that many. Returns how many ran. With nothing pending it costs
        one atomic load in C. A call from inside a callback, or while
        another thread dispatches this client, runs nothing and returns 0.

        Raises:
            WrongStateError: the client is not in dispatch mode, or closed.
            InvalidArgumentError: a negative ``max_callbacks``.
        """
        limit = _lib.to_int32(max_callbacks, "max_callbacks")
        ran = ctypes.c_int32(0)
        with self._use() as handle:
            with _lib.callback_errors():
                C.appnorth_dispatch(handle, limit, ctypes.byref(ran), appnorth_error())
        return ran.value

    def _on_close(self) -> None:
        # appnorth.aio's attachments: the loop stops watching the dispatch
        # descriptor before the free closes it.
        for hook in getattr(self, "_close_hooks", ()):
            hook()

    def dispatch_fd(self) -> int:
        """The descriptor (an eventfd) that is readable while a callback is
        queued (``appnorth_dispatch_fd``): wait on it with ``select``,
        ``selectors`` or ``loop.add_reader``, then call :meth:`dispatch`.
        The library owns it: never read or close it; it is closed by
        :meth:`close`, so remove it from your loop before.

        Raises:
            WrongStateError: the client is not in dispatch mode, or closed.
        """
        fd = ctypes.c_int32(-1)
        with self._use(sync=False) as handle:
            C.appnorth_dispatch_fd(handle, ctypes.byref(fd), appnorth_error())
        return fd.value

    _py_logger: Optional[logging.Logger] = None
    _library_level = -1
    #: The logger's level cache (cleared in place, never replaced) and this
    #: client's mark in it (see sync_log_level).
    _level_cache: Optional[Dict[Any, Any]] = None
    _level_key: Tuple[str, int] = ("appnorth level", 0)

    def _sync_log_level(self) -> None:
        self.sync_log_level()

    def sync_log_level(self) -> None:
        """Hand the logger's current level to the library when it changed
        (it applies to every handle made with this client). Called on every
        call into the library through this client or its events and configs;
        costs one dict lookup when nothing changed: a key of this client's
        in the logger's level cache (``Logger._cache``, which ``logging``
        clears whenever any logger's level changes, ``logging.disable()``
        included) says the level was handed over since. Without that cache
        (another logging implementation), one ``getEffectiveLevel()``."""
        logger = self._py_logger
        if logger is None:
            return
        cache = self._level_cache
        if cache is not None:
            if self._level_key in cache:
                return
            # Marked before reading the level: a change after this point
            # clears the mark again, so the next call sees it.
            cache[self._level_key] = True
        level = _min_library_level(logger)
        if level == self._library_level:
            return
        try:
            with self._use(sync=False) as handle:
                C.appnorth_client_set_log_level(handle, level, appnorth_error())
            self._library_level = level
        except errors.WrongStateError:
            pass  # closed: the handles made with it keep their last level

    @staticmethod
    def _resolve_logger(logger: LoggerArg) -> Optional[logging.Logger]:
        import logging

        if logger is False:
            return None
        if logger is None or logger is True:
            return logging.getLogger(LOGGER_NAME)
        if isinstance(logger, logging.Logger):
            return logger
        raise TypeError(f"logger must be a bool, a logging.Logger or None, not {type(logger).__name__}")

    def _free(self, ptr: Any) -> None:
        C.appnorth_client_free(ptr)

    def _forget_after_fork(self) -> None:
        # An appnorth.aio attachment watches the parent's dispatch descriptor.
        self.__dict__.pop("_aio_loop", None)
        self.__dict__.pop("_close_hooks", None)
        super()._forget_after_fork()

    @property
    def _log_callback(self) -> Optional[Any]:
        """The CFUNCTYPE log sink held for the library (None when silent or closed)."""
        return self._keep[0] if self._keep else None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<appnorth.Client {getattr(self, '_description', '')} {state}>"

    # -- cancelling ----------------------------------------------------------

    def cancel(self) -> None:
        """End every request in flight on this client now: each raises
        :class:`~appnorth.errors.CancelledError` (a queue submit queues
        its write instead). Calls started afterwards run normally.
        Callable from any thread; never blocks. Ctrl-C during a network
        call on the main thread does this itself, then raises
        KeyboardInterrupt."""
        with self._use(sync=False) as handle:
            C.appnorth_client_cancel(handle, appnorth_error())

    def _network(self, handle: Any, call: Callable[[], _T]) -> _T:
        """Run ``call`` (a network call on ``handle``, held by the caller's
        ``_use``) so that Ctrl-C cancels it and is raised at once."""
        return run_interruptible(call, lambda: C.appnorth_client_cancel(handle, None))

    def _cancellable(self, call: Callable[[], _T]) -> _T:
        """Run ``call``, a waiting call on another handle made with this
        client (a config fetch, an events flush), so that Ctrl-C on the main
        thread cancels it through this client and is raised at once. Once
        this client is closed it runs directly: it then ends by its own
        timeout. ``call`` must enter ``_lib.callback_errors()`` itself (see
        run_interruptible)."""
        entered = False
        try:
            with self._use(sync=False) as handle:
                entered = True
                return self._network(handle, call)
        except errors.WrongStateError:
            if entered or not self._closed:
                raise
        return call()

    # -- reads -------------------------------------------------------------

    #: The scope, once asked: it is fixed for the client's life (its URL,
    #: App ID and email), and a ReadCache given the client asks on every read.
    _scope_text: Optional[str] = None

    @property
    def scope(self) -> str:
        """The account scope: ``"<api url>|<app id>|<email or anonymous>"``.
        Offline queue entries and cache keys are matched on it."""
        text = self._scope_text
        if text is None or self._closed or self._pid != os.getpid():
            with self._use() as handle:  # raises WrongStateError when closed
                text = self._scope_text = _lib.call_returning_string(C.appnorth_client_scope, handle)
        return text

    def list_boards_json(self) -> str:
        """The server's ``{"boards": [...]}`` object, as JSON text.

        Raises NetworkError when no response arrived, the HTTP mapping
        (AuthenticationError, ServerError, ...) for error responses,
        InvalidJSONError when the body is not a JSON object.
        Blocks for at most the API request timeout.
        """
        with self._use() as handle:
            return self._network(handle, lambda: _lib.call_returning_string(C.appnorth_client_list_boards, handle))

    def list_boards(self) -> Dict[str, Any]:
        """The server's ``{"boards": [...]}`` object, parsed."""
        result: Dict[str, Any] = parse_json(self.list_boards_json())
        return result

    def list_ideas_json(self, query_json: TextArg = None) -> str:
        """One page of ideas as JSON text, ``{"ideas": [...], "next_cursor": ...}``.

        ``query_json``: None for no filters, or a JSON object with any of
        ``board``, ``q``, ``status``, ``cursor`` (strings) and ``limit``
        (integer 1 to 100). Unknown keys or wrong types raise
        InvalidJSONError before any request is made.
        """
        c_query = _lib.to_c_string(query_json, "query_json")
        with self._use() as handle:
            return self._network(
                handle, lambda: _lib.call_returning_string(C.appnorth_client_list_ideas, handle, c_query))

    def list_ideas(
        self,
        board: Optional[str] = None,
        q: Optional[str] = None,
        status: Optional[str] = None,
        cursor: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Dict[str, Any]:
        """One page of ideas, parsed: ``{"ideas": [...], "next_cursor": str or None}``.

        Filters left as None are not sent. ``status`` is one of open,
        planned, in_progress, done, declined; ``cursor`` is the previous
        page's ``next_cursor``; ``limit`` is 1 to 100 (server default 20).
        """
        text = idea_query(board=board, q=q, status=status, cursor=cursor, limit=limit)
        result: Dict[str, Any] = parse_json(self.list_ideas_json(text))
        return result

    def list_comments(self, idea_id: TextArg) -> Dict[str, Any]:
        """An idea's comments: ``{"comments": [...]}``."""
        c_id = _lib.to_c_string(idea_id, "idea_id")
        with self._use() as handle:
            text = self._network(
                handle, lambda: _lib.call_returning_string(C.appnorth_client_list_comments, handle, c_id))
        result: Dict[str, Any] = parse_json(text)
        return result

    def list_chat_messages(self) -> Dict[str, Any]:
        """This identity's chat messages: ``{"messages": [...]}``."""
        with self._use() as handle:
            text = self._network(
                handle, lambda: _lib.call_returning_string(C.appnorth_client_list_chat_messages, handle))
        result: Dict[str, Any] = parse_json(text)
        return result

    # -- writes ------------------------------------------------------------
    #
    # Each write carries an Idempotency-Key: the caller's, or a random one
    # the library makes. Nothing is queued: see OfflineQueue for that.

    def _write(self, func: Any, *args: Any) -> Dict[str, Any]:
        with self._use() as handle:
            text = self._network(handle, lambda: _lib.call_returning_string(func, handle, *args))
        result: Dict[str, Any] = parse_json(text)
        return result

    def submit_idea(self, board_id: TextArg, title: TextArg, body: TextArg = None, *,
                    idempotency_key: TextArg = None) -> Dict[str, Any]:
        """Submit an idea; returns the server's ``{"idea": {...}}``."""
        return self._write(C.appnorth_client_submit_idea,
                           _lib.to_c_string(board_id, "board_id"), _lib.to_c_string(title, "title"),
                           _lib.to_c_string(body, "body"),
                           _lib.to_c_string(idempotency_key, "idempotency_key"))

    def submit_comment(self, idea_id: TextArg, body: TextArg, *,
                       idempotency_key: TextArg = None) -> Dict[str, Any]:
        """Comment on an idea; returns ``{"comment": {...}}``."""
        return self._write(C.appnorth_client_submit_comment,
                           _lib.to_c_string(idea_id, "idea_id"), _lib.to_c_string(body, "body"),
                           _lib.to_c_string(idempotency_key, "idempotency_key"))

    def submit_feedback(self, feedback: Union[Feedback, str, bytes, None], *, diagnostics: JSONArg = None,
                        screenshots: Iterable[Screenshot] = (),
                        idempotency_key: TextArg = None) -> Dict[str, Any]:
        """Send feedback, given as a :class:`Feedback` or as its text plus
        ``diagnostics`` and ``screenshots``; returns ``{"feedback": {...}}``."""
        c_key = _lib.to_c_string(idempotency_key, "idempotency_key")
        with feedback_for(feedback, diagnostics, screenshots) as built:
            with built._use() as fb:
                return self._write(C.appnorth_client_submit_feedback, fb, c_key)

    def vote(self, idea_id: TextArg, *, idempotency_key: TextArg = None) -> Dict[str, Any]:
        """Vote for an idea (once per identity: a second vote is ConflictError)."""
        return self._write(C.appnorth_client_vote, _lib.to_c_string(idea_id, "idea_id"),
                           _lib.to_c_string(idempotency_key, "idempotency_key"))

    def send_chat_message(self, body: TextArg, *, idempotency_key: TextArg = None) -> Dict[str, Any]:
        """Send a chat message (never queued, never cached)."""
        return self._write(C.appnorth_client_send_chat_message, _lib.to_c_string(body, "body"),
                           _lib.to_c_string(idempotency_key, "idempotency_key"))


def idea_query(board: Optional[str] = None, q: Optional[str] = None, status: Optional[str] = None,
               cursor: Optional[str] = None, limit: Optional[int] = None) -> Optional[str]:
    """The query_json text for the given filters, or None for no filters."""
    query: Dict[str, Any] = {}
    for key, value in (("board", board), ("q", q), ("status", status), ("cursor", cursor), ("limit", limit)):
        if value is not None:
            query[key] = value
    if not query:
        return None
    import json

    return json.dumps(query, ensure_ascii=False)


class _Borrowed:
    """``with`` around a Feedback the caller owns: leaves it open."""

    def __init__(self, feedback: Feedback) -> None:
        self.feedback = feedback

    def __enter__(self) -> Feedback:
        return self.feedback

    def __exit__(self, *exc_info: Any) -> None:
        pass


def feedback_for(feedback: Union[Feedback, str, bytes, None], diagnostics: JSONArg,
                 screenshots: Iterable[Screenshot]) -> Any:
    """A context manager yielding a Feedback: the caller's (kept open) or
    a temporary one built from text, diagnostics and screenshots."""
    if isinstance(feedback, Feedback):
        if diagnostics is not None or tuple(screenshots):
            raise TypeError("give diagnostics and screenshots to the Feedback object, not here")
        return _Borrowed(feedback)
    if feedback is not None and not isinstance(feedback, (str, bytes, bytearray)):
        raise TypeError(f"feedback must be a Feedback or its text, not {type(feedback).__name__}")
    # None leaves the text unset: the library refuses that with its own message.
    return Feedback(feedback, diagnostics=diagnostics, screenshots=screenshots)
