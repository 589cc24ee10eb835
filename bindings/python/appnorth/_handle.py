"""The lifetime of one library handle, shared by every wrapper class.

A :class:`Handle` owns one C pointer. It guarantees, on the Python side,
what the header asks of the host:

- calls in progress finish before the handle is freed (:meth:`close` waits
  for them), and no call starts after (``WrongStateError``). Each call
  appends to the handle's ``_calls`` list before it reads the pointer and
  pops after the C function returned (both atomic under the GIL, and
  nothing else per call: no lock, no context manager); :meth:`close`
  clears the pointer first, then waits for the list to empty, then calls
  the C ``_free``. The library counts the calls in flight too (its _free
  waits for them and refuses new ones), but a thread that has read the
  pointer and not yet entered C is only visible here;
- a handle is never freed from inside one of its own calls or callbacks
  (that would deadlock or free memory the library is using);
- native handles do not survive ``fork()``: in a child process an object
  made before the fork forgets the parent's pointer (never freeing it, nor
  waiting for the parent's calls in progress) and makes a new handle with
  the same arguments on its first use there (:mod:`appnorth._fork`);
- live handles are tracked weakly and closed at interpreter exit
  (:func:`appnorth._lib.close_all_live`), so no library thread calls into a
  finalising interpreter; one garbage-collected inside a library callback
  (where it cannot be freed) is kept alive until then;
- CFUNCTYPE objects handed to the library (``_keep``) stay referenced
  until the handle is freed;
- a network call made on the main thread stays interruptible
  (:func:`run_interruptible`): Ctrl-C cancels it through
  ``appnorth_client_cancel`` and raises KeyboardInterrupt at once, after
  the call has returned (so no pointer is freed under it);
- Ctrl-C cannot cut :meth:`Handle.close` halfway (a pointer forgotten but
  not freed would leak the handle and keep its library threads running
  into interpreter exit): on the main thread its steps run on a worker
  (except when garbage collection closes the handle: see ``_collected``),
  the pointer is forgotten only once freed, and the exception is raised
  after.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from contextlib import contextmanager

from . import _lib, errors

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

    #: ``with X(...) as x`` gives ``x`` the type X (typing.Self needs 3.11).
    _H = TypeVar("_H", bound="Handle")
    _T = TypeVar("_T")

#: How often the main thread wakes to take a pending signal while a network
#: call runs on a worker: Ctrl-C is seen within this time.
INTERRUPT_POLL_S = 0.02

#: The name of the worker threads of run_interruptible.
WORKER_NAME = "appnorth-call"

#: close() polls for calls in progress on other threads, sleeping from the
#: first to the second (calls are usually microseconds, network calls up to
#: their timeout).
CLOSE_POLL_S = (0.0001, 0.005)


def run_interruptible(call: Callable[[], _T], cancel: Callable[[], None]) -> _T:
    """Run a blocking library call so that KeyboardInterrupt (or any
    exception a signal handler raises) reaches the main thread at once.

    Python runs signal handlers only on the main thread, between bytecodes,
    so a thread blocked inside C does not see Ctrl-C until the call returns.
    On the main thread the call runs on a worker while the caller waits in
    short slices; when a signal handler raises, ``cancel()`` ends the call
    (it returns CANCELLED within milliseconds), the worker is waited for and
    the exception is re-raised. Other threads call directly (no signals
    reach them, and no thread is spent). ``call`` runs every callback of its
    own on the worker: it must enter ``_lib.callback_errors()`` itself.
    """
    if threading.current_thread() is not threading.main_thread():
        return call()
    outcome: List[Any] = []

    def work() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))

    worker = threading.Thread(target=work, name=WORKER_NAME, daemon=True)
    try:
        worker.start()
    except RuntimeError:
        # No new threads at interpreter shutdown (the exit hook closing
        # handles): call directly.
        return call()
    try:
        while worker.is_alive():
            worker.join(INTERRUPT_POLL_S)
    except BaseException:
        cancel()
        # The call uses pointers the caller's handles keep alive: wait for
        # it before unwinding. A second Ctrl-C only cancels again.
        while worker.is_alive():
            try:
                worker.join(INTERRUPT_POLL_S)
            except BaseException:  # noqa: BLE001
                cancel()
        raise
    ok, value = outcome[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _no_cancel() -> None:
    """close() waits for calls in progress rather than cancel them."""


def report_callback_error(where: str) -> None:
    """Report the exception being handled inside a callback. Exceptions
    must never unwind into C, and a failing logger cannot be trusted with
    the report, so it goes to stderr."""
    exc = sys.exc_info()[1]
    try:
        sys.stderr.write(f"appnorth: exception in {where} ignored:\n")
        try:
            import traceback
        except BaseException:  # noqa: BLE001 - no imports at shutdown: the exception alone
            sys.stderr.write(f"{exc!r}\n")
            return
        traceback.print_exc(file=sys.stderr)
    except BaseException:  # noqa: BLE001 - stderr itself may be gone
        pass


class Handle:
    """Base class: one library handle with close(), ``with`` and exit cleanup."""

    #: Used in messages: "client is closed".
    _kind = "handle"
    # Class-level defaults keep __del__ and close() safe when __init__ failed.
    _ptr: Optional[Any] = None
    #: The same pointer as an int, for the thin calls (``_lib.thin``).
    _addr: Optional[int] = None
    _closed: bool = True
    #: Inherited through fork() and not used in this process yet: the next
    #: use makes a new handle (appnorth._fork). Set only by the fork hook.
    _stale = False
    #: How the object was made, ``(__init__, args, kwargs)``, to make it
    #: again in a forked child (appnorth._fork.reopenable); None: it cannot.
    _recipe: Optional[Tuple[Callable[..., None], Tuple[Any, ...], Dict[str, Any]]] = None
    #: Why it cannot be made again in a forked child (the error says it).
    _cannot_reopen: Optional[str] = None
    _reopen_lock: Optional[Any] = None

    def _init_state(self) -> None:
        """Call first in __init__, before any callback is created."""
        #: One entry per call in progress (see the module's docstring).
        self._calls: List[None] = []
        self._close_lock = threading.Lock()
        self._local = threading.local()
        self._pid = os.getpid()
        self._keep: List[Any] = []

    def _attach(self, ptr: Any, keep: Optional[List[Any]] = None) -> None:
        """Call last in __init__, once the handle exists."""
        self._keep = list(keep or [])
        self._ptr = ptr
        self._addr = ctypes.cast(ptr, ctypes.c_void_p).value
        self._closed = False
        _lib.register_live(self)

    def _free(self, ptr: Any) -> None:
        """Release the C handle (appnorth_X_free)."""
        raise NotImplementedError

    def _on_close(self) -> None:
        """Called once when close() starts (the handle already refuses new
        calls; calls in progress have not finished yet). Subclasses use it
        to stop delivering callbacks into Python."""

    # -- lifetime ----------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or creation failed)."""
        return self._closed

    def close(self) -> None:
        """Free the handle. Idempotent.

        Waits for calls in progress on other threads to return. Raises
        WrongStateError when called from inside one of this object's own
        calls or callbacks. Ctrl-C (or any exception a signal handler
        raises) does not stop it halfway: the handle is freed, exactly
        once, and the exception is raised after.
        """
        local = getattr(self, "_local", None)
        depth: int = getattr(local, "depth", 0) if local is not None else 0
        in_callback: int = getattr(local, "in_callback", 0) if local is not None else 0
        if depth or in_callback or _lib.inside_callback():
            raise errors.WrongStateError(
                f"cannot close a {self._kind} from inside its own call or a library callback")
        if getattr(self, "_close_lock", None) is None:
            return
        if self._stale:
            self._close_stale()
            return
        if getattr(self, "_pid", None) != os.getpid():
            # Inherited through fork(): the parent's threads, which may have
            # been inside a call, do not exist here. Forget the pointer
            # without waiting; the library leaves such a handle alone too.
            self._closed = True
            self._addr = None
            self._ptr = None
            self._keep = []
            _lib.unregister_live(self)
            return
        if self._ptr is None:  # freed already (the pointer goes only then)
            return
        if threading.current_thread() is threading.main_thread() and not self._collected:
            # Signal handlers run on the main thread only, between any two
            # bytecodes: there a Ctrl-C could land between clearing the
            # pointer and freeing it, leaking a handle whose library threads
            # outlive the interpreter. On a worker the steps cannot be cut;
            # the main thread waits for it and raises the exception after.
            run_interruptible(self._close_now, _no_cancel)
        else:
            self._close_now()

    def _close_stale(self) -> None:
        """close() of an object inherited through fork() and never used
        here: there is no handle of this process to free."""
        with self._reopen_lock or threading.Lock():
            if self._stale:
                self._stale = False
                self._closed = True

    def _forget_after_fork(self) -> None:
        """Run in a forked child by the fork hook (appnorth._lib), on the
        child's only thread: forget the parent's pointer and everything tied
        to the parent's threads, without freeing; an open object reopens
        on its next use (appnorth._fork)."""
        self._ptr = None
        self._addr = None
        self._keep = []
        self._calls = []
        self._close_lock = threading.Lock()
        self._reopen_lock = threading.Lock()
        self._local = threading.local()
        self._pid = os.getpid()
        self._stale = not self._closed

    def _reopen_after_fork(self) -> None:
        from . import _fork

        _fork.reopen(self)

    def _carry_over(self) -> Optional[Callable[[], None]]:
        """Before a reopen in a forked child: what was registered on the
        parent's handle after creation, as a function that registers it on
        the new one (None: nothing)."""
        return None

    def _close_now(self) -> None:
        """close()'s steps, under the close lock: refuse new calls, wait for
        those in progress, free the pointer, then forget it. Safe to run
        again (from a retried close()): the pointer is forgotten only after
        it was freed, and a second run finds it gone."""
        interrupted: Optional[BaseException] = None
        with self._close_lock:
            ptr = self._ptr
            if ptr is None:
                return
            if not self._closed:
                # From here a call raises WrongStateError (_use reads
                # _closed, the thin calls _addr); one that started earlier
                # is in _calls already.
                self._closed = True
                self._addr = None
                self._on_close()
            interrupted = self._wait_for_calls()
            self._free(ptr)
            self._ptr = None
        # Only now: the library holds no pointer to these any more.
        self._keep = []
        _lib.unregister_live(self)
        if interrupted is not None:
            raise interrupted

    def _wait_for_calls(self) -> Optional[BaseException]:
        """Wait until no call is in progress on the handle. A signal
        handler's exception (Ctrl-C) is returned, to be raised once the
        handle is freed: left half-closed, it would never be freed, and its
        library threads would outlive the interpreter."""
        interrupted: Optional[BaseException] = None
        delay, longest = CLOSE_POLL_S
        while self._calls:
            try:
                time.sleep(delay)
            except BaseException as exc:  # noqa: BLE001 - raised by close()
                interrupted = interrupted or exc
            delay = min(delay * 2, longest)
        return interrupted

    def _thin(self, func: Any, *args: Any) -> "_lib.CallScratch":
        """Call a hot C function (from :func:`_lib.thin`) with almost nothing
        around it: ``func(handle, *args, out, err)``, where ``out`` and
        ``err`` are in a scratch taken from ``_lib.SCRATCH``. Returns the
        scratch: read the result from it, then append it back to
        ``_lib.SCRATCH`` (one lost to an exception is only garbage). Raises
        the call's error, or WrongStateError when the handle is closed. No
        callback_errors(): only callbacks that report their own exceptions
        (the log callback) run inside these calls."""
        try:
            out = _lib.SCRATCH.pop()
        except IndexError:
            out = _lib.CallScratch()
        if self._addr is None and self._stale:
            self._reopen_after_fork()
        calls = self._calls
        calls.append(None)
        try:
            addr = self._addr
            if addr is None:
                raise self._closed_error()
            status = func(addr, *args, out.value_addr, out.err_addr)
        finally:
            calls.pop()
        if status:
            error = _lib.status_error(status, out.err)
            _lib.SCRATCH.append(out)
            raise error
        return out

    def _closed_error(self) -> errors.AppNorthError:
        """What a call on a closed (or never opened) handle raises."""
        return errors.WrongStateError(f"{self._kind} is closed")

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    #: Set by __del__: garbage collection may run while this thread holds a
    #: lock that a worker thread would need (threading's own, a logging
    #: handler's, taken again by a log line of the free), so close() there
    #: frees on this thread.
    _collected = False

    def __del__(self) -> None:
        try:
            self._collected = True
            self.close()
        except errors.WrongStateError:
            # Collected inside a library callback, where the handle must not
            # be freed: keep it (and its CFUNCTYPE objects, which a library
            # thread may still call) alive until the exit hook closes it.
            try:
                _lib.keep_orphan(self)
            except BaseException:  # noqa: BLE001
                pass
        except BaseException:  # noqa: BLE001 - nothing to report to at GC time
            pass

    def _sync_log_level(self) -> None:
        """Before each call: hand the Python logger's current level to the
        library (handles that log through a client's logger override it)."""

    @contextmanager
    def _use(self, sync: bool = True) -> Iterator[Any]:
        """The live pointer for the duration of one call."""
        if self._ptr is None and self._stale:
            self._reopen_after_fork()
        if self._pid != os.getpid() and not self._closed:
            # Forked without Python's fork hooks (appnorth._fork).
            raise errors.WrongStateError(
                f"{self._kind} was created in another process; handles do not survive fork()")
        if sync:
            self._sync_log_level()
        calls = self._calls
        calls.append(None)
        try:
            ptr = self._ptr
            if ptr is None or self._closed:
                raise self._closed_error()
            depth = getattr(self._local, "depth", 0)
            self._local.depth = depth + 1
            try:
                yield ptr
            finally:
                self._local.depth = depth
        finally:
            calls.pop()
