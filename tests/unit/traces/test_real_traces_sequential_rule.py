"""The sequential rule on the real ByteDance traces (issue 38; OSDI'25 artifact, read in
place): under docs/policies/enforce-recommended.yaml as it is, AR's culprit (trace rank
0, one worker slowed) is restarted once its test passes and no disruptive step
(restartRank, taint, drain, cordon) ever names a healthy rank or node; SE (sequence
imbalance, a longer last stage, no fault) gets none. With and without the ranks'
coordinates, 8 and 4 GPUs a node.

Reports hold 2 recorded steps (AR: 22 reports, SE: 22) and 1 (AR: 44): at the bench's 8
the traces make 6 reports, fewer than the 8 a rank's test needs before it may pass, so
AR's culprit is noticed and never disrupted there; SE at one step a report has fewer
kernel records than ``minSamples`` and nothing is judged.

The rule's defence: with the line moved into the trace's own noise (act 0.99), the
ladder alone restarts healthy AR ranks (44, 60) in every layout; with the rule, no
healthy rank or node is touched."""

from __future__ import annotations

from types import ModuleType

import pytest

# The bench loaded once, and the same skips: the artifact and pyarrow must be there.
import test_real_traces_without_coords as shared

from pacekeeper.controller.core.decisions import Decision, Verdict
from pacekeeper.controller.core.policy import DISRUPTIVE_ACTIONS, PolicyDocument, load_policy_file
from pacekeeper.controller.simulation.runner import effective_verdict, replay
from pacekeeper.controller.traces.reports import trace_reports

bench = shared.bench
pytestmark = shared.pytestmark
ROOT = shared.ROOT
POLICY = ROOT / "docs" / "policies" / "enforce-recommended.yaml"
AR_CULPRIT = 0


def _policy(act: float | None = None, gated: bool = True) -> PolicyDocument:
    doc = load_policy_file(POLICY)
    name = doc.default_policy
    p = doc.policies[name]
    assert p.safety.false_disruptions_per_gpu_day is not None  # the file states a rate
    update = {}
    if act is not None:
        update["thresholds"] = p.thresholds.model_copy(update={"act": act, "recover": 0.995})
    if not gated:
        update["safety"] = p.safety.model_copy(update={"false_disruptions_per_gpu_day": None})
    return doc.model_copy(update={"policies": {**doc.policies, name: p.model_copy(update=update)}})


def _runs(bench: ModuleType, name: str, steps: int, doc: PolicyDocument) -> list:
    """(coords, GPUs a node, disruptive steps taken) for every way the case is reported."""
    case = bench.load_case(name, frozenset({AR_CULPRIT}) if name == "AR" else frozenset())
    out = []
    for coords, trace in bench.traces_of(case, steps).items():
        for gpus in bench.LAYOUTS[name]:
            reports = trace_reports(trace, source="bench", job_name=name, gpus_per_node=gpus)
            taken = [
                d
                for _t, d in replay(list(reports), doc)
                if d.action in DISRUPTIVE_ACTIONS and effective_verdict(d) is Verdict.ACT
            ]
            out.append((coords, gpus, taken))
    return out


def _healthy_ones(taken: list[Decision], gpus: int) -> list[tuple[str, object]]:
    """Steps that touch anything but AR's culprit: its rank, and its node only for it."""
    node = f"node/node-{AR_CULPRIT // gpus:05d}"
    return [
        (d.subject, d.evidence.get("ranks"))
        for d in taken
        if d.subject != node or d.evidence.get("ranks") != [AR_CULPRIT]
    ]


@pytest.mark.parametrize("steps", [2, 1], ids=["2-steps", "1-step"])
def test_ar_its_culprit_alone_is_disrupted(bench: ModuleType, steps: int) -> None:
    for coords, gpus, taken in _runs(bench, "AR", steps, _policy()):
        assert _healthy_ones(taken, gpus) == [], (coords, gpus)
        assert taken, f"the culprit was never disrupted (coords {coords}, {gpus} GPUs a node)"
        test = taken[0].evidence["sequentialTest"]
        assert test["passed"] == [AR_CULPRIT], (coords, gpus, test)


def test_se_nothing_is_disrupted(bench: ModuleType) -> None:
    for coords, gpus, taken in _runs(bench, "SE", 2, _policy()):
        assert taken == [], (coords, gpus, [(d.subject, d.action) for d in taken])


def test_with_the_line_in_the_noise_the_rule_alone_spares_the_healthy_ranks(
    bench: ModuleType,
) -> None:
    for coords, gpus, taken in _runs(bench, "AR", 1, _policy(act=0.99, gated=False)):
        assert _healthy_ones(taken, gpus), f"no healthy rank restarted ({coords}, {gpus})"
    for coords, gpus, taken in _runs(bench, "AR", 1, _policy(act=0.99)):
        assert _healthy_ones(taken, gpus) == [], (coords, gpus)
