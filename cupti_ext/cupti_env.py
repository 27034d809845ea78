"""What the process's environment says about CUPTI: the CUPTI backend's settings, read
from env variables and checked, and whether CUPTI can be had here at all (cupti-python
loads, no other CUPTI tool is injected, a torch profiler to yield to).

Apart from the backend so that ``selection.py`` can fail ``initialize`` on a bad setting
(naming the variable, on a machine without a GPU too) without building a backend, and
so that every CUPTI-side module raises the same ``CuptiUnavailable``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable
from typing import Any

from .records import RecordLayout, RecordLayoutUnavailable

SAMPLE_EVERY_ENV = "PACEKEEPER_KERNEL_SAMPLE_EVERY"
"""``auto`` (the default: chosen per window, sampling.py) or a fixed N: trace kernels in
one of N outermost section entries."""

INJECTION_ENV = ("CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID", "NV_NSIGHT_INJECTION")
MARKER_ENV = "PACEKEEPER_KERNEL_MARKER"
BUFFER_ENV = "PACEKEEPER_CUPTI_BUFFER_KIB"
REPORT_FLUSH_ENV = "PACEKEEPER_REPORT_FLUSH"
"""``plain`` (the default) or ``forced``: how a report's fence asks CUPTI for its buffers
(``CuptiSession.fence``)."""
ATTRIBUTION_ENV = "PACEKEEPER_KERNEL_ATTRIBUTION"
"""``markers`` (the default) or ``gated``: how kernels are told inside a section entry
(CuptiBackend): section markers in CUPTI's records, or kernel records switched on for
traced entries alone, as NVRx does (no markers; nothing outside is recorded)."""
ATTRIBUTIONS = ("markers", "gated")
_BUFFER_KIB_RANGE = (64, 1 << 16)
MARKER_MODES = ("memset", "api", "driver")
"""How section markers reach CUPTI's records (see CuptiSession.choose_marker)."""
AUTO_MARKERS = ("memset", "api", "driver")
"""The order tried by default: ``memset`` needs a current CUDA context (a detector
started after the model has one); ``api`` works where none exists yet (see
CuptiSession.choose_marker)."""


class CuptiUnavailable(RuntimeError):
    """CUPTI cannot be used here; the message says why (shown as the selection reason)."""


class CuptiConflict(CuptiUnavailable):
    """Another tool holds CUPTI (Nsight Systems, an injected profiler)."""


def load_cupti() -> Any:
    """The ``cupti.cupti`` module, or ``CuptiUnavailable`` naming the reason."""
    try:
        from cupti import cupti
    except ImportError as e:
        raise CuptiUnavailable(f"cupti-python is not installed ({e})") from e
    except OSError as e:
        raise CuptiUnavailable(f"cupti-python cannot load libcupti ({e})") from e
    return cupti


def cupti_function_address(name: str) -> int:
    """Address of CUPTI function ``name`` in the very libcupti cupti-python calls (0 where
    unknown): a process can hold two libcupti copies (torch's and cupti-python's), and a
    call into the wrong one acts on a CUPTI that never sees our records."""
    try:
        from cupti._internal import cupti as internal

        pointers = internal._inspect_function_pointers()
    except Exception:
        return 0
    return int(next((v for k, v in pointers.items() if k.lstrip("_") == name), 0) or 0)


def cupti_api_version() -> int | None:
    """``cuptiGetVersion`` of the libcupti cupti-python loaded (e.g. 130401 for 13.4), or
    None where it cannot be asked: the records that library writes follow it."""
    version = ctypes.c_uint32(0)
    try:
        addr = cupti_function_address("cuptiGetVersion")
        if addr:
            get: Any = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_uint32))(addr)
        else:  # by soname: the libcupti already loaded, if one is
            get = ctypes.CDLL("libcupti.so.13").cuptiGetVersion
        return int(version.value) if get(ctypes.byref(version)) == 0 else None
    except Exception:
        return None


