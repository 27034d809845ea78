"""What the memory of hardware keeps (``hardware_memory`` learns it and says what it
means): per node its GPUs, per GPU its speed factor, recent windows and one record per
job incarnation it served; and the stored form, ``SHARDS`` documents of at most
``MAX_NODES_PER_SHARD`` nodes each (the shell stores one ConfigMap per shard; the worst
case of a full shard stays under the 1 MiB a ConfigMap may hold).

Serialisable: camelCase JSON with epoch seconds, every field defaulted, no ``null``
inside arrays.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, NamedTuple

from pydantic import ConfigDict, PlainSerializer, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from pacekeeper.controller.core.ids import NodeName

MEMORY_VERSION = 1
SHARDS = 128
MAX_NODES_PER_SHARD = 44
MAX_NODES = SHARDS * MAX_NODES_PER_SHARD
MIN_SLOW_WINDOWS = 2
"""A job's record on a GPU is slow with at least this many slow windows, and at least
half of its windows slow."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _epoch(value: datetime) -> int:
    return int(value.timestamp())


def stored_ratio(value: float) -> float:
    """A ratio as the memory keeps it (rounded: the stored form stays small)."""
    return round(value, 4)


def stored_factor(value: float) -> float:
    """A speed factor as the memory keeps it."""
    # A factor moves by as little as ~1e-4 per window (maxDriftPerHour): kept finer.
    return round(value, 7)


Epoch = Annotated[datetime, PlainSerializer(_epoch, return_type=int)]
Ratio = Annotated[float, PlainSerializer(stored_ratio, return_type=float)]
Fine = Annotated[float, PlainSerializer(stored_factor, return_type=float)]
_WIRE = ConfigDict(alias_generator=to_camel, populate_by_name=True)


@dataclass(frozen=True, slots=True)
class Service:
    """One job's incarnation on one GPU."""

    __pydantic_config__ = _WIRE

    job: str
    since: Epoch
    """The incarnation's start (the job's start, or our last restart or drain of it)."""
    last: Epoch
    windows: int = 0
    slow_windows: int = 0
    mean: Ratio = 1.0
    """Mean calibrated ratio over its windows."""
    tenant: str = ""
    """The job's tenant tag (``hardware_trust.tenant_tag``); "": stored before tenants
    were kept, trusted by nobody."""

    @property
    def slow(self) -> bool:
        return self.slow_windows >= MIN_SLOW_WINDOWS and 2 * self.slow_windows >= self.windows


@dataclass(frozen=True, slots=True)
class GpuMemory:
    __pydantic_config__ = _WIRE

    first: Epoch
    last: Epoch
    factor: Fine = 1.0
    learned: int = 0
    """Healthy windows the factor was learned from; 0: no factor yet."""
    bootstrap: tuple[Ratio, ...] = ()
    """Healthy ratios collected towards the first factor."""
    recent: tuple[tuple[Epoch, Ratio], ...] = ()
    """The newest windows, (time, raw ratio), newest last."""
    weight: Ratio = 0.0
    """Windows seen, each counting half after ``halfLifeS`` (as of ``last``)."""
    slow_weight: Ratio = 0.0
    services: tuple[Service, ...] = ()
    teacher: str = ""
    """The tenant whose windows learned ``factor`` (and alone move it)."""
    agreed: tuple[str, ...] = ()
    """Other tenants, of another namespace than the teacher, whose own healthy window
    found the GPU within the track band of ``factor``: independent agreement."""

    @property
    def known(self) -> bool:
        return self.learned > 0

    def speed(self) -> float:
        """The factor judged scores are divided by: 1.0 until one is learned."""
        return self.factor if self.learned > 0 else 1.0

    def slow_history(self) -> bool:
        return any(s.slow for s in self.services)


@dataclass(frozen=True, slots=True)
class NodeMemory:
    __pydantic_config__ = _WIRE

    gpus: Mapping[str, GpuMemory] = field(default_factory=dict)

    def last(self) -> datetime:
        return max((g.last for g in self.gpus.values()), default=_EPOCH)

    def slow_history(self) -> bool:
        return any(g.slow_history() for g in self.gpus.values())


@dataclass(frozen=True, slots=True)
class HardwareMemory:
    __pydantic_config__ = _WIRE

    nodes: Mapping[NodeName, NodeMemory] = field(default_factory=dict)
    swept_at: Epoch | None = None
    """Last full ageing pass (not stored by the Kubernetes shell: cheap to redo)."""

    def gpu(self, node: str, uuid: str) -> GpuMemory | None:
        nm = self.nodes.get(NodeName(node))
        return None if nm is None else nm.gpus.get(uuid)


class HardwareMemoryError(ValueError):
    """A stored memory that cannot be read back; the message names the field."""


class Observation(NamedTuple):
    """One GPU in one report window (a tuple: a report makes one per listed rank)."""

    node: NodeName
    """Where the API places the rank (never the report's word alone)."""
    uuid: str
    """The GPU the job says the rank ran on."""
    ratio: float
    """GPU relative score over the peers' median, uncapped, uncalibrated."""
    flagged: bool
    """Judged slow by the job's policy, or on a node the job's ladder is on."""


# --- the stored form -----------------------------------------------------------------------


@functools.lru_cache(maxsize=1 << 14)
def shard_of(node: str) -> int:
    """Which of the ``SHARDS`` stored parts holds ``node`` (stable across processes)."""
    digest = hashlib.blake2b(node.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big") % SHARDS


def to_shards(
    memory: HardwareMemory, only: Collection[int] | None = None
) -> dict[int, dict[str, Any]]:
    """The memory as ``SHARDS`` JSON-able documents (empty ones too), or only those in
    ``only``."""
    wanted = range(SHARDS) if only is None else sorted(only)
    parts: dict[int, dict[NodeName, NodeMemory]] = {i: {} for i in wanted}
    for name, nm in memory.nodes.items():
        part = parts.get(shard_of(name))
        if part is not None:
            part[name] = nm
    return {
        i: {
            "memoryVersion": MEMORY_VERSION,
            "nodes": _NODES.dump_python(p, mode="json", by_alias=True),
        }
        for i, p in parts.items()
    }


def from_shards(docs: Iterable[Mapping[str, Any]]) -> HardwareMemory:
    """Inverse of ``to_shards`` (any subset of the shards); raises
    ``HardwareMemoryError`` naming the field of a bad document."""
    nodes: dict[NodeName, NodeMemory] = {}
    for doc in docs:
        version = doc.get("memoryVersion", MEMORY_VERSION)
        if version != MEMORY_VERSION:
            raise HardwareMemoryError(f"memoryVersion {version!r} is not {MEMORY_VERSION}")
        try:
            nodes.update(_NODES.validate_python(doc.get("nodes") or {}))
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise HardwareMemoryError(f"memory.nodes.{loc}: {first['msg']}") from e
    return HardwareMemory(nodes=nodes)


_NODES: TypeAdapter[dict[NodeName, NodeMemory]] = TypeAdapter(dict[NodeName, NodeMemory])
