"""Starting and cancelling the library's non-blocking operations.

Every ``appnorth_*_async`` function takes the same tail (``on_done``,
``user_data``, ``out_op``, ``err``). :func:`start` calls one with a single
module-level completion thunk (never freed, so no CFUNCTYPE object can be
collected while the library may call it) and a key into :data:`_pending`,
the table of Python callbacks waiting for their completion. The library
calls the thunk exactly once per operation that started, on a library
thread (the transfer thread or a worker; see the header's "Non-blocking
operations"), possibly before :func:`start` returns.

Nothing here is public API: :mod:`appnorth.aio` builds the asyncio face on it.
"""

from __future__ import annotations

import ctypes
import itertools
import threading

from . import _lib, errors
from ._lib import C, appnorth_error

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Any, Callable, Dict, Optional

    #: ``done(op_id, result_json_or_None, error_or_None)``
    Done = Callable[[int, Optional[str], Optional[errors.AppNorthError]], None]

_pending: "Dict[int, Done]" = {}
_keys = itertools.count(1)
_lock = threading.Lock()


def _on_complete(op: int, status: int, err_address: Optional[int], result: Optional[bytes],
                 user_data: Optional[int]) -> None:
    with _lock:
        done = _pending.pop(user_data or 0, None)
    if done is None:  # pragma: no cover - the library calls once per started op
        return
    try:
        error = None
        if status != errors.OK:
            err = appnorth_error.from_address(err_address) if err_address else None
            error = _lib.status_error(status, err)
        with _lib.in_callback():
            done(op, result.decode("utf-8") if result is not None else None, error)
    except BaseException:  # noqa: BLE001 - never unwinds into C
        from ._handle import report_callback_error

        report_callback_error("an operation's completion")


#: The one appnorth_completion_fn every start hands the library.
COMPLETION = _lib.COMPLETION_FN(_on_complete)


def start(func: Any, *args: Any, done: "Done") -> int:
    """Start ``func(*args, on_done, user_data, out_op, err)``; returns the
    operation's id. ``done`` is called exactly once, on a library thread,
    unless this raises (bad input, a handle being freed: nothing started)."""
    key = next(_keys)
    with _lock:
        _pending[key] = done
    op = ctypes.c_uint64(0)
    try:
        func(*args, COMPLETION, key, op, appnorth_error())
    except BaseException:
        with _lock:
            _pending.pop(key, None)
        raise
    return op.value


def cancel(op: int) -> bool:
    """Cancel one operation in flight; False when none with that id is
    (it finished already). Never blocks; its completion follows."""
    try:
        C.appnorth_op_cancel(op, appnorth_error())
    except errors.NotFoundError:
        return False
    return True


def pending() -> int:
    """Operations started and not completed yet (for tests)."""
    with _lock:
        return len(_pending)
