"""What `kubectl get stragglerreports` shows by default: no threshold but the policy's.

The reporter's `status.stragglers` counts ranks below the job's own threshold
(`PACEKEEPER_STRAGGLER_THRESHOLD`, 0.75 by default); the controller decides with its
policy's act threshold. Both in the default view were two "slow" numbers that disagreed
(issue 37), so the job's count is only in the wide view and the default view carries the
controller's verdict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

CRD = (
    Path(__file__).resolve().parents[2]
    / "charts/pacekeeper/crds/stragglerreports.pacekeeper.dev.yaml"
)
JOB_THRESHOLD_FIELDS = (
    ".status.stragglers",
    ".status.stragglerRanks",
    ".status.stragglerThreshold",
)


def _columns() -> list[dict[str, Any]]:
    (version,) = yaml.safe_load(CRD.read_text())["spec"]["versions"]
    return list(version["additionalPrinterColumns"])


def test_the_default_view_holds_no_count_by_the_jobs_own_threshold() -> None:
    default = [c for c in _columns() if c.get("priority", 0) == 0]
    assert not [c["name"] for c in default if c["jsonPath"] in JOB_THRESHOLD_FIELDS]


def test_the_default_view_shows_the_controllers_verdict_and_the_wide_view_the_jobs_count() -> None:
    by_path = {c["jsonPath"]: c for c in _columns()}
    assert by_path[".status.verdict"].get("priority", 0) == 0
    assert by_path[".status.stragglers"].get("priority") == 1
