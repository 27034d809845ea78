"""Memory of hardware: per node and GPU, how that GPU scored against its peers in every
job and incarnation it served, and the speed factor it has when healthy.

What one report teaches: for each listed rank that names its GPU (``gpuUuid``), the
GPU's *ratio* — its GPU relative score over its peers' median (``peers``), a comparison
made now, among ranks doing the same work, so no restart resets it — kept under the
node the API places the rank on (the shell has checked every rank's node against the
job's pods before the core sees the report) and the GPU the job names. From that:

- **Slow across jobs is hardware.** Each GPU keeps a record per (job, incarnation) it
  served: windows, slow windows, mean calibrated ratio. A GPU slow in another job too
  is the hardware's doing (``slow_elsewhere``).
- **Calibration.** A GPU's speed factor is the median of its first
  ``calibration.windowsToLearn`` healthy ratios, then follows later healthy ones at
  most ``maxDriftPerHour``; never beyond ``1 ± maxDeviation``. Healthy means: not
  judged slow by the job's policy, not on a node the job's ladder is on, not slow by the
  memory's own bar, within ``maxDeviation`` of 1, and (once there is a factor) within
  ``trackBand`` of it. So a GPU that fails slowly cannot calibrate itself healthy: a
  step leaves the band at once, a ramp outruns the drift limit, and a flagged window
  teaches nothing.
- **Recovery means the same GPU scoring well against its peers** (``unrecovered``), in
  windows after the mark — not a fresh baseline reporting 1.0.
- **Every lesson names its tenant** (``hardware_trust``: namespace and ServiceAccount of
  the job's pods, from the API). A factor is its teacher's: it calibrates that tenant's
  jobs, and another tenant's only once an independent tenant (another namespace) saw the
  GPU at the same speed (``factor_for``); until then the others are judged as if nothing
  were known. A slow record names its tenant too (``Service.tenant``), so that another
  tenant's word alone never escalates a job's ladder (``hardware_trust.slow_elsewhere``).

Bounded: ``MAX_GPUS_PER_NODE`` GPUs per node, ``MAX_SERVICES_PER_GPU`` job records per
GPU, ``MAX_RECENT`` recent windows, and ``MAX_NODES_PER_SHARD`` nodes in each of
``SHARDS`` shards (the shell stores one ConfigMap per shard; the worst case of a full
shard stays under the 1 MiB a ConfigMap may hold). A newcomer takes the place of the
least valuable entry (no slow history, longest unseen; never a node carrying our marks,
never a GPU with a slow history), or is not remembered. Aged: a GPU's window counts
halve every ``halfLifeS``; records and GPUs unseen for ``maxAgeS`` are forgotten.

Pure, like the rest of the core: time is passed in. The records themselves and their
stored form are ``hardware_records``'s (re-exported here, where callers import them).
"""

from __future__ import annotations

import hashlib
import math
import statistics
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from pacekeeper.controller.core.hardware_records import (
    MAX_NODES_PER_SHARD,
    MEMORY_VERSION,
    MIN_SLOW_WINDOWS,
    SHARDS,
    GpuMemory,
    HardwareMemory,
    HardwareMemoryError,
    NodeMemory,
    Observation,
    Service,
    from_shards,
    shard_of,
    stored_factor,
    stored_ratio,
    to_shards,
)
from pacekeeper.controller.core.ids import NodeName
from pacekeeper.controller.core.peers import GpuCalibration
from pacekeeper.controller.core.policy import HardwareMemorySettings, HardwareUse
from pacekeeper.controller.core.rank_columns import any_true
from pacekeeper.detector.score_report import ScoreReport

