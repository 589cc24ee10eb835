"""Binding objects inherited through ``fork()``.

The C rule stays: a native handle does not survive ``fork()``. A binding
object made before the fork (a module-level :class:`~appnorth.Client` and
:class:`~appnorth.Events` under gunicorn ``--preload``, for instance) makes
a fresh native handle, with the arguments it was made with, on its first use
in the child. The parent's handle is left to the parent: the child drops
its reference without calling ``_free``.

How a child knows: :func:`appnorth._lib._after_fork_in_child`, an
``os.register_at_fork(after_in_child=...)`` hook, calls
:meth:`Handle._forget_after_fork` on every live object. The hook runs in the
child before ``os.fork()`` returns there, while the forking thread is the
child's only thread, so no call in the child can see the parent's pointer:
it is gone before any other code runs. A pid check on each use could race
instead (two threads of a child both seeing the old pid and both making a
handle, or a pid reused after the parent died matching again) and would add
a system call to every ``track()``. The pid check in ``Handle._use`` stays
only as the refusal for a fork that bypassed Python's hooks.

The reopen runs under the object's own lock; objects it was made with
(the client of an Events, the storage of a queue) reopen first, through
their own first use. One of those closed before the fork is remade for
the moment of the reopen and closed again, as the parent's was.

What is registered on the handle after creation comes along (config
listeners, with their tokens, and live updates; a storage's logger; an
Events' network type): each class's ``_carry_over``.

Objects that cannot reopen raise :class:`~appnorth.errors.WrongStateError`
naming why, on first use in the child (``_cannot_reopen``):
``Storage.callbacks()`` and ``Events(secure_store=...)`` (their state is in
host functions or a mapping that the child would share with the parent, or
hold a copy of), :class:`~appnorth.ManualClock` (its time moved in the
parent) and :class:`~appnorth.Feedback` (its content went into the handle);
and so does anything made with one of them (a ReadCache on a
``ManualClock``).
"""

from __future__ import annotations

from . import errors

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (see appnorth._lib)
    from typing import Any, Callable, List, TypeVar

    from ._handle import Handle

    _F = TypeVar("_F", bound=Callable[..., None])


def reopenable(init: _F) -> _F:
    """Decorate a Handle subclass's ``__init__``: once it succeeded, the
    object keeps how it was made, to make it again in a forked child
    (unless ``__init__`` set ``_cannot_reopen``)."""

    def wrapper(self: Handle, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if self._cannot_reopen is None:
            self._recipe = (init, args, kwargs)

    wrapper.__name__ = init.__name__
    wrapper.__qualname__ = init.__qualname__
    wrapper.__doc__ = init.__doc__
    wrapper.__wrapped__ = init  # type: ignore[attr-defined]  # inspect.signature follows it
    return wrapper  # type: ignore[return-value]


def _cannot(obj: Handle) -> errors.WrongStateError:
    return errors.WrongStateError(
        f"{obj._kind} was created before fork() and cannot reopen in this process: "
        f"{obj._cannot_reopen or 'it was not made with arguments it can be made with again'}; "
        f"make a new one here")


def reopen(obj: Handle) -> None:
    """Give ``obj``, inherited through fork() and not yet used here, a new
    native handle (see the module's docstring). Raises the creation's error,
    and then the next use tries again; WrongStateError when it cannot."""
    lock = obj._reopen_lock
    if lock is None:  # pragma: no cover - set by _forget_after_fork
        raise _cannot(obj)
    with lock:
        if not obj._stale:
            return  # another thread of the child reopened it
        recipe = obj._recipe
        if recipe is None:
            raise _cannot(obj)
        carry_over = obj._carry_over()
        remade: List[Handle] = []
        init, args, kwargs = recipe
        try:
            init(obj, *[_usable(a, remade) for a in args],
                 **{k: _usable(v, remade) for k, v in kwargs.items()})
        finally:
            for dep in remade:
                dep.close()
        obj._stale = False
        if carry_over is not None:
            carry_over()


def _usable(arg: Any, remade: List[Handle]) -> Any:
    """An argument of the recipe, ready for the reopen: a binding object
    closed before (or after) the fork is made again for the moment, and
    added to ``remade`` to be closed after. Others are passed as they are
    (one inherited reopens on its first use inside ``__init__``)."""
    from ._handle import Handle

    if not isinstance(arg, Handle) or not arg._closed:
        return arg
    recipe = arg._recipe
    if recipe is None:
        raise _cannot(arg)
    init, args, kwargs = recipe
    fresh = type(arg).__new__(type(arg))
    init(fresh, *[_usable(a, remade) for a in args], **{k: _usable(v, remade) for k, v in kwargs.items()})
    remade.append(fresh)
    return fresh
