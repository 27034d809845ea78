"""Synthesized CUPTI activity buffers built with cupti-python's real record dtypes."""

from __future__ import annotations

import numpy as np
from cupti import cupti

from pacekeeper.cupti_ext.attribution import encode_external_id
from pacekeeper.cupti_ext.records import RecordLayout

LAYOUT = RecordLayout.from_cupti(cupti)
OURS = int(cupti.ExternalCorrelationKind.CUSTOM2)


def kernels(corr: list[int], name_ptr: int = 7, dur_ns: int = 50, threads: int = 512) -> bytes:
    k = np.zeros(len(corr), dtype=LAYOUT.kernel_dtype)
    k["kind"] = LAYOUT.kernel_kind
    k["start"] = 1000
    k["end"] = 1000 + dur_ns
    k["correlation_id"] = corr
    k["name"] = name_ptr
    k["grid_x"], k["grid_y"], k["grid_z"] = threads // 128, 1, 1
    k["block_x"], k["block_y"], k["block_z"] = 128, 1, 1
    return k.tobytes()


def marker(serial: int, section: int, stop: bool, corr: int, kind: int = OURS) -> bytes:
    e = np.zeros(1, dtype=LAYOUT.external_dtype)
    e["kind"] = LAYOUT.external_kind
    e["external_kind"] = kind
    e["external_id"] = encode_external_id(serial, section, stop)
    e["correlation_id"] = corr
    a = np.zeros(1, dtype=LAYOUT.api_dtype)
    a["kind"] = LAYOUT.driver_kind
    a["correlation_id"] = corr
    return e.tobytes() + a.tobytes()


def as_buffer(*parts: bytes) -> np.ndarray:
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def cut_and_shuffle(rng: np.random.Generator, records: list[bytes], cuts: int) -> list[list[bytes]]:
    """``records`` cut into buffers at up to ``cuts`` random places, each shuffled (a
    marker may come after its kernels, an exit before its entry)."""
    at = sorted(set(rng.integers(0, len(records), cuts).tolist()))
    buffers = [records[a:b] for a, b in zip([0, *at], [*at, len(records)], strict=True)]
    for part in buffers:
        rng.shuffle(part)  # type: ignore[arg-type]
    return buffers
