"""The CUPTI calls the modes and diagnostics share: flushes (plain and forced),
releasing tracing between modes, freeing a marker memset's buffer and stream. Apart
so the bare modes, the detector modes and the diagnostics use one copy; cupti itself
is imported inside the calls (there is none on a CPU-only machine)."""

from __future__ import annotations

from typing import Any


def release_cupti(cupti: Any) -> None:
    """Stop tracing and deliver what is buffered. No cuptiFinalize: called from an
    ordinary thread it left CUPTI giving no records to the next mode in this process."""
    cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    cupti.activity_flush_all(1)


def cupti_flush() -> None:
    from cupti import cupti

    cupti.activity_flush_all(0)


def cupti_flush_forced() -> None:
    """Hand over every buffer, the partial one too, so a block's records are all
    handled inside that block."""
    from cupti import cupti

    cupti.activity_flush_all(1)


def free_memset(res: Any) -> None:
    import ctypes

    res.libcuda.cuMemFree_v2(ctypes.c_uint64(res.buffer))
    res.libcuda.cuStreamDestroy_v2(ctypes.c_void_p(res.stream))
