"""Reports whose numbers or identity no honest writer sends are refused at the boundary
(issue 40): a StragglerReport claiming a Ray or local job, a schemaVersion that is not an
integer, an endless window, a sequence past 2**53."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.observations import RejectedReport
from pacekeeper.controller.sources.kubernetes import report_of
from pacekeeper.detector.score_report import (
    JobIdentity,
    Platform,
    RankScores,
    ReportRejected,
    ScoreReport,
)

NOW = datetime(2025, 1, 1, tzinfo=UTC)
MAX_SEQUENCE = 2**53  # exact in every JSON reader


def wire(**changes: Any) -> dict[str, Any]:
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="team-a", name="llama"),
        sequence=7,
        generated_at=NOW,
        window_s=30.0,
        ranks=[RankScores(rank=0, node="n1", gpu_relative=1.0)],
    )
    out = report.to_wire()
    for key, value in changes.items():
        if key == "platform":
            out["job"]["platform"] = value
        else:
            out[key] = value
    return out


def straggler_report(report: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"namespace": "team-a", "name": "llama"}, "status": {"report": report}}


def test_a_well_formed_report_is_read() -> None:
    assert isinstance(report_of(straggler_report(wire()), NOW), ScoreReport)


@pytest.mark.parametrize("platform", ["ray", "local"])
def test_a_kubernetes_report_claiming_another_platform_is_refused(platform: str) -> None:
    got = report_of(straggler_report(wire(platform=platform)), NOW)
    assert isinstance(got, RejectedReport)
    assert got.reason is Reason.MALFORMED_REPORT
    assert got.error == (
        f"report.job.platform is {platform!r}: a StragglerReport carries kubernetes reports only"
    )


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("schemaVersion", "1", "schemaVersion"),
        ("schemaVersion", 2.0, "schemaVersion"),
        ("schemaVersion", True, "schemaVersion"),
        ("sequence", 1e30, "sequence"),
        ("sequence", 7.0, "sequence"),
        ("sequence", "7", "sequence"),
        ("sequence", MAX_SEQUENCE + 1, "sequence"),
        ("windowS", math.inf, "windowS"),
        ("windowS", math.nan, "windowS"),
        ("windowS", 1e300, "windowS"),
    ],
)
def test_numbers_no_writer_sends_are_refused(field: str, value: Any, says: str) -> None:
    bad = wire(**{field: value})
    with pytest.raises(ReportRejected, match=says):
        ScoreReport.from_wire(bad)
    # As the controller reads it from the API: JSON text, inf and nan as JSON's extensions.
    with pytest.raises(ReportRejected, match=says):
        ScoreReport.from_wire(json.dumps(bad))
    got = report_of(straggler_report(bad), NOW)
    assert isinstance(got, RejectedReport) and got.reason is Reason.MALFORMED_REPORT


def test_the_largest_exact_sequence_is_still_read() -> None:
    assert ScoreReport.from_wire(wire(sequence=MAX_SEQUENCE)).sequence == MAX_SEQUENCE
