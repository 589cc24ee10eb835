"""asyncio face of the binding: ``await`` forms of the network calls.

Each coroutine starts the library's non-blocking form of the call
(``appnorth_*_async``) and awaits its completion; no thread is spent per
call (the library runs every client read and write on its one transfer
thread) and none of asyncio's executor threads is used::

    import asyncio, appnorth
    from appnorth import aio

    async def main():
        with appnorth.Client(url, "demo") as client:
            boards, ideas = await asyncio.gather(aio.list_boards(client),
                                                 aio.list_ideas(client, limit=5))

    asyncio.run(main())

- Results and errors are the blocking calls' (the same dicts, the same
  exception classes).
- Cancelling the awaiting task (``task.cancel()``, ``asyncio.wait_for``'s
  timeout, Ctrl-C under ``asyncio.run``, which cancels the main task)
  cancels that operation alone (``appnorth_op_cancel``); the others go on.
- Dispatch mode (``Client(..., dispatch_mode=True)``), the recommended way:
  the first await on such a client attaches it to the running loop
  (:func:`attach`: ``loop.add_reader`` on its dispatch descriptor, which
  runs ``client.dispatch()`` when something is queued), so completions,
  log lines and config listeners all run on the loop's thread, with no
  polling and no thread of ours. Close the client on the loop's thread; its
  close detaches it first.
- Default mode: the completion arrives on a library thread and is handed to
  the loop with ``loop.call_soon_threadsafe``; the awaiting code resumes on
  the loop's thread all the same. Config changes reach the loop's thread
  through :func:`add_config_listener` or the :class:`ConfigChanges` async
  iterator, and log lines through :func:`loop_logger`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

from . import _lib, _ops, errors
from ._lib import C
from .client import Client, Feedback, feedback_for, idea_query, parse_json

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any, AsyncIterator, Callable, Dict, List, NamedTuple, Optional, Tuple, Union

    from ._lib import TextArg
    from .config import Config
    from .events import Events
    from .offline import OfflineQueue

__all__ = [
    "list_boards", "list_ideas", "list_comments", "list_chat_messages",
    "submit_idea", "submit_comment", "submit_feedback", "vote", "send_chat_message",
    "queue_submit_idea", "queue_submit_comment", "queue_submit_feedback", "queue_flush",
    "refresh_config", "flush_events", "add_config_listener", "ConfigChanges", "ConfigChange",
    "loop_logger", "on_loop", "attach", "detach",
]


# ---------------------------------------------------------------------------
# Dispatch mode on the loop
# ---------------------------------------------------------------------------

def _serve(client: Client) -> None:
    try:
        client.dispatch()
    except errors.WrongStateError:  # closing: its close hook detaches it
        pass


def attach(client: Client, loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
    """Run a dispatch-mode client's callbacks on ``loop`` (default: the
    running loop): ``loop.add_reader`` on :meth:`Client.dispatch_fd`, whose
    handler calls :meth:`Client.dispatch`. Idempotent for one loop; a
    client is attached to one loop at a time (WrongStateError otherwise).
    The awaits of this module call it themselves."""
    target = loop or asyncio.get_running_loop()
    attached = getattr(client, "_aio_loop", None)
    if attached is target and not target.is_closed():
        return
    if attached is not None and not attached.is_closed():
        raise errors.WrongStateError("the client is attached to another event loop")
    fd = client.dispatch_fd()
    target.add_reader(fd, _serve, client)
    client._aio_loop = target  # type: ignore[attr-defined]
    hooks = client.__dict__.setdefault("_close_hooks", [])
    hooks.append(lambda: _remove(client, target, fd))
    # Callbacks queued before the reader was added are served now.
    target.call_soon(_serve, client)


def _remove(client: Client, loop: asyncio.AbstractEventLoop, fd: int) -> None:
    if getattr(client, "_aio_loop", None) is loop:
        client._aio_loop = None  # type: ignore[attr-defined]
        if not loop.is_closed():
            loop.remove_reader(fd)


def detach(client: Client) -> None:
    """Stop serving the client's callbacks on its loop (on that loop's
    thread). Closing the client does this itself."""
    loop = getattr(client, "_aio_loop", None)
    if loop is not None:
        _remove(client, loop, client.dispatch_fd())


def _served(client: Client) -> None:
    """A dispatch-mode client is attached to the running loop."""
    if client.dispatch_mode:
        attach(client)


# ---------------------------------------------------------------------------
# The one await path
# ---------------------------------------------------------------------------

def _settle(future: "asyncio.Future[Tuple[Optional[str], Optional[errors.AppNorthError]]]",
            result: Optional[str], error: Optional[errors.AppNorthError]) -> None:
    if not future.done():
        future.set_result((result, error))


async def _run(start: "Callable[[_ops.Done], int]") -> "Tuple[Optional[str], Optional[errors.AppNorthError]]":
    """Start one operation and wait for its (result_json, error), on the
    loop's thread. A cancel of the awaiting task cancels the operation."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()
    future: "asyncio.Future[Tuple[Optional[str], Optional[errors.AppNorthError]]]" = loop.create_future()

    def done(op: int, result: Optional[str], error: Optional[errors.AppNorthError]) -> None:
        if threading.get_ident() == loop_thread:  # dispatch mode: inside client.dispatch()
            _settle(future, result, error)
            return
        try:
            loop.call_soon_threadsafe(_settle, future, result, error)
        except RuntimeError:  # the loop is closed: nobody awaits any more
            pass

    op = start(done)
    try:
        return await future
    except asyncio.CancelledError:
        _ops.cancel(op)
        raise


