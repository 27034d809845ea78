"""Simulated jobs through the real decision core under the policies users run: a
pipeline whose last stage works longer is workload, never hardware; a healthy 1,024-rank
job gets no action at all."""

from __future__ import annotations

from pathlib import Path

from pacekeeper.controller.core.decisions import Reason, Verdict
from pacekeeper.controller.core.policy import (
    Mode,
    Policy,
    PolicyDocument,
    Reference,
    ScoreKind,
    ScoreSelector,
    Thresholds,
    load_policy_file,
)
from pacekeeper.controller.simulation.detection import Instrumentation
from pacekeeper.controller.simulation.models import ModelParams
from pacekeeper.controller.simulation.presets import simulation_policy
from pacekeeper.controller.simulation.runner import (
    Outcome,
    effective_verdict,
    read_trace,
    simulate,
)

REPO = Path(__file__).resolve().parents[3]
ENFORCE_GPU = REPO / "docs" / "policies" / "enforce-gpu.yaml"


def _hardware(out: Outcome) -> int:
    return sum(1 for f in out.record.ours if f.hardware)


def test_a_pipeline_whose_last_stage_works_longer_gets_no_hardware_action() -> None:
    for doc in (load_policy_file(ENFORCE_GPU), simulation_policy(Mode.ENFORCE)):
        out = simulate("imbalance-last-stage", 128, 1800.0, seed=2, policy=doc)
        q = out.quality["pacekeeper"]
        assert _hardware(out) == 0 and q.hardware_actions_on_imbalance == 0
        assert q.false_actions == 0


def test_the_structure_rule_sees_the_pipeline_dimension_the_ranks_report(tmp_path: Path) -> None:
    # Judged on forward_backward against the fastest rank, the last stage is below and
    # lines up with pp=3. A narrow GPU spread keeps healthy ranks of the other stages
    # above the line, so the whole slow set is the stage.
    policy = Policy(
        score=ScoreSelector(
            kind=ScoreKind.SECTION_RELATIVE, section="forward_backward", reference=Reference.BEST
        ),
        thresholds=Thresholds(act=0.9, recover=0.95),
    )
    doc = PolicyDocument(mode=Mode.ENFORCE, policies={"default": policy})
    params = ModelParams(kernels=20, static_pairwise_spread=0.01)
    out = simulate("imbalance-last-stage", 128, 1200.0, seed=0, policy=doc, params=params)
    structure = [d for d in out.record.decisions if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert structure and all(d.evidence["dimension"] == "pp" for d in structure)
    assert {tuple(d.evidence["cells"]) for d in structure} == {("pp=3",)}
    assert _hardware(out) == 0
    # Without coordinates the controller cannot name the dimension: it names the
    # pattern the stage's ranks made from the job's first reports (issue 39).
    blind = simulate(
        "imbalance-last-stage", 128, 1200.0, seed=0, policy=doc, params=params,
        instrumentation=Instrumentation(topology=False),
    )  # fmt: skip
    held = [d for d in blind.record.decisions if d.reason is Reason.WORKLOAD_STRUCTURE]
    assert held and all(d.evidence["alignment"] == "pattern" for d in held)
    assert _hardware(blind) == 0


def test_a_healthy_1024_rank_job_gets_no_action_under_enforce_gpu(tmp_path: Path) -> None:
    trace = tmp_path / "healthy.jsonl"
    doc = load_policy_file(ENFORCE_GPU)
    out = simulate("healthy", 1024, 1800.0, seed=0, policy=doc, trace_path=trace)
    acted = [d for d in out.record.decisions if effective_verdict(d) is Verdict.ACT]
    assert not acted
    assert out.quality["pacekeeper"].false_actions == 0
    # ...with every rank's wait share in the reports (the engine names whom they wait for).
    last = list(read_trace(trace))[-1]
    assert len(last.ranks) == 1024 and all(r.wait_share is not None for r in last.ranks)
