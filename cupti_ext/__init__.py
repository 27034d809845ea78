"""Kernel timing backends for the detector: CUPTI (cupti-python), CUDA events, none."""

from .backend import BackendChoice, KernelStat, KernelTimingBackend, KernelWindow
from .cupti_backend import CuptiBackend, CuptiConflict, CuptiUnavailable
from .events_backend import EventsBackend
from .none_backend import NoneBackend
from .selection import select_backend

__all__ = [
    "BackendChoice",
    "CuptiBackend",
    "CuptiConflict",
    "CuptiUnavailable",
    "EventsBackend",
    "KernelStat",
    "KernelTimingBackend",
    "KernelWindow",
    "NoneBackend",
    "select_backend",
]