async def _json(start: "Callable[[_ops.Done], int]") -> Any:
    result, error = await _run(start)
    if error is not None:
        raise error
    return parse_json(result) if result is not None else None  # any depth (client.parse_json)


def _client_call(client: Client, func: Any, *args: Any) -> "Callable[[_ops.Done], int]":
    def start(done: "_ops.Done") -> int:
        _served(client)
        with client._use() as handle:
            return _ops.start(func, handle, *args, done=done)
    return start


def _s(value: "TextArg", name: str) -> Optional[bytes]:
    return _lib.to_c_string(value, name)


# ---------------------------------------------------------------------------
# Client reads and writes
# ---------------------------------------------------------------------------

async def list_boards(client: Client) -> Dict[str, Any]:
    """:meth:`Client.list_boards` without blocking the loop."""
    result: Dict[str, Any] = await _json(_client_call(client, C.appnorth_client_list_boards_async))
    return result


async def list_ideas(client: Client, board: Optional[str] = None, q: Optional[str] = None,
                     status: Optional[str] = None, cursor: Optional[str] = None,
                     limit: Optional[int] = None) -> Dict[str, Any]:
    """:meth:`Client.list_ideas` without blocking the loop."""
    query = _s(idea_query(board=board, q=q, status=status, cursor=cursor, limit=limit), "query")
    result: Dict[str, Any] = await _json(_client_call(client, C.appnorth_client_list_ideas_async, query))
    return result


async def list_comments(client: Client, idea_id: "TextArg") -> Dict[str, Any]:
    """:meth:`Client.list_comments` without blocking the loop."""
    result: Dict[str, Any] = await _json(
        _client_call(client, C.appnorth_client_list_comments_async, _s(idea_id, "idea_id")))
    return result


async def list_chat_messages(client: Client) -> Dict[str, Any]:
    """:meth:`Client.list_chat_messages` without blocking the loop."""
    result: Dict[str, Any] = await _json(_client_call(client, C.appnorth_client_list_chat_messages_async))
    return result


async def submit_idea(client: Client, board_id: "TextArg", title: "TextArg", body: "TextArg" = None, *,
                      idempotency_key: "TextArg" = None) -> Dict[str, Any]:
    """:meth:`Client.submit_idea` without blocking the loop."""
    result: Dict[str, Any] = await _json(_client_call(
        client, C.appnorth_client_submit_idea_async, _s(board_id, "board_id"), _s(title, "title"),
        _s(body, "body"), _s(idempotency_key, "idempotency_key")))
    return result


async def submit_comment(client: Client, idea_id: "TextArg", body: "TextArg", *,
                         idempotency_key: "TextArg" = None) -> Dict[str, Any]:
    """:meth:`Client.submit_comment` without blocking the loop."""
    result: Dict[str, Any] = await _json(_client_call(
        client, C.appnorth_client_submit_comment_async, _s(idea_id, "idea_id"), _s(body, "body"),
        _s(idempotency_key, "idempotency_key")))
    return result


async def submit_feedback(client: Client, feedback: Union[Feedback, str, bytes, None], *,
                          diagnostics: Any = None, screenshots: Any = (),
                          idempotency_key: "TextArg" = None) -> Dict[str, Any]:
    """:meth:`Client.submit_feedback` without blocking the loop (the
    feedback is copied when the operation starts)."""
    c_key = _s(idempotency_key, "idempotency_key")

    def start(done: "_ops.Done") -> int:
        _served(client)
        with feedback_for(feedback, diagnostics, screenshots) as built, built._use() as fb, \
                client._use() as handle:
            return _ops.start(C.appnorth_client_submit_feedback_async, handle, fb, c_key, done=done)

    result: Dict[str, Any] = await _json(start)
    return result


