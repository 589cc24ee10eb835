"""Offline support: storages, the offline write queue, the read cache and a
manual clock.

- :class:`Storage` keeps the queue's or the cache's state: in a SQLite data
  directory, in memory, or through Python ``load``/``save`` functions.
  Give the queue and the cache separate storages.
- :class:`OfflineQueue` tries each write at once and keeps it when the
  network fails; :meth:`OfflineQueue.flush` replays a client's scope's
  entries with their original idempotency keys.
- :class:`ReadCache` keeps board and idea arrays for a TTL, keyed by scope
  and query; :meth:`ReadCache.read_boards` / :meth:`ReadCache.read_ideas`
  deliver cached data first, then fresh data from the network.
- :class:`ManualClock` moves only when told to, for tests.

Storage and read callbacks run on the thread that made the call, before it
returns; for a network call made on the main thread, that is the worker
thread the binding runs it on so that Ctrl-C can interrupt it. An
exception raised in one never unwinds into C: a storage callback's
exception becomes the ``__cause__`` of the resulting StorageError, and a
read callback's exception is re-raised once the call has returned.
"""

from __future__ import annotations

import ctypes
import os

from . import _lib, errors
from ._fork import reopenable
from ._handle import Handle
from ._lib import C, appnorth_error
from .errors import AppNorthError
from .client import Client, Feedback, _make_log_callback, _min_library_level, feedback_for, json_text, parse_json

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Any, Callable, Dict, List, Optional, Tuple, Union

    from ._lib import TextArg
    from .client import JSONArg, LoggerArg, Screenshot

    #: A scope string (see Client.scope) or the client whose scope it is.
    ScopeArg = Union[str, bytes, Client]
    StorageLoad = Callable[[], Optional[bytes]]
    StorageSave = Callable[[Optional[bytes]], None]
    ReadCallback = Callable[[int, List[Any]], None]

__all__ = ["Storage", "OfflineQueue", "ReadCache", "ManualClock"]

_to_int64 = _lib.to_int64


_CACHE_BOARDS = _lib.thin("appnorth_cache_boards")
_CACHE_IDEAS = _lib.thin("appnorth_cache_ideas")


def _scope(scope: Optional[ScopeArg], name: str = "scope") -> Optional[bytes]:
    if isinstance(scope, Client):
        return scope.scope.encode("utf-8")
    return _lib.to_c_string(scope, name)


# ---------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------

