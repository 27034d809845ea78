"""A structural hold (slow ranks on many nodes: the workload) leaves a rank whose own GPU
is slow to be judged as usual; a GPU slowdown on many nodes stays held."""

from __future__ import annotations

import numpy as np
from controller_builders import GPU_TAIL_POLICY, Loop, calm_gpus, policy_doc

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind

WORLD = 64  # 8 nodes of 8
CULPRIT = 5  # node-000
SPREAD = (12, 20, 28, 36)  # one rank on each of nodes 1-4: half the job's nodes


def _job(gpu_slow: tuple[int, ...], reports: int = 30) -> list[Decision]:
    """From report 10 the SPREAD ranks are slow in their section tail (the workload's
    spread) and the ``gpu_slow`` ranks' GPUs 20 % slower than their peers'."""
    loop = Loop(policy_doc(GPU_TAIL_POLICY), world=WORLD)
    rng = np.random.default_rng(5)
    for i in range(1, reports + 1):
        g, tails = calm_gpus(rng, WORLD, 0.004)
        if i >= 10:
            tails[list(SPREAD)] = 0.6
            g[list(gpu_slow)] = 0.8
        loop.step_gpu(g, tails)
    return loop.log


def _acted_on(log: list[Decision], action: ActionKind) -> set[int]:
    return {
        r
        for d in log
        if d.verdict is Verdict.ACT and d.action is action
        for r in d.evidence.get("ranks", [])
    }


def test_a_slow_gpu_amid_a_structural_spread_is_judged_and_the_spread_held() -> None:
    log = _job(gpu_slow=(CULPRIT,))
    assert any(d.reason == Reason.WORKLOAD_IMBALANCE for d in log)  # the spread is held
    assert _acted_on(log, ActionKind.RESTART_RANK) == {CULPRIT}
    assert _acted_on(log, ActionKind.NOTIFY) == {CULPRIT}


def test_gpus_slow_on_as_many_nodes_as_a_structure_stay_held() -> None:
    # Three slow GPUs on three nodes (structuralMinNodes): a GPU-wide pattern, the workload.
    log = _job(gpu_slow=(CULPRIT, 13, 21))
    assert any(d.reason == Reason.WORKLOAD_IMBALANCE for d in log)
    assert not _acted_on(log, ActionKind.NOTIFY)
    assert not _acted_on(log, ActionKind.RESTART_RANK)
