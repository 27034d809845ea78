"""Structure without a layout (issue 39): reports that carry no ``group`` or ``coords``
(a drop-in job), a slow set present from the job's first windows, stable in size (its
size moving window to window), on a regular pattern of ranks, is WorkloadStructure
naming the pattern; what becomes slow mid-job — one rank, one node, one rank of the
heavier stage, or the whole stage slowing further — is judged as usual."""

from __future__ import annotations

import numpy as np
import pytest
from controller_builders import Loop, acts, policy_doc
from topology_builders import feed

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.policy import NODE_ACTIONS
from pacekeeper.controller.core.state import State
from pacekeeper.controller.core.structure_pattern import Pattern, fit

POLICY = {
    "score": {"kind": "gpuRelative", "reference": "peerMedian"},
    "thresholds": {"act": 0.9, "recover": 0.95},
}
WORLD = 16
STAGE = range(12, 16)  # the last of 4 pipeline stages, pipeline outermost
EARLY, LATE = 4, 16


def _scores(rng: np.random.Generator, heavy: range | list[int], extra: float) -> dict[int, float]:
    """Healthy ranks near 1.0; ``heavy`` slower by ``extra`` more work, the size of it
    moving from window to window (+-8 points)."""
    out = {r: float(min(1.0, 1.0 - abs(rng.normal(0, 0.005)))) for r in range(WORLD)}
    size = extra * (1.0 + rng.uniform(-0.25, 0.25))
    for r in heavy:
        out[r] = out[r] / (1.0 + size)
    return out


def _run(
    per_node: int,
    heavy: range | list[int] = STAGE,
    later: dict[int, float] | None = None,
    seed: int = 0,
) -> Loop:
    """EARLY reports of the job as it starts, then LATE with ``later`` (rank -> factor
    its score is divided by) on top."""
    rng = np.random.default_rng(seed)
    loop = Loop(policy_doc(POLICY), WORLD)
    for i in range(EARLY + LATE):
        s = _scores(rng, heavy, 0.3)
        if i >= EARLY:
            s = {r: v / (later or {}).get(r, 1.0) for r, v in s.items()}
        feed(loop, s, per_node=per_node)
    return loop


def _acted_ranks(loop: Loop) -> set[int]:
    return {r for d in loop.log if d.action is not None for r in d.evidence.get("ranks", [])}


def test_regular_patterns_are_fitted() -> None:
    measured = range(WORLD)
    # A contiguous block: the last stage, pipeline outermost.
    assert fit([12, 13, 14, 15], measured, WORLD) == Pattern(4, 4, 3)
    # A stride: the pipeline innermost, stage 3 is every 4th rank from 3.
    assert fit([3, 7, 11, 15], measured, WORLD) == Pattern(1, 4, 3)
    # A block repeated across replicas: tp 2 innermost, then pp 4, then dp 2.
    assert fit([6, 7, 14, 15], measured, WORLD) == Pattern(2, 4, 3)
    # Under noise a rank of it may not be slow yet: half of the block still fits it.
    assert fit([14, 15], measured, WORLD) == Pattern(2, 8, 7)
    # One rank slow on its own beside the stage: the stage still fits, the rank is not in it.
    p = fit([0, 12, 13, 14, 15], measured, WORLD)
    assert p == Pattern(4, 4, 3) and not p.members(np.array([0]))[0]


def test_no_pattern_in_one_rank_or_scattered_ranks() -> None:
    assert fit([5], range(WORLD), WORLD) is None
    assert fit([1, 6, 11], range(WORLD), WORLD) is None
    assert fit([], range(WORLD), WORLD) is None


@pytest.mark.parametrize("per_node", [2, 4, 8])
def test_a_heavier_last_stage_without_coordinates_is_structure(per_node: int) -> None:
    loop = _run(per_node)
    assert acts(loop.log) == []
    held = [d for d in loop.log if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert len(held) == EARLY + LATE
    ev = held[-1].evidence
    assert ev["alignment"] == "pattern" and (ev["block"], ev["period"], ev["index"]) == (4, 4, 3)
    assert ev["pattern"].startswith("ranks 12-15")
    assert ev["alignedRanks"] == [12, 13, 14, 15]


@pytest.mark.parametrize(
    "heavy",
    [[3, 7, 11, 15], [6, 7, 14, 15]],
    ids=["stride", "block-per-replica"],
)
def test_strides_and_blocks_across_replicas_are_structure(heavy: list[int]) -> None:
    loop = _run(4, heavy)
    assert acts(loop.log) == []
    ev = [d for d in loop.log if d.reason is Reason.WORKLOAD_STRUCTURE][-1].evidence
    assert ev["alignedRanks"] == heavy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_rank_of_the_heavier_stage_slowed_mid_job_is_named(seed: int) -> None:
    loop = _run(4, later={13: 1.15}, seed=seed)
    assert _acted_ranks(loop) == {13}


def test_one_rank_of_a_two_rank_stride_slowed_mid_job_is_named_alone() -> None:
    # Two replicas of an 8-stage pipeline, the stage innermost: the last stage is 7 and 15.
    loop = _run(4, heavy=[7, 15], later={15: 1.15})
    assert _acted_ranks(loop) == {15}


def test_one_rank_slowed_mid_job_outside_the_stage_is_named() -> None:
    loop = _run(4, later={5: 1.3})
    assert _acted_ranks(loop) == {5}


def test_one_node_slowed_mid_job_is_a_node_finding() -> None:
    # Ranks 4..7 fill node 1: a contiguous block, but not there at the start.
    loop = _run(4, later=dict.fromkeys(range(4, 8), 1.3))
    assert _acted_ranks(loop) == {4, 5, 6, 7}
    assert any(a in NODE_ACTIONS for a, _ in acts(loop.log))


def test_the_whole_stage_slowing_further_is_no_longer_its_size() -> None:
    loop = _run(4, later=dict.fromkeys(STAGE, 1.3))
    assert _acted_ranks(loop) == set(STAGE)


def test_a_rank_slow_from_the_start_is_no_pattern() -> None:
    loop = _run(4, heavy=[9])
    assert _acted_ranks(loop) == {9}
    assert Reason.WORKLOAD_STRUCTURE not in {d.reason for d in loop.log}


def test_the_learned_layout_survives_the_state_store() -> None:
    loop = _run(4)
    again = State.from_dict(loop.state.to_dict())
    layout = again.jobs[JobKey("ml/train")].layout
    assert layout is not None and layout.pattern == Pattern(4, 4, 3)
    assert layout == loop.state.jobs[JobKey("ml/train")].layout