class Storage(Handle):
    """Where an OfflineQueue or ReadCache keeps its state.

    Make one with :meth:`sqlite`, :meth:`memory` or :meth:`callbacks`.
    Closing it is safe as soon as the queue or cache is created: they keep
    their own reference.
    """

    _kind = "storage"

    def __init__(self) -> None:
        raise TypeError("use Storage.sqlite(), Storage.memory() or Storage.callbacks()")

    @classmethod
    def _make(cls, func: Any, *args: Any) -> "Storage":
        self = cls.__new__(cls)
        self._open(func, *args)
        return self

    @reopenable
    def _open(self, func: Any, *args: Any) -> None:
        self._init_state()
        out = _lib.StoragePtr()
        with _lib.callback_errors():
            func(*args, out, appnorth_error())
        self._attach(out)

    @classmethod
    def sqlite(cls, data_dir: Union[str, bytes, "os.PathLike[str]"], name: TextArg) -> "Storage":
        """Storage in the SQLite database of ``data_dir`` (created 0700; the
        database file is 0600). ``name`` (1 to 64 of ``A-Z a-z 0-9 . _ -``)
        separates storages in one folder, e.g. "queue" and "cache"."""
        path = data_dir if data_dir is None or isinstance(data_dir, (str, bytes)) else os.fspath(data_dir)
        with errors.naming_path(path):
            return cls._make(C.appnorth_storage_new_sqlite, _lib.to_c_string(path, "data_dir"),
                             _lib.to_c_string(name, "name"))

    @classmethod
    def memory(cls) -> "Storage":
        """Storage in memory only: lost when the last user frees it. In a
        forked child one made before the fork reopens empty: what it held
        stays the parent's."""
        return cls._make(C.appnorth_storage_new_memory)

    @classmethod
    def callbacks(cls, load: StorageLoad, save: StorageSave) -> "Storage":
        """Storage through Python functions.

        ``load()`` returns the stored blob (bytes) or None when nothing is
        stored; ``save(blob)`` stores it, replacing what was there, and
        ``save(None)`` erases. Raising in either makes the library call fail
        with StorageError (the exception is its ``__cause__``). They run
        during the queue's or cache's call, on its thread (see the module's
        docstring), and must not call back into the queue or cache using
        them.

        One made before a fork() cannot be used in the child, nor can a
        queue or cache on it (WrongStateError): two processes saving the
        whole state through the same functions would overwrite each other.
        """
        if not callable(load) or not callable(save):
            raise TypeError("load and save must be callable")

        def c_load(user_data: Optional[int], buffer: Any) -> int:
            try:
                with _lib.in_callback():
                    data = load()
                if data is not None:
                    raw = bytes(data)
                    C.appnorth_buffer_set(buffer, raw, len(raw), appnorth_error())
                return 0
            except BaseException as exc:  # noqa: BLE001 - never propagate into C
                _lib.stash_callback_error(exc, "a storage load callback")
                return -1

        def c_save(user_data: Optional[int], data: Optional[int], length: int) -> int:
            try:
                with _lib.in_callback():
                    save(None if not data else ctypes.string_at(data, length))
                return 0
            except BaseException as exc:  # noqa: BLE001 - never propagate into C
                _lib.stash_callback_error(exc, "a storage save callback")
                return -1

        load_fn = _lib.STORAGE_LOAD_FN(c_load)
        save_fn = _lib.STORAGE_SAVE_FN(c_save)
        key = _lib.pin([load_fn, save_fn], [load, save])
        try:
            storage = cls._make(C.appnorth_storage_new_callbacks, load_fn, save_fn, _lib.RELEASE, key)
            storage._recipe = None
            storage._cannot_reopen = "its state is kept by host functions that the parent uses too"
            return storage
        except BaseException:
            # Not created: the library never calls release for it.
            _lib.unpin(key)
            raise

    #: The log sink of queues and caches opened on it (set_logger); each
    #: keeps a reference while it lives.
    _log_callback: Any = None
    #: What set_logger() was last given (set again in a forked child).
    _logger_arg: Any = None
    _logger_set = False

    def set_logger(self, logger: "LoggerArg" = None) -> None:
        """Where queues and caches opened on this storage from now on log
        what they find damaged in it and drop (a warning naming how many
        entries and their ids or kinds, never their content): the
        ``"appnorth"`` logger by default (``None`` or ``True``), another
        ``logging.Logger``, or ``False`` for nowhere (as before any call).
        The logger's level is read now. The lines come on the thread that
        called the queue or cache."""
        py_logger = Client._resolve_logger(logger)
        with self._use() as handle, _lib.callback_errors():
            if py_logger is None:
                C.appnorth_storage_set_logger(handle, _lib.NULL_LOG_FN, _lib.LOG_ERROR, None, appnorth_error())
                self._log_callback = None
            else:
                callback = _make_log_callback(py_logger, self._local)
                C.appnorth_storage_set_logger(handle, callback, _min_library_level(py_logger), None,
                                              appnorth_error())
                self._log_callback = callback
        self._logger_arg, self._logger_set = logger, True

    def _carry_over(self) -> Optional[Callable[[], None]]:
        if not self._logger_set:
            return None
        logger = self._logger_arg
        return lambda: self.set_logger(logger)

    def _free(self, ptr: Any) -> None:
        C.appnorth_storage_free(ptr)

    def erase(self) -> None:
        """Erase what the storage holds (for logout). A queue or cache that
        already loaded it keeps its entries in memory: discard or clear
        those too, or close them first."""
        with self._use() as handle, _lib.callback_errors():
            C.appnorth_storage_erase(handle, appnorth_error())

    def __repr__(self) -> str:
        return f"<appnorth.Storage {'closed' if self._closed else 'open'}>"


# ---------------------------------------------------------------------------
# Offline write queue
# ---------------------------------------------------------------------------

