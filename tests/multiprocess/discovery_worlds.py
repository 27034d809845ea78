"""Rank bodies for the topology-discovery tests: each builds a layout the way a job
does (a DeviceMesh, plain process groups, a Megatron-style ``parallel_state``) and
calls nothing of the detector's but sections and reports; then the same run again
with ``set_topology``. Each rank's report coordinates go to a pickle."""

from __future__ import annotations

import os
import pickle
import sys
import time
import types
from typing import Any

import torch
import torch.distributed as dist
from sleeping_backward import SleepingBackward

from pacekeeper.detector import Detector

STEPS = 4


def _one_run(setup: Any) -> dict[str, Any]:
    """One detector run: ``setup()`` (may call ``set_topology``), a few steps, a report;
    this rank's ``group``/``coords`` in its ScoreReport, and the internal errors."""
    Detector.initialize(report_time_interval=3600, kernel_timing="none", gather_on_rank0=False)
    setup()
    for _ in range(STEPS):
        with Detector.detection_section("work", profile_cuda=False):
            time.sleep(0.002)
    Detector.generate_report()
    latest = Detector.latest_score_report()
    errors = Detector.internal_errors()
    Detector.shutdown()
    me = next(r for r in latest.ranks if r.rank == dist.get_rank()) if latest else None
    return {
        "coords": None if me is None else me.coords,
        "group": None if me is None else me.group,
        "errors": errors,
    }


def _save(out_dir: str, rank: int, found: dict[str, Any], given: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"found": found, "given": given}, f)


def mesh_world(rank: int, world_size: int, out_dir: str) -> None:
    """A (pp=2, dp=2, tp=2) DeviceMesh over 8 ranks, as torchtitan builds one."""
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("pp", "dp", "tp"))
    mesh["dp", "tp"]._flatten("dp_tp")  # a flattened dimension: no coordinate of its own
    found = _one_run(lambda: None)
    given = _one_run(lambda: Detector.set_topology(mesh=mesh))
    _save(out_dir, rank, found, given)


def groups_world(rank: int, world_size: int, out_dir: str) -> None:
    """Hand-made groups over 8 ranks: 2 pipeline stages of 4 ranks (outermost), 2
    data-parallel replicas, tensor-parallel pairs; every rank makes every group, as
    ``new_group`` requires. No group is described."""
    made: dict[str, Any] = {}
    for name, stride, size in (("pp", 4, 2), ("dp", 2, 2), ("tp", 1, 2)):
        block = stride * size
        for start in range(world_size):
            if start % block >= stride:
                continue
            ranks = list(range(start, start + block, stride))
            group = dist.new_group(ranks)
            if rank in ranks:
                made[name] = group
    found = _one_run(lambda: None)
    given = _one_run(lambda: Detector.set_topology(groups=made))
    _save(out_dir, rank, found, given)


def _parallel_state(rank: int) -> types.ModuleType:
    """A stand-in for ``megatron.core.parallel_state`` with its public functions: tp=2,
    cp=1, dp=2, pp=2 over 8 ranks in Megatron's order (tp innermost, pp outermost)."""
    ps = types.ModuleType("megatron.core.parallel_state")
    ps.model_parallel_is_initialized = lambda: True  # type: ignore[attr-defined]
    ps.get_tensor_model_parallel_rank = lambda: rank % 2  # type: ignore[attr-defined]
    ps.get_context_parallel_rank = lambda: 0  # type: ignore[attr-defined]
    ps.get_data_parallel_rank = lambda: (rank // 2) % 2  # type: ignore[attr-defined]
    ps.get_pipeline_model_parallel_rank = lambda: rank // 4  # type: ignore[attr-defined]
    return ps


def megatron_world(rank: int, world_size: int, out_dir: str) -> None:
    """The job imported Megatron's ``parallel_state`` and initialised it; Megatron's
    groups are not made (only its module speaks), so only that source can find them."""
    ps = _parallel_state(rank)
    for name in ("megatron", "megatron.core"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["megatron.core.parallel_state"] = ps
    found = _one_run(lambda: None)
    coords = {
        "dp": ps.get_data_parallel_rank(),
        "pp": ps.get_pipeline_model_parallel_rank(),
        "tp": ps.get_tensor_model_parallel_rank(),
        "cp": ps.get_context_parallel_rank(),
    }  # docs/detector.md's set_topology example for Megatron
    given = _one_run(lambda: Detector.set_topology(coords=coords))
    _save(out_dir, rank, found, given)


# --- DDP without watch_ddp ------------------------------------------------------------

SLOW_RANK = 2
SLOWDOWN = 2.6
DDP_MS = {"forward": 60.0, "backward": 60.0, "step": 20.0}
"""A healthy rank's work per step: long enough that a loaded 2-core machine's scheduling
delays (tens of ms with four ranks waking at once after each reduction) stay well
inside the act line's margin."""
DDP_STEPS = 40
DDP_REPORT_EVERY = 10


class _Model(torch.nn.Module):
    def __init__(self, forward_s: float, backward_s: float) -> None:
        super().__init__()
        self.first = torch.nn.Linear(32, 32)
        self.last = torch.nn.Linear(32, 1)
        self.forward_s, self.backward_s = forward_s, backward_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.forward_s)
        return self.last(SleepingBackward.apply(self.first(x), self.backward_s))


def ddp_world(rank: int, world_size: int, out_dir: str) -> None:
    """A plain DDP script: the detector initialised after the model is wrapped, sections
    around forward, backward and the optimizer step, no ``watch_ddp``; rank
    ``SLOW_RANK``'s forward takes ``SLOWDOWN`` times as long."""
    torch.manual_seed(0)
    torch.set_num_threads(1)  # four ranks on a small machine: no intra-op thread pools
    forward_s = DDP_MS["forward"] / 1000 * (SLOWDOWN if rank == SLOW_RANK else 1.0)
    model = torch.nn.parallel.DistributedDataParallel(_Model(forward_s, DDP_MS["backward"] / 1000))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"n{rank}")
    x = torch.randn(8, 32)
    reports = []
    for it in range(1, DDP_STEPS + 1):
        with Detector.detection_section("forward", profile_cuda=False):
            loss = model(x).sum()
        with Detector.detection_section("backward", profile_cuda=False):
            loss.backward()
        with Detector.detection_section("step", profile_cuda=False):
            time.sleep(DDP_MS["step"] / 1000)
            opt.step()
            opt.zero_grad()
        if it % DDP_REPORT_EVERY == 0:
            Detector.generate_report()
            reports.append(Detector.latest_score_report())
    errors = Detector.internal_errors()
    Detector.shutdown()
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"reports": reports, "errors": errors}, f)


def pipelining_world(rank: int, world_size: int, out_dir: str) -> None:
    """A ``torch.distributed.pipelining`` job of one pipeline, a stage per rank, on the
    default group: no process group says "pipeline", only the stage object does."""
    from torch.distributed.pipelining import PipelineStage

    stage = PipelineStage(torch.nn.Linear(4, 4), rank, world_size, torch.device("cpu"))
    found = _one_run(lambda: None)
    pp = stage.group_rank
    given = _one_run(lambda: Detector.set_topology(coords={"pp": pp}))
    del stage
    _save(out_dir, rank, found, given)