def open_cupti(cupti_module: Any = None) -> tuple[Any, int | None, RecordLayout]:
    """cupti-python's module (or the simulated one given), the CUPTI_API_VERSION of the
    libcupti loaded (None: unknown), and the layout of the records that library writes;
    ``CuptiConflict`` where another tool is injected, ``CuptiUnavailable`` naming why
    CUPTI cannot be used (not installed, or a cupti-python older than its CUPTI)."""
    tool = injected_tool()
    if tool is not None:
        raise CuptiConflict(f"another CUPTI tool is injected ({tool} is set)")
    c = load_cupti() if cupti_module is None else cupti_module
    # Loads libcupti (its version says which records it writes). Where another
    # subscriber made CUPTI shared, the single API's call is refused (error 14, seen on
    # the H200): the library is loaded all the same.
    with contextlib.suppress(Exception):
        c.get_timestamp()
    version = (
        cupti_api_version()
        if cupti_module is None
        else getattr(cupti_module, "api_version", None)  # a simulated CUPTI's
    )
    try:
        return c, version, RecordLayout.from_cupti(c, version)
    except RecordLayoutUnavailable as e:
        raise CuptiUnavailable(str(e)) from e


def injected_tool(environ: dict[str, str] | None = None) -> str | None:
    """The env variable showing a CUPTI-based tool injected into this process, if any."""
    env = os.environ if environ is None else environ
    for name in INJECTION_ENV:
        if env.get(name):
            return name
    return None


_PREPARED: list[int] = [0]
"""torch profiler sessions prepared and not yet disabled (``watch_profiler_prepare``)."""
BEFORE_PROFILER: list[Callable[[], None]] = []
"""Called just before a torch profiler prepares Kineto (which then takes CUPTI's buffer
callbacks): the backend hands itself what CUPTI holds of its records first."""


def watch_profiler_prepare(profiler_module: Any) -> bool:
    """Count torch profiler sessions from ``_prepare_profiler`` to ``_disable_profiler``.

    A scheduled profiler prepares Kineto in its warm-up steps: Kineto registers its
    buffer callbacks and enables its kinds then, but ``_profiler_enabled()`` says True
    only from the first recorded step. Taking CUPTI back (or switching kernel records
    off) in between left that profiler with no CUDA events at all (issue 19). The two
    functions are looked up in ``torch.autograd.profiler``'s namespace at every call,
    so wrapping them there sees every session; installed once per process."""
    prepare = getattr(profiler_module, "_prepare_profiler", None)
    disable = getattr(profiler_module, "_disable_profiler", None)
    if not callable(prepare) or not callable(disable):
        return False
    if getattr(prepare, "_pacekeeper_watch", False):
        return True

    def prepared(*args: Any, **kwargs: Any) -> Any:
        for before in list(BEFORE_PROFILER):
            with contextlib.suppress(Exception):
                before()
        result = prepare(*args, **kwargs)
        _PREPARED[0] += 1
        return result

    def disabled(*args: Any, **kwargs: Any) -> Any:
        try:
            return disable(*args, **kwargs)
        finally:
            _PREPARED[0] = 0

    prepared._pacekeeper_watch = True  # type: ignore[attr-defined]
    profiler_module._prepare_profiler = prepared
    profiler_module._disable_profiler = disabled
    return True


def torch_profiler_probe() -> Callable[[], bool] | None:
    """A cheap check for a torch profiler holding CUPTI: enabled, or prepared for a
    scheduled session's warm-up (Kineto holds CUPTI from then until it stops)."""
    try:
        import torch
        import torch.autograd.profiler as profiler_module
    except ImportError:
        return None
    enabled = getattr(getattr(torch._C, "_autograd", None), "_profiler_enabled", None)
    if not callable(enabled):
        return None
    try:
        watched = watch_profiler_prepare(profiler_module)
    except Exception:
        watched = False
    if not watched:
        return enabled  # type: ignore[no-any-return]
    prepared = _PREPARED

    def busy() -> bool:
        return bool(prepared[0]) or bool(enabled())

    return busy