class OfflineQueue(Handle):
    """The offline write queue on a storage (``appnorth_queue``).

    Each submit tries the request at once and returns True when the server
    accepted it, False when a network failure made the queue keep it for a
    later :meth:`flush`. Every other failure is raised and nothing is kept;
    QueueFullError when it had to be kept but the queue is at its limit.

    Args:
        storage: where entries are kept (they survive a restart with a
            SQLite or host storage).
        max_entries: 0 for the default (50), else 1 to 10000.
    """

    _kind = "queue"
    _log_callback: Any = None  # the storage's, kept while the queue lives

    @reopenable
    def __init__(self, storage: Storage, max_entries: int = 0) -> None:
        self._init_state()
        if not isinstance(storage, Storage):
            raise TypeError(f"storage must be a Storage, not {type(storage).__name__}")
        limit = _lib.to_int32(max_entries, "max_entries")
        out = _lib.QueuePtr()
        with storage._use() as s, _lib.callback_errors():
            C.appnorth_queue_new(s, limit, out, appnorth_error())
            self._log_callback = storage._log_callback
        self._attach(out)

    def _free(self, ptr: Any) -> None:
        C.appnorth_queue_free(ptr)

    def _submit(self, client: Client, func: Any, *args: Any) -> bool:
        submitted = ctypes.c_int32(0)
        with self._use() as q, client._use() as c:
            def call() -> None:
                with _lib.callback_errors():
                    func(q, c, *args, submitted, appnorth_error())
            client._network(c, call)
        return bool(submitted.value)

    def submit_idea(self, client: Client, board_id: TextArg, title: TextArg, body: TextArg = None, *,
                    idempotency_key: TextArg = None) -> bool:
        """Submit an idea now, or keep it on a network failure."""
        return self._submit(client, C.appnorth_queue_submit_idea,
                            _lib.to_c_string(board_id, "board_id"), _lib.to_c_string(title, "title"),
                            _lib.to_c_string(body, "body"),
                            _lib.to_c_string(idempotency_key, "idempotency_key"))

    def submit_comment(self, client: Client, idea_id: TextArg, body: TextArg, *,
                       idempotency_key: TextArg = None) -> bool:
        """Submit a comment now, or keep it on a network failure."""
        return self._submit(client, C.appnorth_queue_submit_comment,
                            _lib.to_c_string(idea_id, "idea_id"), _lib.to_c_string(body, "body"),
                            _lib.to_c_string(idempotency_key, "idempotency_key"))

    def submit_feedback(self, client: Client, feedback: Union[Feedback, str, bytes, None], *,
                        diagnostics: JSONArg = None, screenshots: Tuple[Screenshot, ...] = (),
                        idempotency_key: TextArg = None) -> bool:
        """Submit feedback now, or keep a copy on a network failure."""
        c_key = _lib.to_c_string(idempotency_key, "idempotency_key")
        with feedback_for(feedback, diagnostics, screenshots) as built, built._use() as fb:
            return self._submit(client, C.appnorth_queue_submit_feedback, fb, c_key)

    def flush(self, client: Client) -> int:
        """Replay the client's scope's entries in order with their original
        keys; returns how many were sent. A network failure stops the flush
        quietly (the rest stay); any other error is raised and the failing
        entry stays pending. The raised AppNorthError carries that entry's
        id as ``entry_id`` (see :meth:`entries` and :meth:`discard_entry`)
        and how many were sent before it as ``sent``."""
        sent = ctypes.c_int32(0)
        failed = ctypes.c_void_p()
        try:
            with self._use() as q, client._use() as c:
                def call() -> None:
                    with _lib.callback_errors():
                        C.appnorth_queue_flush_v2(q, c, sent, failed, appnorth_error())
                client._network(c, call)
        except AppNorthError as error:
            error.entry_id = _lib.take_string(failed)
            error.sent = sent.value
            raise
        _lib.take_string(failed)
        return sent.value

    def pending_count(self) -> int:
        """How many entries are pending, over all scopes."""
        count = ctypes.c_int32(0)
        with self._use() as q, _lib.callback_errors():
            C.appnorth_queue_pending_count(q, count, appnorth_error())
        return count.value

    def __len__(self) -> int:
        return self.pending_count()

    def entries(self) -> List[Dict[str, Any]]:
        """Pending entries over all scopes, oldest first: id, scope, kind,
        idempotency_key, created_ms, attempts (failed sends so far) and
        last_error (the last failure's message or None); no payloads."""
        with self._use() as q, _lib.callback_errors():
            text = _lib.call_returning_string(C.appnorth_queue_entries, q)
        result: List[Dict[str, Any]] = parse_json(text)
        return result

    def discard(self, scope: Optional[ScopeArg] = None) -> int:
        """Discard a scope's entries (a Client or its scope string), or all
        entries when None; returns how many. For logout."""
        c_scope = _scope(scope)
        discarded = ctypes.c_int32(0)
        with self._use() as q, _lib.callback_errors():
            C.appnorth_queue_discard(q, c_scope, discarded, appnorth_error())
        return discarded.value

    def discard_entry(self, entry_id: TextArg) -> bool:
        """Discard one entry by id (from :meth:`entries` or a flush error's
        ``entry_id``); False when no pending entry has that id (already
        sent or discarded, perhaps by another process)."""
        c_id = _lib.to_c_string(entry_id, "entry_id")
        discarded = ctypes.c_int32(0)
        with self._use() as q, _lib.callback_errors():
            C.appnorth_queue_discard_entry(q, c_id, discarded, appnorth_error())
        return bool(discarded.value)

    def __repr__(self) -> str:
        return f"<appnorth.OfflineQueue {'closed' if self._closed else 'open'}>"


