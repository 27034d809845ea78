"""Rank bodies for test_nvrx_compat_ranks: NVRx's call orders on real gloo CPU ranks.

Each body writes what the test checks into ``out_dir/rank<r>.pkl``; reports travel
pickled (NaN scores do not compare equal, and a Report pickles like NVRx's).
"""

from __future__ import annotations

import os
import pickle
import random
import time
from typing import Any

import torch
import torch.distributed as dist

from pacekeeper import detector as straggler
from pacekeeper.detector import gather


def save(out_dir: str, rank: int, result: dict[str, Any]) -> None:
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)


def _work(rank: int, slow_rank: int | None, ms: float = 6.0) -> None:
    with straggler.Detector.detection_section("fwd", profile_cuda=True):
        time.sleep((2 * ms if rank == slow_rank else ms) / 1000.0)


def initialize_before_init_process_group(
    rank: int, world_size: int, store_file: str, out_dir: str
) -> None:
    """NVRx's example order: ``Detector.initialize`` first, then ``init_process_group``;
    rank 1 is twice as slow in ``fwd``."""
    straggler.Detector.initialize(gather_on_rank0=True, node_name=f"node{rank}")
    before = (straggler.Detector.reporter.rank, straggler.Detector.reporter.world_size)
    gather.join_gloo_world(rank, world_size, store_file)

    for _ in range(12):
        _work(rank, slow_rank=1)
    report = straggler.Detector.generate_report()
    after = (straggler.Detector.reporter.rank, straggler.Detector.reporter.world_size)

    # The interval path too: report_time_interval=0 reports every iteration once the
    # step time is known (after 16 steps), on every rank at the same iteration.
    straggler.Detector.shutdown()
    straggler.Detector.initialize(report_time_interval=0, node_name=f"node{rank}")
    elapsed_at = []
    for i in range(20):
        _work(rank, slow_rank=None, ms=1.0)
        assert i == straggler.Detector.report_interval_tracker.current_iter  # type: ignore[union-attr]
        interval_report = straggler.Detector.generate_report_if_interval_elapsed()
        if straggler.Detector.is_interval_elapsed():
            elapsed_at.append(straggler.Detector.report_interval_tracker.current_iter)  # type: ignore[union-attr]
            assert (interval_report is not None) == (rank == 0)
    straggler.Detector.shutdown()
    # Registered: WORLD alone (the detector's group is outside torch's registry) ...
    groups = len(dist.distributed_c10d._world.pg_names)
    # ... and the detector's, made once and kept for the second run.
    from pacekeeper.detector import report_group

    made = sum(report_group._made.values())
    save(
        out_dir,
        rank,
        {
            "report": pickle.dumps(report),
            "before": before,
            "after": after,
            "elapsed_at": elapsed_at,
            "groups": groups,
            "made": made,
            "errors": straggler.Detector.internal_errors(),
        },
    )


def one_rank_skips_a_report(rank: int, world_size: int, out_dir: str, timeout_s: float) -> None:
    """Rank 1 skips one ``generate_report``: the others give up within the detector's
    timeout, and the job's WORLD group goes on working."""
    straggler.Detector.initialize(report_timeout_s=timeout_s, node_name=f"node{rank}")
    for _ in range(4):
        _work(rank, slow_rank=None, ms=1.0)
    first = straggler.Detector.generate_report()  # creates the detector's group

    skipped_s = None
    skipped: Any = "not called"
    if rank != 1:
        t0 = time.monotonic()
        skipped = straggler.Detector.generate_report()
        skipped_s = time.monotonic() - t0

    t = torch.ones(1)
    dist.all_reduce(t)  # training's group: untouched by the detector's timeout
    world_sum = float(t.item())

    t0 = time.monotonic()
    later = straggler.Detector.generate_report()  # every rank: the group is abandoned
    later_s = time.monotonic() - t0
    t = torch.full((1,), float(rank))
    dist.all_reduce(t)
    world_sum_after = float(t.item())
    errors = straggler.Detector.internal_errors()
    straggler.Detector.shutdown()
    save(
        out_dir,
        rank,
        {
            "first_ok": first is not None,
            "skipped": skipped,
            "skipped_s": skipped_s,
            "world_sum": world_sum,
            "later": later,
            "later_s": later_s,
            "world_sum_after": world_sum_after,
            "errors": errors,
        },
    )


