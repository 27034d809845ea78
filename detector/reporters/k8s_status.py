"""What the reporter writes into ``StragglerReport.status``, as pure functions.

Layout (the CRD in charts/pacekeeper/crds/ describes it; the controller reads it):
``status.report`` is ``compaction.compact()``'s wire form; the other fields are small
summaries for ``kubectl get`` printer columns and quick filters. The reporter owns only
these keys; the controller keeps its own state under ``status.controller``, which a merge
patch of ours never touches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..compaction import compact
from ..score_report import K8S_STATUS_MAX_BYTES, ScoreReport

GROUP = "pacekeeper.dev"
VERSION = "v1alpha1"
PLURAL = "stragglerreports"
KIND = "StragglerReport"
DEFAULT_STRAGGLER_THRESHOLD = 0.75
"""NVRx's default for every ``identify_stragglers`` threshold."""
_STATUS_HEADROOM_BYTES = 4 * 1024
"""Room for the summary fields beside ``report`` inside the status bound."""
REPORTER_KEYS = (
    "report",
    "worstScore",
    "worstRank",
    "stragglers",
    "stragglerRanks",
    "stragglerThreshold",
    "lastReportTime",
    "sequence",
    "incarnation",
)
_MAX_LISTED_STRAGGLERS = 64
SUMMARY_DECIMALS = 4
"""Decimals of ``worstScore``: a printer column, read by people (``kubectl get sr``). The
full-precision scores stay in ``report``, which is what the controller reads."""


def build_status(
    report: ScoreReport,
    *,
    incarnation: str,
    threshold: float = DEFAULT_STRAGGLER_THRESHOLD,
    max_bytes: int = K8S_STATUS_MAX_BYTES,
) -> dict[str, Any]:
    """The reporter's status fields for ``report``; the whole dict stays under ``max_bytes``.

    Straggler counts come from the full report before compaction, so they stay exact
    when only the worst ranks fit."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"straggler threshold must be within [0, 1], got {threshold!r}")
    below = sorted(
        (w, r.rank) for r in report.ranks if (w := r.worst_score()) is not None and w < threshold
    )
    status: dict[str, Any] = {
        "report": compact(report, max_bytes - _STATUS_HEADROOM_BYTES).to_wire(),
        "worstScore": summary_score(report.summary.min_score, threshold),
        "worstRank": report.summary.worst_rank,
        "stragglers": len(below),
        # Worst first, bounded: the full list lives in report.ranks.
        "stragglerRanks": [rank for _, rank in below[:_MAX_LISTED_STRAGGLERS]],
        "stragglerThreshold": threshold,
        "lastReportTime": report.generated_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "sequence": report.sequence,
        "incarnation": incarnation,
    }
    size = status_bytes(status)
    if size > max_bytes:  # the headroom guess was wrong: say so rather than send it
        raise ValueError(f"status is {size} bytes, over the {max_bytes}-byte bound")
    return status


def summary_score(score: float | None, threshold: float) -> float | None:
    """``score`` rounded to ``SUMMARY_DECIMALS``, never rounded up onto or over
    ``threshold``: a rank counted among the stragglers must not show a worst score that
    reads as not below the line (0.74996 shown as 0.75 beside ``stragglers: 1``)."""
    if score is None:
        return None
    shown = round(score, SUMMARY_DECIMALS)
    if score < threshold <= shown:
        shown = round(shown - 10.0**-SUMMARY_DECIMALS, SUMMARY_DECIMALS)
    return shown


def status_bytes(status: dict[str, Any]) -> int:
    return len(json.dumps(status, separators=(",", ":")))


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``.

    A merge patch merges objects key by key, so a key we no longer send (a score that
    became unmeasured) would survive from the last report unless the patch deletes it
    with ``null``. Lists are replaced whole."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key in old and isinstance(old[key], dict) and isinstance(value, dict):
            patch[key] = merge_patch(old[key], value)
        else:
            patch[key] = value
    return patch


def status_patch(previous: dict[str, Any] | None, status: dict[str, Any]) -> dict[str, Any]:
    """Patch body for the status subresource: our keys only, absent values deleted."""
    previous = previous or {}
    mine = {k: v for k, v in previous.items() if k in REPORTER_KEYS}
    return {"status": merge_patch(mine, {k: v for k, v in status.items() if v is not None})}


def new_object(
    namespace: str, name: str, report: ScoreReport, owner: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A StragglerReport for ``report``'s job, as a platform engineer might create one by
    hand (the CRD's tests use it). The reporter itself never creates its report: the
    controller does, bound to the job's workload (``controller/runtime/report_birth.py``,
    issue 40); ``owner`` makes Kubernetes delete it with the job."""
    job: dict[str, Any] = {"platform": report.job.platform.value, "name": report.job.name}
    if report.job.namespace:
        job["namespace"] = report.job.namespace
    if report.job.ray_job_id:
        job["rayJobId"] = report.job.ray_job_id
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "pacekeeper-reporter"},
    }
    if owner is not None:
        # Not the controller of the report, and never blocking the job's deletion.
        metadata["ownerReferences"] = [{**owner, "blockOwnerDeletion": False}]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": KIND,
        "metadata": metadata,
        "spec": {"job": job},
    }
