"""Where the memory of hardware (``core/hardware_memory``) lives between reconciles.

One ConfigMap per shard, ``pacekeeper-hardware-000`` … ``-127``, in the controller's own
namespace next to the rest of its state (nothing a training job can write): a full
shard at the memory's bounds stays under the 1 MiB a ConfigMap may hold
(``tests/unit/controller/test_hardware_memory.py`` measures it). A shard is written
whole (PUT) with the resourceVersion it was read at, like every state ConfigMap, and
only when its content changed; a shard no node falls into is never created.

Writes are spread out, because every report of every job teaches the memory something:
anything that can change a decision — a new GPU or node, a slow window, a new job
record, a first learned factor — is written at once; a shard whose only change is
healthy windows (a factor's slow drift, the recent windows, the decayed counts) waits
up to ``SAVE_EVERY_S`` (5 minutes) since its last write: a large job changes every
shard at every report. A controller restart therefore loses at most that much of
healthy history, which can only delay a calibration step or a recovery (never cause an
action). Without ``reuse_reads`` nothing is held back: a store
that re-reads every time has nowhere to keep what it did not write.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from pacekeeper.controller.core.hardware_memory import (
    MEMORY_VERSION,
    SHARDS,
    HardwareMemory,
    HardwareMemoryError,
    NodeMemory,
    from_shards,
    shard_of,
    to_shards,
)
from pacekeeper.controller.core.ids import NodeName
from pacekeeper.controller.core.state import StateError

HARDWARE_PREFIX = "pacekeeper-hardware-"
HARDWARE_KEY = "memory.json"
HARDWARE_LABEL = {"pacekeeper.dev/state": "hardware"}
SAVE_EVERY_S = 300.0
_EMPTY: dict[str, Any] = {"memoryVersion": MEMORY_VERSION, "nodes": {}}

Get = Callable[[str], "dict[str, Any] | None"]
"""Read one of our ConfigMaps as the server holds it (None: there is none)."""
Write = Callable[[str, "str | None", Mapping[str, str], Mapping[str, str]], "str | None"]
"""Create (no resourceVersion) or replace one; returns the new resourceVersion."""


def shard_name(shard: int) -> str:
    return f"{HARDWARE_PREFIX}{shard:03d}"


def _decisive(doc: Mapping[str, Any]) -> set[tuple[Any, ...]]:
    """What in a shard can change a decision: which GPUs it holds, whether each has a
    factor, and each job record's slow windows."""
    out: set[tuple[Any, ...]] = set()
    for node, nm in (doc.get("nodes") or {}).items():
        for uuid, g in (nm.get("gpus") or {}).items():
            out.add((node, uuid, (g.get("learned") or 0) > 0))
            for s in g.get("services") or ():
                out.add((node, uuid, s.get("job"), s.get("since"), s.get("slowWindows") or 0))
    return out


class HardwareStore:
    """The shards of one memory; called under the reconciler's cluster lock."""

    def __init__(
        self,
        get: Get,
        write: Write,
        *,
        reuse_reads: bool = False,
        save_every_s: float = SAVE_EVERY_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._get = get
        self._write = write
        self.reuse_reads = reuse_reads
        self._save_every_s = save_every_s
        self._monotonic = monotonic
        self._rv: dict[int, str | None] = {}
        self._stored: dict[int, dict[str, Any]] = {}
        """Each shard's document as the server holds it (as read or last written)."""
        self._stored_at: dict[int, float] = {}
        self._base: dict[NodeName, NodeMemory] = {}
        """The nodes as the stored shards hold them: a node whose value is not the very
        object kept here changed since, and only its shard is serialised again."""
        self._loaded = False
        self._copy: HardwareMemory | None = None
        """The newest memory, unsaved changes included (``reuse_reads``)."""
        self.writes = 0
        """Shard writes so far (tests and metrics)."""

    def forget(self) -> None:
        """Read again next time (a write met a newer version, or failed)."""
        self._copy = None
        self._loaded = False
        self._rv.clear()
        self._stored.clear()
        self._stored_at.clear()
        self._base.clear()

    def load(self) -> HardwareMemory:
        if self.reuse_reads and self._copy is not None:
            return self._copy
        nodes: dict[NodeName, NodeMemory] = {}
        now = self._monotonic()
        for i in range(SHARDS):
            cm = self._get(shard_name(i))
            self._stored_at[i] = now
            if cm is None:
                self._rv[i] = None
                self._stored[i] = _EMPTY
                continue
            self._rv[i] = (cm.get("metadata") or {}).get("resourceVersion")
            raw = (cm.get("data") or {}).get(HARDWARE_KEY)
            try:
                doc = json.loads(raw) if raw else _EMPTY
                part = from_shards([doc])
            except (HardwareMemoryError, json.JSONDecodeError) as e:
                # Never act on a memory we cannot read: as for the cluster state, the
                # operator treats it as fatal for the cycle rather than forget a GPU.
                raise StateError(f"ConfigMap {shard_name(i)}: {e}") from e
            # The canonical form, so that an unchanged shard compares equal.
            self._stored[i] = to_shards(part, (i,))[i]
            nodes.update(part.nodes)  # each shard validated once, here
        loaded = HardwareMemory(nodes=nodes)
        self._base = dict(loaded.nodes)
        self._loaded = True
        if self.reuse_reads:
            self._copy = loaded
        return loaded

    def save(self, memory: HardwareMemory) -> int:
        """Write the shards whose content changed (now, or when only healthy history
        changed and the shard's last write is ``SAVE_EVERY_S`` old); how many were
        written. A 409 propagates after the store forgot what it held."""
        if not self._loaded:
            self.load()
        base, nodes = self._base, memory.nodes
        dirty: dict[int, list[NodeName]] = {}
        for n, nm in nodes.items():
            if base.get(n) is not nm:
                dirty.setdefault(shard_of(n), []).append(n)
        for n in base:
            if n not in nodes:
                dirty.setdefault(shard_of(n), []).append(n)  # forgotten since
        written = 0
        now = self._monotonic()
        try:
            for i, doc in to_shards(memory, dirty).items():
                stored = self._stored.get(i, _EMPTY)
                if doc != stored:
                    recent = now - self._stored_at.get(i, -math.inf) < self._save_every_s
                    if self.reuse_reads and recent and _decisive(doc) == _decisive(stored):
                        continue  # healthy windows only: they wait for a later write
                    data = {HARDWARE_KEY: json.dumps(doc, sort_keys=True, separators=(",", ":"))}
                    self._rv[i] = self._write(shard_name(i), self._rv.get(i), data, HARDWARE_LABEL)
                    self._stored[i] = doc
                    self._stored_at[i] = now
                    written += 1
                for n in dirty[i]:
                    if n in nodes:
                        base[n] = nodes[n]
                    else:
                        base.pop(n, None)
        except Exception:
            self.forget()
            raise
        self.writes += written
        if self.reuse_reads:
            self._copy = memory
        return written
