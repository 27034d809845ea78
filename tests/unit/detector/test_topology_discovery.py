"""Topology discovery's rules in a real one-rank gloo world: ``set_topology`` wins,
Megatron's ``parallel_state`` is read from ``sys.modules`` only when initialised, the
answer is cached until a signal changes, a failing source never reaches the training
loop, and a DDP model found by the detector keeps a hook the job registers later."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from pacekeeper.detector import Detector
from pacekeeper.detector.topology import Topology
from pacekeeper.detector.topology_discovery import MEGATRON, Discovery


@pytest.fixture
def one_rank_world(tmp_path: Path) -> Iterator[None]:
    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.fixture
def megatron(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """A Megatron-style ``parallel_state`` in ``sys.modules``; counts its reads."""
    calls = types.SimpleNamespace(ready=False, reads=0, fail=False)
    ps = types.ModuleType(MEGATRON)

    def rank(value: int) -> Any:
        def get() -> int:
            calls.reads += 1
            if calls.fail:
                raise RuntimeError("pipeline model parallel group is not initialized")
            return value

        return get

    ps.model_parallel_is_initialized = lambda: calls.ready  # type: ignore[attr-defined]
    ps.get_data_parallel_rank = rank(0)  # type: ignore[attr-defined]
    ps.get_pipeline_model_parallel_rank = rank(3)  # type: ignore[attr-defined]
    ps.get_tensor_model_parallel_rank = rank(1)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, MEGATRON, ps)
    return calls


def _report_coords() -> Any:
    for _ in range(2):
        with Detector.detection_section("work", profile_cuda=False):
            pass
    Detector.generate_report()
    latest = Detector.latest_score_report()
    assert latest is not None
    return latest.ranks[0].coords


def test_megatron_is_read_once_initialised_and_then_cached(
    one_rank_world: None, megatron: types.SimpleNamespace
) -> None:
    found = Discovery()
    assert not found.at_report(Topology()).coords  # imported, not initialised
    assert megatron.reads == 0
    megatron.ready = True
    got = found.at_report(Topology())
    assert (got.coords, got.found, found.source) == ({"dp": 0, "pp": 3, "tp": 1}, True, "megatron")
    reads = megatron.reads
    assert found.at_report(got) is got  # no signal changed: nothing read again
    assert megatron.reads == reads


def test_set_topology_wins_over_what_is_found(
    one_rank_world: None, megatron: types.SimpleNamespace
) -> None:
    megatron.ready = True
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="n0")
    assert _report_coords() == {"dp": 0, "pp": 3, "tp": 1}
    Detector.set_topology(coords={"pp": 7})
    assert _report_coords() == {"pp": 7}
    assert Detector.internal_errors() == {}


def test_a_failing_source_is_counted_and_the_report_goes_on(
    one_rank_world: None, megatron: types.SimpleNamespace
) -> None:
    megatron.ready, megatron.fail = True, True
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="n0")
    assert _report_coords() is None
    assert Detector.internal_errors() == {"topology.discover": 1}


def test_no_discovery_when_switched_off(
    one_rank_world: None, megatron: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACEKEEPER_DISCOVERY", "off")
    megatron.ready = True
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="n0")
    assert _report_coords() is None


def test_a_ddp_model_is_watched_and_a_later_job_hook_runs_inside(one_rank_world: None) -> None:
    from pacekeeper.detector import collectives

    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="n0")
    assert getattr(model, collectives._WATCHED, False)  # found at initialize
    assert Detector.watch_ddp(model)  # asking again is no error
    seen: list[int] = []

    def job_hook(state: Any, bucket: Any) -> Any:
        seen.append(state)
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(bucket.buffer())
        return fut

    job_hook.__annotations__.clear()  # DDP checks real annotations; these are strings
    model.register_comm_hook(5, job_hook)  # the job's own hook, after ours: no error
    with pytest.raises(RuntimeError, match="only be called once"):
        model.register_comm_hook(None, job_hook)
    collectives.DDP_READY_NS[0] = 0
    model(torch.ones(2, 4)).sum().backward()
    assert seen == [5]  # the job's hook reduced the gradients
    assert collectives.DDP_READY_NS[0] > 0  # and ours marked the last bucket
    collectives.DDP_READY_NS[0] = 0


def test_a_ddp_model_built_later_is_watched_when_wrapped_or_at_the_first_report(
    one_rank_world: None,
) -> None:
    from pacekeeper.detector import collectives
    from pacekeeper.detector.wrapping import CallableId

    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name="n0")
    wrapped = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    later = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    assert not getattr(wrapped, collectives._WATCHED, False)
    Detector.wrap_callables([CallableId(wrapped, "forward")])
    assert getattr(wrapped, collectives._WATCHED, False)
    assert not getattr(later, collectives._WATCHED, False)
    _report_coords()
    assert getattr(later, collectives._WATCHED, False)
    assert Detector.internal_errors() == {}
