"""Running one piece of test code on the compiled record path and on the numpy path,
and what of a window the two must agree on."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from pacekeeper.cupti_ext import native

T = TypeVar("T")

WINDOW_NAMES = {1: "_Z4gemmv", 2: "_Z4reluv", 3: "_Z3addv", 4: "ncclDevKernel_AllReduce_f32"}
"""Kernel names by the name pointers the tests' records carry."""


@pytest.fixture(autouse=True)
def fresh_native() -> Iterator[None]:
    """Import into a test module to load the library afresh around each test."""
    native.reset()
    yield
    native.reset()


def both(run: Callable[[], T]) -> tuple[T, T]:
    """``run()`` on the compiled path, then on the numpy path."""
    saved = os.environ.pop(native.NATIVE_ENV, None)
    try:
        native.reset()
        assert native.library() is not None, "the compiled record path is not built"
        compiled = run()
        os.environ[native.NATIVE_ENV] = "0"
        native.reset()
        assert native.library() is None
        return compiled, run()
    finally:
        os.environ.pop(native.NATIVE_ENV, None)
        if saved is not None:
            os.environ[native.NATIVE_ENV] = saved
        native.reset()


def window_figures(window: Any) -> dict[str, Any]:
    """A KernelWindow's statistics and counts, comparable with ``==``."""

    def table(part: dict[str, Any]) -> dict[str, Any]:
        return {k: (s.num, s.median_ns, s.min_ns, s.max_ns, s.total_ns) for k, s in part.items()}

    return {
        "kernels": table(window.kernels),
        "sections": {name: table(part) for name, part in window.sections.items()},
        "counts": (
            window.records,
            window.comm_records,
            window.comm_ns,
            window.unattributed_records,
            window.held_records,
            window.dropped_records,
            window.lost_markers,
        ),
    }
