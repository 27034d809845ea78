"""The memory's shards in ConfigMaps (``runtime/hardware_store``) over an in-memory stand-in
of the API: only changed shards are written, healthy history waits, evidence does not,
and a writer that finds a newer version reads again."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pacekeeper.controller.core import hardware_memory as hm
from pacekeeper.controller.core.hardware_memory import HardwareMemory, Observation
from pacekeeper.controller.core.ids import NodeName
from pacekeeper.controller.core.policy import HardwareMemorySettings
from pacekeeper.controller.core.state import StateError
from pacekeeper.controller.runtime.hardware_store import (
    HARDWARE_KEY,
    SAVE_EVERY_S,
    HardwareStore,
    shard_name,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SETTINGS = HardwareMemorySettings()
GPU = "GPU-00000000-0001-4000-8000-000000000000"


class Conflict(Exception):
    """What the API answers a write with a stale resourceVersion (409)."""


class ConfigMaps:
    """ConfigMaps by name, with resourceVersions checked on replace."""

    def __init__(self) -> None:
        self.maps: dict[str, dict[str, Any]] = {}
        self.writes: list[str] = []
        self.version = 0

    def get(self, name: str) -> dict[str, Any] | None:
        return self.maps.get(name)

    def write(
        self, name: str, rv: str | None, data: Mapping[str, str], labels: Mapping[str, str]
    ) -> str:
        current = self.maps.get(name)
        if (current is None) != (rv is None) or (
            current is not None and current["metadata"]["resourceVersion"] != rv
        ):
            raise Conflict(name)
        self.version += 1
        meta = {"name": name, "resourceVersion": str(self.version), "labels": dict(labels)}
        self.maps[name] = {"metadata": meta, "data": dict(data)}
        self.writes.append(name)
        return str(self.version)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def window(
    memory: HardwareMemory, node: str, ratio: float, minute: int, job: str = "ml/a"
) -> HardwareMemory:
    return hm.observe(
        memory, [Observation(NodeName(node), GPU, ratio, False)], job=job, since=T0,
        at=T0 + timedelta(minutes=minute), window_s=60.0, settings=SETTINGS,
    )  # fmt: skip


def store(api: ConfigMaps, clock: Clock, *, reuse: bool = True) -> HardwareStore:
    return HardwareStore(api.get, api.write, reuse_reads=reuse, monotonic=clock)


def test_only_the_shards_that_hold_nodes_are_written() -> None:
    api, clock = ConfigMaps(), Clock()
    s = store(api, clock)
    memory = window(window(s.load(), "node-a", 1.0, 1), "node-b", 1.0, 1)
    assert s.save(memory) == len({hm.shard_of("node-a"), hm.shard_of("node-b")})
    assert set(api.writes) == {shard_name(hm.shard_of(n)) for n in ("node-a", "node-b")}
    assert s.save(memory) == 0  # nothing changed: nothing written


def test_healthy_windows_wait_while_evidence_is_written_at_once() -> None:
    api, clock = ConfigMaps(), Clock()
    s = store(api, clock)
    memory = window(s.load(), "node-a", 1.0, 1)
    s.save(memory)
    memory = window(memory, "node-a", 1.0, 2)
    assert s.save(memory) == 0  # healthy history only, just written: it waits
    clock.t += SAVE_EVERY_S
    assert s.save(memory) == 1
    memory = window(memory, "node-a", 0.5, 3)  # a slow window: evidence
    assert s.save(memory) == 1
    fresh = store(api, clock).load()  # what a restarted controller reads
    g = fresh.gpu("node-a", GPU)
    assert g is not None and g.services[0].slow_windows == 1 and g.services[0].windows == 3


def test_a_store_that_reads_every_time_holds_nothing_back() -> None:
    api, clock = ConfigMaps(), Clock()
    s = store(api, clock, reuse=False)
    memory = window(s.load(), "node-a", 1.0, 1)
    s.save(memory)
    memory = window(memory, "node-a", 1.0, 2)
    assert s.save(memory) == 1
    assert store(api, clock).load() == HardwareMemory(nodes=memory.nodes)


def test_a_newer_version_written_by_someone_else_is_read_again_not_overwritten() -> None:
    api, clock = ConfigMaps(), Clock()
    mine = store(api, clock)
    memory = window(mine.load(), "node-a", 1.0, 1)
    mine.save(memory)
    other = store(api, clock)
    other.save(window(other.load(), "node-a", 0.5, 2, job="ml/b"))
    with pytest.raises(Conflict):
        mine.save(window(memory, "node-a", 0.4, 3))
    again = mine.load()  # forgot its copy: the other writer's record is there
    g = again.gpu("node-a", GPU)
    assert g is not None and {s.job for s in g.services} == {"ml/a", "ml/b"}


def test_a_shard_that_cannot_be_read_stops_the_cycle_naming_it() -> None:
    api, clock = ConfigMaps(), Clock()
    name = shard_name(hm.shard_of("node-a"))
    api.maps[name] = {"metadata": {"resourceVersion": "1"}, "data": {HARDWARE_KEY: "{not json"}}
    with pytest.raises(StateError, match=name):
        store(api, clock).load()
