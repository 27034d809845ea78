"""A framework's base class joined to our behaviour only when the class is first used.

A callback must subclass its framework's ``Callback`` (frameworks check with
``isinstance``), but importing the framework at module import would pull a training
stack into every ``pacekeeper.detector`` user. So each integration module keeps its
behaviour in a plain mixin and builds the public class in its module ``__getattr__``.
"""

from __future__ import annotations

from collections.abc import Callable

_built: dict[tuple[str, str], type] = {}


def mixed_in(
    module: str, name: str, mixin: type, base: Callable[[], type], doc: str | None
) -> type:
    """``class name(mixin, base())`` in ``module``, built once."""
    cls = _built.get((module, name))
    if cls is None:
        cls = type(name, (mixin, base()), {"__module__": module, "__doc__": doc})
        _built[(module, name)] = cls
    return cls
