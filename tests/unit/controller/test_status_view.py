"""The pure parts of ``pacekeeper status``'s view: report ages, and which thresholds a
job's cells are coloured by (always a policy's, never numbers of the view's own)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pacekeeper.controller.cli.status_view import (
    age_text,
    heat_row,
    job_status,
    legend,
    thresholds_of,
)
from pacekeeper.controller.core.policy import Thresholds, load_policy_document
from pacekeeper.controller.core.state import ClusterState

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
DOC = load_policy_document(
    """
apiVersion: pacekeeper.dev/v1alpha1
kind: RemediationPolicies
defaultPolicy: lenient
policies:
  lenient: {thresholds: {act: 0.5, recover: 0.6}}
  strict: {thresholds: {act: 0.9, recover: 0.95}}
""",
    "test",
)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "-"), (-3, "0s"), (42, "42s"), (119, "119s"), (180, "3m"), (3 * 3600, "3h"),
     (3 * 86400, "3d")],
)  # fmt: skip
def test_age_reads_as_kubectl_writes_it(seconds: float | None, shown: str) -> None:
    assert age_text(seconds) == shown


def test_report_age_is_from_the_reports_generation_time() -> None:
    wire = {"generatedAt": (NOW - timedelta(seconds=42)).isoformat()}
    s = job_status("ml/a", wire, None, [], ClusterState(), NOW)
    assert s.report_age_s == 42.0


def test_thresholds_are_the_chosen_policys_else_the_default_policys() -> None:
    strict = thresholds_of(DOC, "file p.yaml", "strict")
    assert (strict.act, strict.recover, strict.source) == (0.9, 0.95, "policy strict (file p.yaml)")
    default = thresholds_of(DOC, "file p.yaml", None)
    assert (default.act, default.recover) == (0.5, 0.6)
    assert default.source == "policy lenient (file p.yaml)"


def test_without_a_document_the_policy_models_defaults_are_shown_and_said_to_be() -> None:
    model = Thresholds()
    for t in (thresholds_of(None, "no controller found", None),
              thresholds_of(DOC, "file p.yaml", "gone")):  # fmt: skip
        assert (t.act, t.recover) == (model.act, model.recover)
        assert t.source.startswith("the policy model's defaults")
    assert "policy gone is not in file p.yaml" in thresholds_of(DOC, "file p.yaml", "gone").source


def test_heatmap_and_legend_follow_the_policy_in_force() -> None:
    strict = thresholds_of(DOC, "file p.yaml", "strict")
    assert heat_row([0.99, 0.92, 0.8], strict).plain == "■▓█"
    assert heat_row([0.99, 0.92, 0.8], thresholds_of(DOC, "f", "lenient")).plain == "■■■"
    assert "▓ below 0.95  █ below 0.9" in legend(strict).plain
    assert "thresholds of policy strict (file p.yaml)" in legend(strict).plain


def test_docs_quote_the_policy_models_defaults() -> None:
    from pathlib import Path

    model = Thresholds()
    text = (Path(__file__).parents[3] / "docs" / "status.md").read_text()
    assert f"act {model.act:g}, recover {model.recover:g}" in text