async def vote(client: Client, idea_id: "TextArg", *, idempotency_key: "TextArg" = None) -> Dict[str, Any]:
    """:meth:`Client.vote` without blocking the loop."""
    result: Dict[str, Any] = await _json(_client_call(
        client, C.appnorth_client_vote_async, _s(idea_id, "idea_id"), _s(idempotency_key, "idempotency_key")))
    return result


async def send_chat_message(client: Client, body: "TextArg", *, idempotency_key: "TextArg" = None) -> Dict[str, Any]:
    """:meth:`Client.send_chat_message` without blocking the loop."""
    result: Dict[str, Any] = await _json(_client_call(
        client, C.appnorth_client_send_chat_message_async, _s(body, "body"),
        _s(idempotency_key, "idempotency_key")))
    return result


# ---------------------------------------------------------------------------
# Offline queue, config, events
# ---------------------------------------------------------------------------

def _queue_call(queue: "OfflineQueue", client: Client, func: Any, *args: Any) -> "Callable[[_ops.Done], int]":
    def start(done: "_ops.Done") -> int:
        _served(client)
        with queue._use() as q, client._use() as c:
            return _ops.start(func, q, c, *args, done=done)
    return start


async def _submitted(start: "Callable[[_ops.Done], int]") -> bool:
    result = await _json(start)
    return bool(result["submitted"])


async def queue_submit_idea(queue: "OfflineQueue", client: Client, board_id: "TextArg", title: "TextArg",
                            body: "TextArg" = None, *, idempotency_key: "TextArg" = None) -> bool:
    """:meth:`OfflineQueue.submit_idea` without blocking the loop: True when
    sent now, False when kept (a network failure, or this task cancelled)."""
    return await _submitted(_queue_call(queue, client, C.appnorth_queue_submit_idea_async,
                                        _s(board_id, "board_id"), _s(title, "title"), _s(body, "body"),
                                        _s(idempotency_key, "idempotency_key")))


async def queue_submit_comment(queue: "OfflineQueue", client: Client, idea_id: "TextArg", body: "TextArg", *,
                               idempotency_key: "TextArg" = None) -> bool:
    """:meth:`OfflineQueue.submit_comment` without blocking the loop."""
    return await _submitted(_queue_call(queue, client, C.appnorth_queue_submit_comment_async,
                                        _s(idea_id, "idea_id"), _s(body, "body"),
                                        _s(idempotency_key, "idempotency_key")))


async def queue_submit_feedback(queue: "OfflineQueue", client: Client, feedback: Union[Feedback, str, bytes, None],
                                *, diagnostics: Any = None, screenshots: Any = (),
                                idempotency_key: "TextArg" = None) -> bool:
    """:meth:`OfflineQueue.submit_feedback` without blocking the loop."""
    c_key = _s(idempotency_key, "idempotency_key")

    def start(done: "_ops.Done") -> int:
        _served(client)
        with feedback_for(feedback, diagnostics, screenshots) as built, built._use() as fb, \
                queue._use() as q, client._use() as c:
            return _ops.start(C.appnorth_queue_submit_feedback_async, q, c, fb, c_key, done=done)

    return await _submitted(start)


async def queue_flush(queue: "OfflineQueue", client: Client) -> int:
    """:meth:`OfflineQueue.flush` without blocking the loop: how many were
    sent; a raised error carries ``entry_id`` and ``sent`` as there."""
    result, error = await _run(_queue_call(queue, client, C.appnorth_queue_flush_async))
    outcome: Dict[str, Any] = json.loads(result) if result else {"sent": 0, "failed_entry_id": None}
    sent = int(outcome["sent"])
    if error is not None:
        error.entry_id = outcome["failed_entry_id"]
        error.sent = sent
        raise error
    return sent


async def refresh_config(config: "Config") -> None:
    """:meth:`Config.refresh` without blocking the loop (listeners run as
    for a refresh on a library thread: see :func:`add_config_listener`)."""
    def start(done: "_ops.Done") -> int:
        _served(config._client)
        with config._use() as handle:
            return _ops.start(C.appnorth_config_refresh_async, handle, done=done)

    await _json(start)


