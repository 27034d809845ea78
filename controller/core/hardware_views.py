"""What the memory of hardware holds, for people and for decision evidence: one GPU's
record as JSON (``gpu_view``), the evidence a node finding carries (``describe``), the
counts the metrics show (``summary``) and the whole memory for ``pacekeeper status
--hardware`` (``view``).

Separate from ``hardware_memory`` (what a window teaches, and what recovery and the
ladder ask of it), because these only read it and have nothing to decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pacekeeper.controller.core.hardware_memory import (
    MAX_GPUS_PER_NODE,
    GpuMemory,
    HardwareMemory,
    decay,
    factor_for,
)
from pacekeeper.controller.core.policy import HardwareMemorySettings


def describe(  # noqa: PLR0917 (the GPUs, and whose eyes they are seen with)
    memory: HardwareMemory,
    node: str,
    uuids: Sequence[str],
    now: datetime,
    settings: HardwareMemorySettings,
    tenant: str | None = None,
) -> dict[str, dict[str, Any]]:
    """Evidence for a decision: what the memory holds of these GPUs (``factor``: the one
    ``tenant``'s job is judged by, ``hardware_memory.factor_for``)."""
    out: dict[str, dict[str, Any]] = {}
    for u in uuids[:MAX_GPUS_PER_NODE]:
        g = memory.gpu(node, u)
        if g is not None:
            out[u] = gpu_view(g, now, settings, services=False, tenant=tenant)
    return out


def gpu_view(
    g: GpuMemory,
    now: datetime,
    settings: HardwareMemorySettings,
    *,
    services: bool = True,
    tenant: str | None = None,
) -> dict[str, Any]:
    """One GPU; ``tenant``: the factor as that tenant may use it (None: as learned)."""
    keep = decay(now - g.last, settings.half_life_s)
    weight = g.weight * keep
    factor = (g.factor if g.known else None) if tenant is None else factor_for(g, tenant)
    out: dict[str, Any] = {
        "factor": round(factor, 4) if factor is not None else None,
        "taughtBy": g.teacher,
        "agreedBy": list(g.agreed),
        "learnedWindows": g.learned,
        "windows": round(weight, 2),
        "slowShare": round(g.slow_weight * keep / weight, 4) if weight > 0 else 0.0,
        "slowHistory": g.slow_history(),
        "slowJobs": sorted({s.job for s in g.services if s.slow}),
        "lastSeen": g.last.isoformat(),
    }
    if services:
        out["firstSeen"] = g.first.isoformat()
        out["recent"] = [{"at": t.isoformat(), "ratio": round(r, 4)} for t, r in g.recent]
        out["services"] = [
            {
                "job": s.job,
                "since": s.since.isoformat(),
                "last": s.last.isoformat(),
                "windows": s.windows,
                "slowWindows": s.slow_windows,
                "meanScore": round(s.mean, 4),
                "slow": s.slow,
                "tenant": s.tenant,
            }
            for s in g.services
        ]
    return out


@dataclass(frozen=True, slots=True)
class Summary:
    nodes: int
    gpus: int
    slow_gpus: int
    """GPUs with a slow record in some job."""
    calibrated_gpus: int
    slow_nodes: int


def summary(memory: HardwareMemory) -> Summary:
    """One pass over the memory: each GPU's slow history is read once."""
    gpus = slow_gpus = calibrated = slow_nodes = 0
    for nm in memory.nodes.values():
        node_slow = False
        for g in nm.gpus.values():
            gpus += 1
            calibrated += g.known
            if g.slow_history():
                slow_gpus += 1
                node_slow = True
        slow_nodes += node_slow
    return Summary(len(memory.nodes), gpus, slow_gpus, calibrated, slow_nodes)


def view(memory: HardwareMemory, now: datetime, settings: HardwareMemorySettings) -> dict[str, Any]:
    """The whole memory for ``pacekeeper status --hardware -o json``."""
    s = summary(memory)
    return {
        "nodes": s.nodes,
        "gpus": s.gpus,
        "slowGpus": s.slow_gpus,
        "calibratedGpus": s.calibrated_gpus,
        "byNode": {
            name: {u: gpu_view(g, now, settings) for u, g in sorted(nm.gpus.items())}
            for name, nm in sorted(memory.nodes.items())
        },
    }