# ---------------------------------------------------------------------------
# Clock
# ---------------------------------------------------------------------------

class ManualClock(Handle):
    """A clock that moves only when told to (``appnorth_clock``), starting
    at ``wall_ms`` milliseconds since the epoch. Thread-safe. One made
    before a fork() cannot be used in the child (WrongStateError), nor can
    a cache or config made with it: its time moved in the parent."""

    _kind = "clock"
    _cannot_reopen = "a manual clock's time is the parent's"

    def __init__(self, wall_ms: int) -> None:
        self._init_state()
        out = _lib.ClockPtr()
        C.appnorth_clock_new_manual(_to_int64(wall_ms, "wall_ms"), out, appnorth_error())
        self._attach(out)

    def _free(self, ptr: Any) -> None:
        C.appnorth_clock_free(ptr)

    def advance(self, ms: int) -> None:
        """Move monotonic and wall time forward by ``ms`` (0 or more)."""
        with self._use() as clock:
            C.appnorth_clock_advance(clock, _to_int64(ms, "ms"), appnorth_error())

    def set_wall(self, wall_ms: int) -> None:
        """Set the wall time only (monotonic time does not move)."""
        with self._use() as clock:
            C.appnorth_clock_set_wall(clock, _to_int64(wall_ms, "wall_ms"), appnorth_error())

    def __repr__(self) -> str:
        return f"<appnorth.ManualClock {'closed' if self._closed else 'open'}>"


# ---------------------------------------------------------------------------
# Read cache
# ---------------------------------------------------------------------------