# What callers import from here: the records and their stored form live in
# ``hardware_records`` (split off to keep modules small), and stay importable here.
__all__ = [
    "MAX_AGREED",
    "MAX_GPUS_PER_NODE",
    "MAX_HEALTHY_PER_WINDOW",
    "MAX_JOB_CHARS",
    "MAX_NODES_PER_SHARD",
    "MAX_RECENT",
    "MAX_SERVICES_PER_GPU",
    "MEMORY_VERSION",
    "MIN_SLOW_WINDOWS",
    "NAMESPACE_CHARS",
    "SHARDS",
    "SWEEP_EVERY",
    "GpuMemory",
    "HardwareMemory",
    "HardwareMemoryError",
    "NodeMemory",
    "Observation",
    "Service",
    "aged",
    "calibration",
    "decay",
    "factor_for",
    "from_shards",
    "job_label",
    "observe",
    "shard_of",
    "to_shards",
    "unrecovered",
]

MAX_GPUS_PER_NODE = 16
"""More GPUs than any node has (8 is common, 16 the largest boards): a job naming more
on one node is lying, and cannot push real ones out beyond this."""
MAX_SERVICES_PER_GPU = 4
MAX_RECENT = 8
"""Recent windows per GPU: what recovery reads (``recovery.consecutiveReports`` beyond
this count as this)."""
MAX_HEALTHY_PER_WINDOW = 1024
"""Healthy GPUs one window updates at most (the rest in later windows, in turn); flagged
and slow ones are always recorded."""
MAX_JOB_CHARS = 64
"""Job keys longer than this are kept as a prefix and a hash (bounded records)."""
MAX_AGREED = 3
"""Tenants remembered as having confirmed a GPU's factor (one independent one suffices)."""
NAMESPACE_CHARS = 2
"""A tenant tag starts with this much of its namespace's hash: tags that differ there
are of different namespaces (independent); a collision only makes two look the same."""
SWEEP_EVERY = timedelta(hours=1)
# --- learning ----------------------------------------------------------------------------


def observe(
    memory: HardwareMemory,
    observations: Iterable[Observation],
    *,
    job: str,
    since: datetime,
    at: datetime,
    window_s: float,
    settings: HardwareMemorySettings,
    protected: frozenset[NodeName] = frozenset(),
    turn: int = 0,
    tenant: str = "",
) -> HardwareMemory:
    """``memory`` after one report window of ``job`` (incarnation started ``since``) of
    ``tenant`` (its tag). ``protected``: nodes carrying our marks, never pushed out for a
    newcomer. ``turn`` (the report's sequence) picks which healthy GPUs a large report
    updates."""
    nodes = dict(memory.nodes)
    label = job_label(job)
    # Whole seconds: what the stored form keeps, so a restored memory compares the same.
    at, since = at.replace(microsecond=0), since.replace(microsecond=0)
    picked = _pick(memory, observations, settings, turn, tenant)
    shards: dict[int, list[NodeName]] | None = None
    for node, seen in picked.items():
        nm = nodes.get(node)
        if nm is None:
            if shards is None:
                shards = _by_shard(nodes)
            if not _make_room(nodes, shards, node, protected):
                continue
            nm = NodeMemory()
        gpus = {u: g for u, g in nm.gpus.items() if not _expired(g.last, at, settings)}
        for o in seen[:MAX_GPUS_PER_NODE]:
            g = gpus.get(o.uuid)
            if g is None:
                if len(gpus) >= MAX_GPUS_PER_NODE and not _evict_gpu(gpus):
                    continue
                g = GpuMemory(first=at, last=at)
            gpus[o.uuid] = _learn(g, o, (label, tenant), since, at, window_s, settings)
        nodes[node] = NodeMemory(gpus=gpus)
    return HardwareMemory(nodes=nodes, swept_at=memory.swept_at)