def marker_modes_from_env(environ: dict[str, str] | None = None) -> tuple[str, ...]:
    """Marker modes to try, in order: the one named first, then the default order."""
    raw = (os.environ if environ is None else environ).get(MARKER_ENV, "").strip().lower()
    if raw in ("", "auto"):
        return AUTO_MARKERS
    if raw not in MARKER_MODES:
        allowed = ", ".join(("auto", *MARKER_MODES))
        raise ValueError(f"{MARKER_ENV}={raw!r} is not one of {allowed}")
    return (raw, *(m for m in AUTO_MARKERS if m != raw))


def buffer_bytes_from_env(environ: dict[str, str] | None = None) -> int | None:
    """CUPTI's buffer size from the environment (in KiB there), or None (unset)."""
    raw = (os.environ if environ is None else environ).get(BUFFER_ENV, "").strip()
    if not raw:
        return None
    try:
        kib = int(raw)
    except ValueError:
        raise ValueError(f"{BUFFER_ENV}={raw!r} is not an integer (KiB)") from None
    low, high = _BUFFER_KIB_RANGE
    if not low <= kib <= high:
        raise ValueError(f"{BUFFER_ENV}={kib} must be between {low} and {high} KiB")
    return kib << 10


def report_flush_forced_from_env(environ: dict[str, str] | None = None) -> bool:
    """Whether a report's fence flushes CUPTI's buffers forced (``forced``) rather than
    plain first (``plain``, unset)."""
    raw = (os.environ if environ is None else environ).get(REPORT_FLUSH_ENV, "").strip().lower()
    if raw not in ("", "plain", "forced"):
        raise ValueError(f"{REPORT_FLUSH_ENV}={raw!r} is not one of plain, forced")
    return raw == "forced"


def attribution_from_env(environ: dict[str, str] | None = None) -> str | None:
    """How kernels are attributed to section entries, as the user set it: ``markers``,
    ``gated``, or None (unset: the backend's default, ``default_attribution``)."""
    raw = (os.environ if environ is None else environ).get(ATTRIBUTION_ENV, "").strip().lower()
    if raw == "":
        return None
    if raw not in ATTRIBUTIONS:
        raise ValueError(f"{ATTRIBUTION_ENV}={raw!r} is not one of {', '.join(ATTRIBUTIONS)}")
    return raw


def default_attribution(section_stats: bool) -> str:
    """The attribution a backend gets where neither its caller nor the environment
    chose one. A per-section kernel table needs section markers (``markers``); without
    one, records on inside traced entries alone (``gated``) count the same kernels at a
    fraction of the cost: no marker per entry, none for CUPTI to flush at the report
    (docs/kernel-timing.md, "Gated attribution")."""
    return "markers" if section_stats else "gated"


def sample_every_from_env(environ: dict[str, str] | None = None) -> int | None:
    """A fixed N from the environment, or None for the adaptive rule (unset, ``auto``)."""
    raw = (os.environ if environ is None else environ).get(SAMPLE_EVERY_ENV, "").strip()
    if raw.lower() in ("", "auto"):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{SAMPLE_EVERY_ENV}={raw!r} is not an integer or 'auto'") from None
    if value < 1:
        raise ValueError(f"{SAMPLE_EVERY_ENV}={value} must be >= 1")
    return value


__all__ = [
    "AUTO_MARKERS",
    "BEFORE_PROFILER",
    "BUFFER_ENV",
    "INJECTION_ENV",
    "MARKER_ENV",
    "MARKER_MODES",
    "REPORT_FLUSH_ENV",
    "SAMPLE_EVERY_ENV",
    "CuptiConflict",
    "CuptiUnavailable",
    "buffer_bytes_from_env",
    "cupti_api_version",
    "cupti_function_address",
    "default_attribution",
    "injected_tool",
    "load_cupti",
    "marker_modes_from_env",
    "open_cupti",
    "report_flush_forced_from_env",
    "sample_every_from_env",
    "torch_profiler_probe",
    "watch_profiler_prepare",
]