async def flush_events(events: "Events", timeout_ms: int = 10000) -> int:
    """:meth:`Events.flush` without blocking the loop: how many events the
    server accepted; a raised error carries ``sent``."""
    c_timeout = _lib.to_int32(timeout_ms, "timeout_ms")

    def start(done: "_ops.Done") -> int:
        _served(events._client)
        with events._use() as handle:
            return _ops.start(C.appnorth_events_flush_async, handle, c_timeout, done=done)

    result, error = await _run(start)
    sent = int(json.loads(result)["sent"]) if result else 0
    if error is not None:
        error.sent = sent
        raise error
    return sent


# ---------------------------------------------------------------------------
# Callbacks on the loop's thread
# ---------------------------------------------------------------------------

def on_loop(function: Callable[..., Any], loop: Optional[asyncio.AbstractEventLoop] = None) -> Callable[..., None]:
    """``function`` wrapped so that a call from any thread runs it on
    ``loop``'s thread (default: the running loop), soon; a call made on that
    thread runs it there at once. Calls after the loop closed are dropped."""
    target = loop or asyncio.get_running_loop()

    def call(*args: Any) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is target:
            function(*args)
            return
        try:
            target.call_soon_threadsafe(function, *args)
        except RuntimeError:  # the loop is closed
            pass

    return call


def add_config_listener(config: "Config", listener: Callable[[Dict[str, Any], List[str], int], Any],
                        loop: Optional[asyncio.AbstractEventLoop] = None) -> int:
    """:meth:`Config.add_listener` with ``listener`` called on ``loop``'s
    thread (default: the running loop). Returns the token for
    :meth:`Config.remove_listener`; calls already handed to the loop when it
    is removed still run."""
    return config.add_listener(on_loop(listener, loop))


class ConfigChange(tuple):  # type: ignore[type-arg]  # a NamedTuple without importing typing at runtime
    """One config change: ``(config, changed_keys, tier)``."""

    __slots__ = ()

    def __new__(cls, config: Dict[str, Any], changed_keys: List[str], tier: int) -> "ConfigChange":
        return tuple.__new__(cls, (config, changed_keys, tier))

    config = property(lambda self: self[0])
    changed_keys = property(lambda self: self[1])
    tier = property(lambda self: self[2])


class ConfigChanges:
    """The config's changes as an async iterator, on the loop's thread::

        async with aio.ConfigChanges(config) as changes:
            async for change in changes:
                print(change.changed_keys, change.config)

    Registered at construction (call it inside the loop); ``close()`` (or
    leaving the ``async with``) removes the listener and ends the iteration.
    Changes are kept in order, none dropped, until read.
    """

    def __init__(self, config: "Config", loop: Optional[asyncio.AbstractEventLoop] = None) -> None:
        self._config = config
        self._loop = loop or asyncio.get_running_loop()
        self._queue: "asyncio.Queue[Optional[ConfigChange]]" = asyncio.Queue()
        self._token: Optional[int] = add_config_listener(config, self._changed, self._loop)

    def _changed(self, config: Dict[str, Any], changed_keys: List[str], tier: int) -> None:
        if self._token is not None:
            self._queue.put_nowait(ConfigChange(config, changed_keys, tier))

    def close(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            self._config.remove_listener(token)
            self._queue.put_nowait(None)

    def __aiter__(self) -> "ConfigChanges":
        return self

    async def __anext__(self) -> ConfigChange:
        change = await self._queue.get()
        if change is None:
            raise StopAsyncIteration
        return change

    async def __aenter__(self) -> "ConfigChanges":
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        self.close()


class _LoopHandler(logging.Handler):
    """Hands each record to ``target`` on the loop's thread."""

    def __init__(self, target: logging.Logger, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._target = target
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if threading.get_ident() == self._loop_thread:
            self._target.handle(record)
            return
        try:
            self._loop.call_soon_threadsafe(self._target.handle, record)
        except RuntimeError:  # the loop is closed: the line is dropped
            pass


def loop_logger(target: Union[str, logging.Logger] = "appnorth",
                loop: Optional[asyncio.AbstractEventLoop] = None) -> logging.Logger:
    """A logger to give a :class:`Client` (``Client(..., logger=aio.loop_logger())``)
    whose lines reach ``target``'s handlers on ``loop``'s thread (default: the
    running loop; call it on the loop's thread). It takes ``target``'s
    effective level, so the library formats no line that would be dropped."""
    target_logger = logging.getLogger(target) if isinstance(target, str) else target
    resolved = loop or asyncio.get_running_loop()
    proxy = logging.Logger(f"{target_logger.name}.loop")
    proxy.setLevel(target_logger.getEffectiveLevel())
    proxy.propagate = False
    proxy.addHandler(_LoopHandler(target_logger, resolved))
    return proxy