def _pick(
    memory: HardwareMemory,
    observations: Iterable[Observation],
    settings: HardwareMemorySettings,
    turn: int,
    tenant: str,
) -> dict[NodeName, list[Observation]]:
    """The observations this window records, by node: every one that is flagged or slow
    (evidence is never skipped) and, of the healthy ones of a report naming more than
    ``MAX_HEALTHY_PER_WINDOW`` GPUs, a rotating share, so that a 16,384-GPU report costs
    about what a 1,024-GPU one does and each GPU is still seen every few windows. One
    window per GPU: two ranks naming one GPU count it once."""
    evidence: list[Observation] = []
    healthy: list[Observation] = []
    nodes = memory.nodes
    for o in observations:
        ratio = o.ratio
        if not 0.0 < ratio < math.inf:
            continue
        nm = nodes.get(o.node)
        g = None if nm is None else nm.gpus.get(o.uuid)
        slow = _slow_window(ratio, g, settings, tenant)[0]
        (evidence if o.flagged or slow else healthy).append(o)
    if len(healthy) > MAX_HEALTHY_PER_WINDOW:
        every = -(-len(healthy) // MAX_HEALTHY_PER_WINDOW)
        healthy = [o for o in healthy if zlib.crc32(o.uuid.encode()) % every == turn % every]
    out: dict[NodeName, dict[str, Observation]] = {}
    for o in (*evidence, *healthy):
        out.setdefault(o.node, {}).setdefault(o.uuid, o)
    return {n: list(by_uuid.values()) for n, by_uuid in out.items()}


def _learn(  # noqa: PLR0917 (one GPU, one window)
    g: GpuMemory,
    o: Observation,
    who: tuple[str, str],
    since: datetime,
    at: datetime,
    window_s: float,
    settings: HardwareMemorySettings,
) -> GpuMemory:
    job, tenant = who
    cal = settings.calibration
    keep = decay(at - g.last, settings.half_life_s)
    # Judged slow by the factor this tenant may use: another tenant's factor cannot make
    # this job's windows slow records (the poisoned factor would write its own evidence).
    slow, calibrated = _slow_window(o.ratio, g, settings, tenant)
    if g.teacher != tenant and (not g.teacher or (not g.known and not g.bootstrap)):
        # A GPU nobody teaches (or a factor stored before tenants were kept): this
        # tenant's windows teach it from scratch.
        g = replace(g, factor=1.0, learned=0, bootstrap=(), teacher=tenant, agreed=())
    known = g.learned > 0
    low, high = 1.0 - cal.max_deviation, 1.0 + cal.max_deviation
    healthy = not o.flagged and not slow and low <= o.ratio <= high
    near = not known or abs(o.ratio - g.factor) <= cal.track_band
    learnable = healthy and near and g.teacher == tenant
    factor, learned, bootstrap, agreed = g.factor, g.learned, g.bootstrap, g.agreed
    if healthy and near and known and _independent(tenant, g.teacher) and tenant not in agreed:
        # Another namespace saw the same speed on its own: the factor is the GPU's.
        agreed = (*agreed, tenant)[-MAX_AGREED:]
    ratio = stored_ratio(o.ratio)
    if learnable and not known:
        bootstrap = (*bootstrap, ratio)
        if len(bootstrap) >= cal.windows_to_learn:
            factor = _clamp(statistics.median(bootstrap), low, high)
            learned, bootstrap = len(bootstrap), ()
    elif learnable:
        step = cal.max_drift_per_hour * max(window_s, 0.0) / 3600.0
        factor = _clamp(factor + _clamp(o.ratio - factor, -step, step), low, high)
        learned += 1
    recent = g.recent[1:] if len(g.recent) >= MAX_RECENT else g.recent
    # Rounded as stored, so that a restored memory is the memory and learns on alike.
    return GpuMemory(
        first=g.first,
        last=max(g.last, at),
        factor=stored_factor(factor),
        learned=learned,
        bootstrap=bootstrap,
        recent=(*recent, (at, ratio)),
        weight=stored_ratio(g.weight * keep + 1.0),
        slow_weight=stored_ratio(g.slow_weight * keep + (1.0 if slow else 0.0)),
        services=_served(g.services, (job, tenant), since, at, slow, calibrated),
        teacher=g.teacher,
        agreed=agreed,
    )


def _slow_window(
    ratio: float, g: GpuMemory | None, settings: HardwareMemorySettings, tenant: str
) -> tuple[bool, float]:
    """(slow, calibrated ratio) of one window of a GPU for ``tenant``: below ``slowBelow``
    once divided by the factor that tenant may use; with none, below the smaller of that
    and ``1 - maxDeviation`` (the spread of one model is not slow before it is learned)."""
    factor = None if g is None else factor_for(g, tenant)
    if factor is None:
        bar = min(settings.slow_below, 1.0 - settings.calibration.max_deviation)
        return ratio < bar, ratio
    calibrated = ratio / factor
    return calibrated < settings.slow_below, calibrated


def _independent(a: str, b: str) -> bool:
    """Tenants of different namespaces. Two ServiceAccounts of one namespace are not:
    whoever may create pods there may run them as either."""
    return bool(a) and bool(b) and a[:NAMESPACE_CHARS] != b[:NAMESPACE_CHARS]


def factor_for(g: GpuMemory, tenant: str) -> float | None:
    """The factor ``tenant``'s jobs are judged by: its own, or one an independent tenant
    confirmed; None: as if none were known. Never another tenant's alone, not even one
    below 1 (raising this GPU's score): ranks are judged against their peers' calibrated
    median, so raising some GPUs lowers every other one against them."""
    if not g.known:
        return None
    if g.teacher == tenant or any(_independent(a, g.teacher) for a in g.agreed):
        return g.factor
    return None


def _served(  # noqa: PLR0917 (a record and the window it takes)
    services: tuple[Service, ...],
    who: tuple[str, str],
    since: datetime,
    at: datetime,
    slow: bool,
    calibrated: float,
) -> tuple[Service, ...]:
    job, tenant = who
    # The newest record is this window's nearly always: look there first.
    for i in range(len(services) - 1, -1, -1):
        s = services[i]
        if s.job == job and s.since == since:
            n = s.windows + 1
            mean = stored_ratio(s.mean + (calibrated - s.mean) / n)
            updated = Service(job, since, at, n, s.slow_windows + slow, mean, tenant)
            return (*services[:i], updated, *services[i + 1 :])
    out = [*services, Service(job, since, at, 1, int(slow), stored_ratio(calibrated), tenant)]
    while len(out) > MAX_SERVICES_PER_GPU:
        # The oldest healthy record goes first: slow ones are the evidence.
        healthy = [s for s in out if not s.slow]
        out.remove(min(healthy or out, key=lambda s: s.last))
    return tuple(out)


def _by_shard(nodes: Mapping[NodeName, NodeMemory]) -> dict[int, list[NodeName]]:
    out: dict[int, list[NodeName]] = {}
    for n in nodes:
        out.setdefault(shard_of(n), []).append(n)
    return out


def _make_room(
    nodes: dict[NodeName, NodeMemory],
    shards: dict[int, list[NodeName]],
    node: NodeName,
    protected: frozenset[NodeName],
) -> bool:
    """Whether ``node`` may be added (after pushing out the least valuable node of its
    shard when that is full); ``shards`` is kept up to date."""
    same = shards.setdefault(shard_of(node), [])
    if len(same) >= MAX_NODES_PER_SHARD:
        candidates = [n for n in same if n not in protected]
        if not candidates:
            return False
        victim = min(candidates, key=lambda n: (nodes[n].slow_history(), nodes[n].last(), n))
        del nodes[victim]
        same.remove(victim)
    same.append(node)
    return True


def _evict_gpu(gpus: dict[str, GpuMemory]) -> bool:
    healthy = [u for u, g in gpus.items() if not g.slow_history()]
    if not healthy:
        return False
    del gpus[min(healthy, key=lambda u: (gpus[u].last, u))]
    return True


def decay(elapsed: timedelta, half_life_s: float) -> float:
    """How much a window counts after ``elapsed`` (halved every ``half_life_s``)."""
    return float(0.5 ** (max(elapsed.total_seconds(), 0.0) / half_life_s))


def _clamp(v: float, low: float, high: float) -> float:
    return min(high, max(low, v))


def _expired(last: datetime, now: datetime, settings: HardwareMemorySettings) -> bool:
    return (now - last).total_seconds() > settings.max_age_s


def job_label(job: str) -> str:
    """``job`` as the memory keeps it: at most ``MAX_JOB_CHARS``, distinct per job."""
    if len(job) <= MAX_JOB_CHARS:
        return job
    digest = hashlib.sha256(job.encode()).hexdigest()[:16]
    return f"{job[: MAX_JOB_CHARS - 17]}~{digest}"


def aged(memory: HardwareMemory, now: datetime, settings: HardwareMemorySettings) -> HardwareMemory:
    """Forget job records and GPUs unseen for ``maxAgeS``, once per ``SWEEP_EVERY``
    (observing a node ages it too); empty nodes go."""
    if memory.swept_at is not None and now - memory.swept_at < SWEEP_EVERY:
        return memory
    nodes: dict[NodeName, NodeMemory] = {}
    for name, nm in memory.nodes.items():
        gpus = {}
        for u, g in nm.gpus.items():
            if _expired(g.last, now, settings):
                continue
            kept = tuple(s for s in g.services if not _expired(s.last, now, settings))
            gpus[u] = g if len(kept) == len(g.services) else replace(g, services=kept)
        if gpus:
            nodes[name] = nm if gpus == nm.gpus else NodeMemory(gpus=gpus)
    return HardwareMemory(nodes=nodes, swept_at=now)


# --- what it says --------------------------------------------------------------------------


def calibration(
    memory: HardwareMemory,
    report: ScoreReport,
    settings: HardwareMemorySettings,
    use: HardwareUse,
    tenant: str = "",
) -> GpuCalibration | None:
    """Per listed rank, its GPU's factor as ``tenant`` may use it (``factor_for``); None
    when the memory is off (judged as before). A report naming no GPU gets no factor, but
    is still checked for a GPU slower than any factor could be (``peer_check``)."""
    if not settings.enabled:
        return None
    n = len(report.ranks)
    factors = np.ones(n, dtype=np.float64)
    known = np.zeros(n, dtype=np.bool_)
    nodes = memory.nodes
    names = any_true(report.ranks, "gpu_uuid")
    for i, r in enumerate(report.ranks if names else ()):
        if r.gpu_uuid is None:
            continue
        nm = nodes.get(NodeName(r.node))
        g = None if nm is None else nm.gpus.get(r.gpu_uuid)
        factor = None if g is None else factor_for(g, tenant)
        if factor is not None:
            factors[i], known[i] = factor, True
    return GpuCalibration(
        factors=factors,
        known=known,
        max_deviation=settings.calibration.max_deviation,
        band=settings.calibration.track_band,
        calibrate=use.calibrate,
        peer_check=use.peer_check,
        names_gpus=names,
    )


def unrecovered(
    memory: HardwareMemory,
    node: str,
    uuids: Iterable[str],
    *,
    after: datetime,
    need: int,
    recover: float,
    tenant: str = "",
) -> dict[str, dict[str, Any]]:
    """Of ``uuids`` on ``node``, those not yet recovered, with why: recovered is the last
    ``need`` (at most ``MAX_RECENT``) remembered windows after ``after`` all scoring at
    or above ``recover`` against the GPU's peers, calibrated by the factor ``tenant``
    (the ladder's job's) may use (capped at 1): another tenant's high factor cannot keep
    its node marked."""
    need = max(1, min(need, MAX_RECENT))
    after = after.replace(microsecond=0)
    out: dict[str, dict[str, Any]] = {}
    for u in uuids:
        g = memory.gpu(node, u)
        if g is None:
            out[u] = {"windowsSince": 0, "need": need, "why": "not remembered"}
            continue
        speed = factor_for(g, tenant) or 1.0
        fresh = [min(r / speed, 1.0) for t, r in g.recent if t > after]
        last = fresh[-need:]
        if len(last) < need or min(last) < recover:
            out[u] = {
                "windowsSince": len(fresh),
                "need": need,
                "scores": [round(v, 4) for v in last],
                "factor": round(speed, 4),
            }
    return out
