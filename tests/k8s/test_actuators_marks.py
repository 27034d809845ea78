"""Provenance annotations: what we write, and how ownership is read back (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from pacekeeper.controller.core.marks import (
    CORDON_ANNOTATION,
    TAINT_ANNOTATION,
    TAINT_KEY,
    Provenance,
    our_marks,
)
from pacekeeper.controller.core.observations import MarkKind

MINE = Provenance("pacekeeper", "ml/a", "BelowThreshold", "gpu", datetime(2026, 1, 2, tzinfo=UTC))


def test_provenance_round_trips_through_its_annotation() -> None:
    text = MINE.to_annotation()
    assert Provenance.from_annotation(text) == MINE
    assert '"at":"2026-01-02T00:00:00Z"' in text


def test_provenance_time_is_written_in_utc() -> None:
    local = Provenance(
        "o", "j", "r", "p", datetime(2026, 1, 2, 3, tzinfo=timezone(timedelta(hours=3)))
    )
    assert '"at":"2026-01-02T00:00:00Z"' in local.to_annotation()


@pytest.mark.parametrize("text", [None, "", "not json", "{}", '{"owner": "x"}', "[1, 2]"])
def test_malformed_provenance_reads_as_not_ours(text: str | None) -> None:
    assert Provenance.from_annotation(text) is None


def _node(*, taint: bool, cordoned: bool, annotations: dict[str, str]) -> dict[str, object]:
    return {
        "metadata": {"name": "n1", "annotations": annotations},
        "spec": {
            "unschedulable": cordoned,
            "taints": [{"key": TAINT_KEY, "effect": "NoSchedule"}] if taint else [],
        },
    }


def test_our_marks_need_both_the_mark_and_our_provenance() -> None:
    mine = MINE.to_annotation()
    both = {TAINT_ANNOTATION: mine, CORDON_ANNOTATION: mine}
    assert our_marks(_node(taint=True, cordoned=True, annotations=both)) == {
        MarkKind.TAINT,
        MarkKind.CORDON,
    }
    assert our_marks(_node(taint=True, cordoned=True, annotations={})) == frozenset()
    assert our_marks(_node(taint=False, cordoned=False, annotations=both)) == frozenset()
    assert (
        our_marks(_node(taint=True, cordoned=True, annotations=both), owner="other") == frozenset()
    )
