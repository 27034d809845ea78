"""What the reporter writes into StragglerReport.status: bounded, schema-valid, and
patched so that nothing of an older report survives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reporter_helpers import apply_merge_patch, crd, status_validator

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters.k8s_status import (
    build_status,
    merge_patch,
    status_bytes,
    status_patch,
)
from pacekeeper.detector.score_report import (
    K8S_STATUS_MAX_BYTES,
    JobIdentity,
    Platform,
    ScoreReport,
)

JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm")


def test_status_of_a_16384_rank_job_fits_256_kib_and_keeps_the_worst_ranks() -> None:
    slow = {17: 0.31, 4096: 0.52, 16383: 0.6}
    report = synthetic_report(job=JOB, world_size=16384, slow=slow)
    assert len(report.to_json()) > 4 * K8S_STATUS_MAX_BYTES  # the full form would not fit
    status = build_status(report, incarnation="i")
    assert status_bytes(status) < K8S_STATUS_MAX_BYTES
    stored = ScoreReport.from_wire(status["report"])
    assert stored.truncated and stored.summary.world_size == 16384
    assert {17, 4096, 16383} <= {r.rank for r in stored.ranks}
    assert status["worstScore"] == 0.31 and status["worstRank"] == 17
    assert status["stragglers"] == 3 and status["stragglerRanks"] == [17, 4096, 16383]
    assert len(stored.summary.nodes) == 16384 // 8
    errors = list(status_validator().iter_errors(status))
    assert errors == []


def test_small_report_is_stored_whole_and_valid_against_the_crd() -> None:
    report = synthetic_report(job=JOB, world_size=4, slow={3: 0.5}, gpu=False)
    status = build_status(report, incarnation="i", threshold=0.6)
    assert ScoreReport.from_wire(status["report"]) == report
    assert status["stragglers"] == 1 and status["stragglerThreshold"] == 0.6
    assert list(status_validator().iter_errors(status)) == []


def test_crd_is_namespaced_with_status_subresource_and_the_printer_columns() -> None:
    doc = crd()
    assert doc["spec"]["group"] == "pacekeeper.dev" and doc["spec"]["scope"] == "Namespaced"
    (version,) = doc["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Worst Score"] == ".status.worstScore"
    assert columns["Stragglers"] == ".status.stragglers"
    assert columns["Last Report"] == ".status.lastReportTime"


def test_status_with_a_negative_score_or_unknown_platform_fails_the_crd_schema() -> None:
    status = build_status(synthetic_report(job=JOB), incarnation="i")
    bad = json.loads(json.dumps(status))
    bad["report"]["ranks"][0]["sectionRelative"]["forward"] = -1
    bad["report"]["job"]["platform"] = "slurm"
    paths = {tuple(e.absolute_path) for e in status_validator().iter_errors(bad)}
    assert ("report", "ranks", 0, "sectionRelative", "forward") in paths
    assert ("report", "job", "platform") in paths


def test_patch_deletes_a_score_that_became_unmeasured_and_leaves_controller_keys() -> None:
    before = build_status(synthetic_report(job=JOB, sequence=1), incarnation="i")
    after = build_status(synthetic_report(job=JOB, sequence=2, gpu=False), incarnation="i")
    stored = before | {"controller": {"ladder": {"3": "tainted"}}}
    body = status_patch(stored, after)["status"]
    assert "controller" not in body
    result = apply_merge_patch(stored, body)
    assert result == after | {"controller": {"ladder": {"3": "tainted"}}}


def test_threshold_outside_unit_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="threshold"):
        build_status(synthetic_report(job=JOB), incarnation="i", threshold=1.5)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=12,
)
_no_null_values: Any = st.dictionaries(
    st.text(max_size=2),
    st.recursive(
        st.booleans() | st.integers() | st.text(max_size=3),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
        ),
        max_leaves=12,
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(old=st.dictionaries(st.text(max_size=2), _json, max_size=4), new=_no_null_values)
def test_merge_patch_turns_any_old_document_into_the_new_one(old: Any, new: Any) -> None:
    assert apply_merge_patch(old, merge_patch(old, new)) == new


def _aliases(model: Any) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_crd_schema_lists_every_field_of_the_report_so_the_server_prunes_nothing() -> None:
    from pacekeeper.detector.score_report import (
        JobIdentity,
        KernelTiming,
        NodeSummary,
        ProbeEvidence,
        RankScores,
        Summary,
    )

    props = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    report = props["status"]["properties"]["report"]["properties"]
    summary = report["summary"]["properties"]
    pairs = [
        (ScoreReport, report),
        (JobIdentity, report["job"]["properties"]),
        (KernelTiming, report["kernelTiming"]["properties"]),
        (RankScores, report["ranks"]["items"]["properties"]),
        (ProbeEvidence, report["ranks"]["items"]["properties"]["probe"]["properties"]),
        (Summary, summary),
        (NodeSummary, summary["nodes"]["items"]["properties"]),
    ]
    for model, schema in pairs:
        assert _aliases(model) == set(schema), model.__name__
