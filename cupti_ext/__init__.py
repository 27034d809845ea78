"""Kernel timing backends for the detector: CUPTI (cupti-python), CUDA events, none."""

from .backend import BackendChoice, KernelStat, KernelTimingBackend, KernelWindow
from .none_backend import NoneBackend
from .selection import select_backend

__all__ = [
    "BackendChoice",
    "KernelStat",
    "KernelTimingBackend",
    "KernelWindow",
    "NoneBackend",
    "select_backend",
]