class ReadCache(Handle):
    """The TTL read cache for boards and ideas (``appnorth_cache``).

    Args:
        storage: where entries are kept (not the queue's storage).
        ttl_seconds: 0 for the default (300), else 1 to 31536000.
        clock: a ManualClock, or None for the system clock.

    Scopes are Client.scope strings (a Client is accepted too). Only first
    pages are cached: a query with a cursor is refused.
    """

    _kind = "cache"
    _log_callback: Any = None  # the storage's, kept while the cache lives

    @reopenable
    def __init__(self, storage: Storage, ttl_seconds: int = 0, clock: Optional[ManualClock] = None) -> None:
        self._init_state()
        if not isinstance(storage, Storage):
            raise TypeError(f"storage must be a Storage, not {type(storage).__name__}")
        if clock is not None and not isinstance(clock, ManualClock):
            raise TypeError(f"clock must be a ManualClock or None, not {type(clock).__name__}")
        ttl = _lib.to_int32(ttl_seconds, "ttl_seconds")
        out = _lib.CachePtr()
        with storage._use() as s, _lib.callback_errors():
            if clock is None:
                C.appnorth_cache_new(s, ttl, None, out, appnorth_error())
            else:
                with clock._use() as c:
                    C.appnorth_cache_new(s, ttl, c, out, appnorth_error())
            self._log_callback = storage._log_callback
        self._attach(out)

    def _free(self, ptr: Any) -> None:
        C.appnorth_cache_free(ptr)

    def store_boards(self, scope: ScopeArg, boards: Union[List[Any], JSONArg]) -> None:
        """Store boards: the array, or the ``{"boards": [...]}`` response."""
        c_scope, c_json = _scope(scope), json_text(boards, "boards_json")  # type: ignore[arg-type]
        with self._use() as cache, _lib.callback_errors():
            C.appnorth_cache_store_boards(cache, c_scope, c_json, appnorth_error())

    def store_ideas(self, scope: ScopeArg, ideas: Union[List[Any], JSONArg], query: JSONArg = None) -> None:
        """Store ideas for a query (as for Client.list_ideas_json; no cursor)."""
        c_scope = _scope(scope)
        c_query, c_json = json_text(query, "query_json"), json_text(ideas, "ideas_json")  # type: ignore[arg-type]
        with self._use() as cache, _lib.callback_errors():
            C.appnorth_cache_store_ideas(cache, c_scope, c_query, c_json, appnorth_error())

    # The two reads take the thin path (Handle._thin), like Config's
    # getters: they are served from the cache's memory and run no storage
    # callback, so there is no callback error to catch.

    def boards_json(self, scope: ScopeArg) -> Optional[str]:
        """The fresh boards array as JSON text, or None when absent or expired."""
        out = self._thin(_CACHE_BOARDS, _scope(scope))
        text = _lib.take_string(out.string)
        _lib.SCRATCH.append(out)
        return text

    def boards(self, scope: ScopeArg) -> Optional[List[Any]]:
        """The fresh boards array, or None when absent or expired."""
        text = self.boards_json(scope)
        return None if text is None else parse_json(text)

    def ideas_json(self, scope: ScopeArg, query: JSONArg = None) -> Optional[str]:
        """The fresh ideas array for a query as JSON text, or None."""
        out = self._thin(_CACHE_IDEAS, _scope(scope), json_text(query, "query_json"))
        text = _lib.take_string(out.string)
        _lib.SCRATCH.append(out)
        return text

    def ideas(self, scope: ScopeArg, query: JSONArg = None) -> Optional[List[Any]]:
        """The fresh ideas array for a query, or None."""
        text = self.ideas_json(scope, query)
        return None if text is None else parse_json(text)

    def clear(self, scope: ScopeArg) -> None:
        """Remove a scope's boards and ideas."""
        c_scope = _scope(scope)
        with self._use() as cache, _lib.callback_errors():
            C.appnorth_cache_clear(cache, c_scope, appnorth_error())

    # -- cached-then-fresh reads ----------------------------------------------

    @staticmethod
    def _deliveries(callback: Optional[ReadCallback]) -> Tuple[Any, List[Tuple[int, List[Any]]]]:
        deliveries: List[Tuple[int, List[Any]]] = []

        def on_read(source: int, text: Optional[bytes], user_data: Optional[int]) -> None:
            try:
                data: List[Any] = parse_json(text.decode("utf-8")) if text else []
                deliveries.append((_lib.Source(source), data))
                if callback is not None:
                    with _lib.in_callback():
                        callback(_lib.Source(source), data)
            except BaseException as exc:  # noqa: BLE001 - re-raised after the call returns
                _lib.stash_callback_error(exc, "a read callback")

        return _lib.READ_FN(on_read), deliveries

    def read_boards(self, client: Client,
                    callback: Optional[ReadCallback] = None) -> List[Tuple[int, List[Any]]]:
        """Deliver fresh cached boards (SOURCE_CACHE, only when cached),
        then load them from the network, store and deliver them again
        (SOURCE_NETWORK). Both deliveries happen before this returns, on
        the thread making the call (on the main thread, a worker thread
        while this waits, so that Ctrl-C cancels the request and raises
        KeyboardInterrupt at once); each goes to ``callback(source,
        boards)`` if given and all are returned as ``[(source, boards),
        ...]``. A network failure is raised after cached data, if any, was
        delivered to the callback.
        """
        fn, deliveries = self._deliveries(callback)
        self._read(client, C.appnorth_read_boards, fn)
        return deliveries

    def read_ideas(self, client: Client, query: JSONArg = None,
                   callback: Optional[ReadCallback] = None) -> List[Tuple[int, List[Any]]]:
        """The same for ideas and a query (no cursor)."""
        c_query = json_text(query, "query_json")
        fn, deliveries = self._deliveries(callback)
        self._read(client, C.appnorth_read_ideas, c_query, fn)
        return deliveries

    def _read(self, client: Client, func: Any, *args: Any) -> None:
        """``func(cache, client, *args, NULL, err)``, a cached-then-fresh
        read, made interruptible like the client's own network calls."""
        with self._use() as cache, client._use() as c:
            def call() -> None:
                with _lib.callback_errors():
                    func(cache, c, *args, None, appnorth_error())
            client._network(c, call)

    def __repr__(self) -> str:
        return f"<appnorth.ReadCache {'closed' if self._closed else 'open'}>"
