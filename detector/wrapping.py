"""``wrap_callables``: time existing functions and methods as sections, and undo it.

Naming follows NVRx's ``CallableId.__str__`` so section names match across the two:
a module gives ``module.__name__``, a class ``module.Class``, an instance ``Class``;
then ``.name``. Beyond NVRx, wrapping reads the attribute as stored (``__dict__``), so
``classmethod``/``staticmethod`` keep their binding, and restoring removes what we put
on an instance or subclass instead of leaving a copy of the original behind.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_MISSING = object()


@dataclass(frozen=True)
class CallableId:
    """A callable to time: ``getattr(obj, name)``; ``obj`` is a module, class or instance.

    ``arg_filter_fn``, ``extra_args_fn`` and ``ignored_args`` are NVRx's fields with
    NVRx's meaning: accepted, kept, part of equality and hashing, and not used for timing
    (NVRx declares them and never reads them; every call is timed under ``str(id)``).
    """

    obj: object
    name: str
    arg_filter_fn: Callable[[inspect.BoundArguments], bool] | None = None
    extra_args_fn: Callable[[inspect.BoundArguments], dict[str, Any]] | None = None
    ignored_args: tuple[str, ...] | None = None

    def __str__(self) -> str:
        obj = self.obj
        if inspect.ismodule(obj):
            owner = obj.__name__
        elif inspect.isclass(obj):
            owner = f"{obj.__module__}.{obj.__name__}"
        else:
            owner = getattr(type(obj), "__name__", str(obj))
        return f"{owner}.{self.name}"


@dataclass(frozen=True, slots=True)
class _Patched:
    callable_id: CallableId
    previous: object
    """What ``obj.__dict__[name]`` held before, or ``_MISSING`` (the value was inherited)."""


def _own_attr(obj: object, name: str) -> object:
    try:
        return vars(obj).get(name, _MISSING)
    except TypeError:  # no __dict__ (slots): fall back to plain getattr semantics
        return _MISSING


def build_wrapper(fn: Callable[..., Any], enter: Any) -> Callable[..., Any]:
    """``fn`` run inside the context manager ``enter`` (a cached section handle)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with enter:
            return fn(*args, **kwargs)

    wrapper.__pacekeeper_wrapped__ = True  # type: ignore[attr-defined]
    return wrapper


def check(callable_id: CallableId) -> None:
    """Raise a clear error for an id that cannot be wrapped (before anything changes)."""
    obj, name = callable_id.obj, callable_id.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"CallableId.name must be a non-empty str, got {name!r}")
    if not hasattr(obj, name):
        raise AttributeError(f"{callable_id}: {obj!r} has no attribute {name!r}")
    if not callable(getattr(obj, name)):
        raise TypeError(f"{callable_id}: {name!r} is not callable")


def wrap(callable_id: CallableId, handle: Any) -> _Patched:
    """Replace ``callable_id`` with a timed wrapper; returns what ``restore`` needs."""
    check(callable_id)
    obj, name = callable_id.obj, callable_id.name
    own = _own_attr(obj, name)
    raw = own if own is not _MISSING else inspect.getattr_static(obj, name)
    replacement: object
    if isinstance(raw, classmethod):
        replacement = classmethod(build_wrapper(raw.__func__, handle))
    elif isinstance(raw, staticmethod):
        replacement = staticmethod(build_wrapper(raw.__func__, handle))
    elif inspect.isclass(obj) or inspect.ismodule(obj):
        target = raw if callable(raw) else getattr(obj, name)
        if not callable(target):
            raise TypeError(f"{callable_id}: {name!r} is not callable")
        replacement = build_wrapper(target, handle)
    else:
        # Instance: wrap the bound method and shadow it on the instance only.
        bound = getattr(obj, name)
        if not callable(bound):
            raise TypeError(f"{callable_id}: {name!r} is not callable")
        replacement = build_wrapper(bound, handle)
    setattr(obj, name, replacement)
    return _Patched(callable_id, own)


def restore(patched: _Patched) -> None:
    obj, name = patched.callable_id.obj, patched.callable_id.name
    if patched.previous is _MISSING:
        # We added the attribute; removing it uncovers the inherited/class one again.
        if name in getattr(obj, "__dict__", {}):
            delattr(obj, name)
    else:
        setattr(obj, name, patched.previous)