class CallableModule:
    """NVRx's test_wrap_callables targets."""

    def callable1(self, sleep_s: float = 0.0) -> None:
        pass

    @staticmethod
    def callable2() -> None:
        pass

    @classmethod
    def callable3(cls, sleep_s: float) -> None:
        time.sleep(sleep_s)

    def callable4(self) -> None:
        pass


def nvrx_usage_forms(rank: int, world_size: int, out_dir: str) -> None:
    """The forms NVRx's own multi-rank tests use: a bare score name, ``CallableId`` with
    ``ignored_args``, ``gather_on_rank0=False``, ``Detector.reporter``'s attributes."""
    straggler.Detector.initialize(scores_to_compute="individual_perf_scores", gather_on_rank0=True)
    for _ in range(6):
        _work(rank, slow_rank=None, ms=1.0)
    bare = straggler.Detector.generate_report()
    straggler.Detector.shutdown()

    instance = CallableModule()
    straggler.Detector.initialize(gather_on_rank0=False)
    ids = [
        straggler.CallableId(instance, "callable1"),
        straggler.CallableId(CallableModule, "callable2"),
        straggler.CallableId(CallableModule, "callable3"),
        straggler.CallableId(CallableModule, "callable4", ignored_args=("self",)),
    ]
    straggler.Detector.wrap_callables(callable_ids=ids)
    originals = set(straggler.Detector.original_callables)
    for _ in range(10):
        instance.callable1()
        CallableModule.callable2()
        CallableModule.callable3(0.001)
        instance.callable4()
    straggler.Detector.restore_original_callables()
    for _ in range(3):  # not recorded any more
        instance.callable1()
        CallableModule.callable3(0.001)
    own = straggler.Detector.generate_report()
    view = straggler.Detector.reporter
    reporter = {
        "rank": view.rank,
        "world_size": view.world_size,
        "gather_on_rank0": view.gather_on_rank0,
        "rel": view.is_computing_rel_scores,
        "indiv": view.is_computing_indiv_scores,
    }
    straggler.Detector.shutdown()

    # report_backend="job": NVRx's way, on the job's group; no group of the detector's.
    straggler.Detector.initialize(report_backend="job")
    _work(rank, slow_rank=None, ms=1.0)
    on_job = straggler.Detector.generate_report()
    straggler.Detector.shutdown()
    groups = len(dist.distributed_c10d._world.pg_names)
    from pacekeeper.detector import report_group

    made = sum(report_group._made.values())
    save(
        out_dir,
        rank,
        {
            "bare": pickle.dumps(bare),
            "own": pickle.dumps(own),
            "originals": originals == set(ids),
            "reporter": reporter,
            "on_job": on_job is not None,
            "groups": groups,
            "made": made,
        },
    )


def jittery_cadence(
    rank: int, world_size: int, out_dir: str, run: tuple[int, float, float]
) -> None:
    """NVRx's interval path at its defaults but a nonzero interval: ``run`` is (steps,
    step_s, interval_s); steps of ``step_s`` +-5% (each rank its own draw), 7% slower
    in every other stretch of 150 (the job's speed changes, and with it the count), each
    ending at its deadline so the load of a shared machine does not change the job's speed
    (a late step is followed by a shorter one; a stall of more than two steps is one
    long step), ``generate_report_if_interval_elapsed`` after each; the clock reading
    before each call and the report iterations are saved."""
    steps, step_s, interval_s = run
    rng = random.Random(1000 + rank)
    straggler.Detector.initialize(report_time_interval=interval_s, node_name=f"node{rank}")
    calls: list[float] = []
    reported: list[int] = []
    deadline = time.monotonic()
    for i in range(steps):
        with straggler.Detector.detection_section("step", profile_cuda=False):
            base = step_s * (1.07 if (i // 150) % 2 else 1.0)
            deadline += base * (1 + rng.uniform(-0.05, 0.05))
            late = time.monotonic() - deadline
            if late < 0:
                time.sleep(-late)
            elif late > 2 * step_s:
                deadline += late
        calls.append(time.monotonic())
        straggler.Detector.generate_report_if_interval_elapsed()
        if straggler.Detector.is_interval_elapsed():
            reported.append(straggler.Detector.report_interval_tracker.current_iter)  # type: ignore[union-attr]
    errors = straggler.Detector.internal_errors()
    straggler.Detector.shutdown()
    save(out_dir, rank, {"calls": calls, "reported": reported, "errors": errors})
