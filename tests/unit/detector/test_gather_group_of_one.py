"""A process group of one member has nobody to hear from: no collective is issued."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed as dist

from pacekeeper.detector import gather


@pytest.fixture
def world_of_one(tmp_path: Path) -> Iterator[gather.GroupInfo]:
    gather.join_gloo_world(0, 1, str(tmp_path / "store"))
    try:
        yield gather.describe_group()
    finally:
        gather.leave_world()


@pytest.fixture
def collectives(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    called: list[str] = []
    for name in ("gather_object", "all_gather_object", "all_reduce"):
        real = getattr(dist, name)

        def spy(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            called.append(_name)
            return _real(*args, **kw)  # type: ignore[operator]

        monkeypatch.setattr(dist, name, spy)
    return called


def test_a_world_of_one_gathers_and_agrees_without_a_collective(
    world_of_one: gather.GroupInfo, collectives: list[str]
) -> None:
    assert world_of_one.distributed and world_of_one.group_size == 1
    assert gather.gather_to_reporter("payload", world_of_one, None) == ["payload"]
    assert gather.all_gather("payload", world_of_one, None) == ["payload"]
    assert gather.all_reduce_max(2.5, world_of_one, None) == 2.5
    assert collectives == []
