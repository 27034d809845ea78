"""Per-job series: worst score, ranks below act, actions by kind; the job label set is
bounded by count and by idleness."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.policy import PolicyDocument, load_policy_document
from pacekeeper.controller.runtime.metrics import ControllerMetrics
from pacekeeper.controller.runtime.metrics_jobs import JobMetrics
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.score_report import JobIdentity, Platform, ScoreReport

POLICIES = """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
defaultPolicy: loose
policies:
  loose:
    score: {kind: worst, reference: best}
    thresholds: {act: 0.5, recover: 0.9}
  strict:
    score: {kind: worst, reference: best}
    thresholds: {act: 0.8, recover: 0.9}
"""


@dataclass
class Clock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


def _doc() -> PolicyDocument:
    return load_policy_document(POLICIES, "test")


def _report(name: str, seq: int = 0, slow: dict[int, float] | None = None) -> ScoreReport:
    job = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name=name)
    return synthetic_report(job=job, sequence=seq, world_size=8, slow=slow or {})


def _decision(job: str, verdict: Verdict, action: str | None, reason: Reason) -> Decision:
    from pacekeeper.controller.core.decisions import ActionKind

    return Decision(
        job=JobKey(job),
        subject="node/n1",
        verdict=verdict,
        action=None if action is None else ActionKind(action),
        reason=reason,
        decided_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def _value(m: ControllerMetrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_worst_score_and_ranks_below_the_jobs_policy_act() -> None:
    m = ControllerMetrics()
    report = _report("llm", slow={2: 0.4, 5: 0.6, 6: 0.7})
    m.show_job("ml/llm", report, _doc(), None, ())
    assert _value(m, "pacekeeper_job_worst_score", job_key="ml/llm") == 0.4
    assert _value(m, "pacekeeper_job_ranks_below_act", job_key="ml/llm") == 1
    assert _value(m, "pacekeeper_job_act_threshold", job_key="ml/llm") == 0.5
    m.show_job("ml/other", _report("other", slow={2: 0.4, 5: 0.6, 6: 0.7}), _doc(), "strict", ())
    assert _value(m, "pacekeeper_job_ranks_below_act", job_key="ml/other") == 3


def test_acts_and_undos_count_by_action_and_holds_do_not() -> None:
    m = ControllerMetrics()
    job = "ml/llm"
    decisions = [
        _decision(job, Verdict.ACT, "taintNode", Reason.BELOW_THRESHOLD),
        _decision(job, Verdict.HOLD, "cordonNode", Reason.OBSERVE_MODE),
        _decision(job, Verdict.UNDO, "taintNode", Reason.RECOVERED),
        _decision("ml/other", Verdict.ACT, "taintNode", Reason.BELOW_THRESHOLD),
    ]
    m.show_job(job, None, _doc(), None, decisions)
    m.show_job(job, None, _doc(), None, decisions[:1])
    acts = _value(m, "pacekeeper_job_actions_total", job_key=job, action="taintNode", verdict="act")
    assert acts == 2
    undos = _value(
        m, "pacekeeper_job_actions_total", job_key=job, action="taintNode", verdict="undo"
    )
    assert undos == 1
    assert (
        _value(m, "pacekeeper_job_actions_total", job_key=job, action="cordonNode", verdict="hold")
        is None
    )
    assert _value(m, "pacekeeper_job_worst_score", job_key=job) is None  # no report, no score
    # Another job's decision made in this job's reconcile is that job's to count.
    assert _value(m, "pacekeeper_job_actions_total", job_key="ml/other", action="taintNode",
                  verdict="act") is None  # fmt: skip


def test_label_set_is_bounded_least_recently_reconciled_first_out() -> None:
    clock = Clock()
    m = ControllerMetrics(max_jobs=3, clock=clock)
    for i in range(5):
        m.show_job(f"ml/j{i}", _report(f"j{i}"), _doc(), None, ())
        clock.now += 1
    m.show_job("ml/j2", _report("j2", seq=1), _doc(), None, ())  # j2 is recent again
    m.show_job("ml/j5", _report("j5"), _doc(), None, ())
    assert m.jobs.jobs() == ["ml/j4", "ml/j2", "ml/j5"]
    assert _value(m, "pacekeeper_job_worst_score", job_key="ml/j0") is None
    assert _value(m, "pacekeeper_job_metrics_jobs") == 3
    assert _value(m, "pacekeeper_job_metrics_dropped_total") == 3


def test_an_ended_job_leaves_at_the_next_scrape_after_the_idle_time() -> None:
    clock = Clock()
    m = ControllerMetrics(job_idle_s=600, clock=clock)
    m.show_job("ml/done", _report("done", slow={1: 0.3}), _doc(), None, ())
    clock.now += 300
    m.show_job("ml/live", _report("live"), _doc(), None, ())
    clock.now += 301
    # No reconcile happened since: the scrape itself forgets the finished job.
    assert _value(m, "pacekeeper_job_worst_score", job_key="ml/done") is None
    assert _value(m, "pacekeeper_job_worst_score", job_key="ml/live") is not None


def test_the_ranks_are_walked_once_per_report_not_per_reconcile() -> None:
    jobs = JobMetrics()
    calls: list[int] = []

    def score() -> tuple[float | None, int | None, float | None]:
        calls.append(1)
        return 0.5, 1, 0.7

    for _ in range(3):
        jobs.observe("ml/llm", report_id=(7, "t"), score=score)
    jobs.observe("ml/llm", report_id=(8, "t"), score=score)
    assert len(calls) == 2


def test_a_failing_metric_never_fails_the_reconcile(caplog: pytest.LogCaptureFixture) -> None:
    m = ControllerMetrics()

    class Broken:
        def policy_for(self, name: str | None) -> None:
            raise RuntimeError("boom")

    m.show_job("ml/llm", _report("llm"), Broken(), None, ())
    assert "per-job metrics not updated" in caplog.messages


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_jobs"):
        JobMetrics(max_jobs=0)
    with pytest.raises(ValueError, match="idle_s"):
        JobMetrics(idle_s=0)
