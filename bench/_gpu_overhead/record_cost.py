"""The CPU cost per record of our buffer path (walk and decode, fold into statistics),
compiled and numpy, on synthesized buffers with cupti-python's real record dtypes
(``--decode-only`` runs only this). Apart because it needs no GPU and none of the
modes: cupti-python alone, for its dtypes."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def record_processing_cost(repeats: int = 30) -> dict[str, Any]:
    """CPU cost per record of our buffer path (walk and decode, fold into statistics),
    compiled and numpy, on buffers of the backend's size (``BUFFER_BYTES``) synthesized
    with cupti-python's real record dtypes: 602-kernel steps between memset section
    markers (the default), 30 kernel names, launch sizes spread over 9 buckets. Runs
    without a GPU."""
    from cupti import cupti

    from pacekeeper.cupti_ext import native
    from pacekeeper.cupti_ext.attribution import encode_external_id
    from pacekeeper.cupti_ext.cupti_backend import BUFFER_BYTES
    from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
    from pacekeeper.cupti_ext.markers import MARKER_BYTES, MemsetMarkers
    from pacekeeper.cupti_ext.records import (
        DecodeScratch,
        RecordLayout,
        decode_buffer,
        decode_span,
        record_offsets,
    )
    from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

    layout = RecordLayout.from_cupti(cupti)
    rng = np.random.default_rng(0)
    names = {i: f"_Z6kernelILi{i}EEvv" for i in range(1, 31)}
    stream = 7

    def builder() -> KernelWindowBuilder:
        b = KernelWindowBuilder(
            int(cupti.ExternalCorrelationKind.CUSTOM2),
            keys=KernelKeyTable(resolve_name=names.__getitem__),
        )
        b.memset_markers = MemsetMarkers(stream)
        return b

    def buffer(b: KernelWindowBuilder, first_serial: int, first_corr: int) -> Any:
        """One buffer of steps; its markers' values are put in ``b``'s marker ring."""
        assert b.memset_markers is not None
        ring = b.memset_markers.ring

        def mark(serial: int, stop: bool, corr: int) -> bytes:
            m = np.zeros(1, dtype=layout.memset_dtype)
            m["kind"], m["correlation_id"] = layout.memset_kind, corr
            m["value"] = ring.put(encode_external_id(serial, 0, stop))
            m["bytes"], m["stream_id"] = MARKER_BYTES, stream
            return m.tobytes()

        parts: list[bytes] = []
        corr, serial, size = first_corr, first_serial, 0
        while size < BUFFER_BYTES - 700 * layout.kernel_dtype.itemsize:
            k = np.zeros(602, dtype=layout.kernel_dtype)
            k["kind"] = layout.kernel_kind
            k["start"] = 1000
            k["end"] = 1000 + rng.integers(1000, 5000, 602)
            k["correlation_id"] = np.arange(corr + 1, corr + 603)
            k["name"] = rng.integers(1, 31, 602)
            k["block_x"] = 1 << rng.integers(0, 9, 602)
            for f in ("grid_x", "grid_y", "grid_z", "block_y", "block_z"):
                k[f] = 1
            parts += [mark(serial, False, corr), k.tobytes(), mark(serial, True, corr + 603)]
            size += len(parts[-3]) + len(parts[-2]) + len(parts[-1])
            corr, serial = corr + 604, serial + 1
        return np.frombuffer(b"".join(parts), dtype=np.uint8), serial, corr

    def best(fn: Callable[[], Any], per: int) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times) / per * 1e6

    def path(compiled: bool) -> dict[str, Any]:
        os.environ[native.NATIVE_ENV] = "1" if compiled else "0"
        native.reset()
        if compiled and native.library() is None:
            return {"error": "native record path not built"}
        b = builder()
        raw, _, _ = buffer(b, 1, 1)
        decoded, n, _ = decode_buffer(raw, layout)
        b.add(decoded, n)
        if compiled:
            scratch = DecodeScratch()  # as the backend decodes: into reused arrays
            walk_decode = best(lambda: decode_buffer(raw, layout, scratch), n)
        else:
            offsets, _ = record_offsets(raw, layout)
            walk_decode = best(lambda: record_offsets(raw, layout), n) + best(
                lambda: decode_span(raw, offsets, layout), n
            )
        # A window's later buffers: 50 distinct buffers (~5,000 entries) folded first
        # (a 60 s window at interval 1 holds that many), then fresh ones timed one by one.
        late = builder()
        s, c = 1, 1
        fresh = []
        for _ in range(50 + repeats):
            raw_i, s, c = buffer(late, s, c)
            fresh.append(decode_buffer(raw_i, layout)[:2])
        for dec, k in fresh[:50]:
            late.add(dec, k)
        times = []
        for dec, k in fresh[50:]:
            t0 = time.perf_counter()
            late.add(dec, k)
            times.append((time.perf_counter() - t0) / k * 1e6)
        fold = min(times)
        late.take(["step"])  # first call pays numpy's one-time set-up
        for dec, k in fresh[:repeats]:
            late.add(dec, k)
        t0 = time.perf_counter()
        window = late.take(["step"])
        assert window.records > 0 and window.unattributed_records == 0
        return {
            "walk_decode_us_per_record": walk_decode,
            "fold_us_per_record": fold,
            "total_us_per_record": walk_decode + fold,
            "take_window_ms_warm": (time.perf_counter() - t0) * 1e3,
        }

    saved = os.environ.get(native.NATIVE_ENV)
    try:
        out = {
            "records_per_buffer": int(decode_buffer(buffer(builder(), 1, 1)[0], layout)[1]),
            "compiled": path(True),
            "numpy": path(False),
            "cpu": platform.processor() or platform.machine(),
        }
    finally:
        if saved is None:
            os.environ.pop(native.NATIVE_ENV, None)
        else:
            os.environ[native.NATIVE_ENV] = saved
        native.reset()
    return out
