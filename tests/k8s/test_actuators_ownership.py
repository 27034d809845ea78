"""Node actuators claim and undo only a mark the controller's record holds (issue 40):
our note left beside a human's mark (an uncordon, then a maintenance cordon; an edited
taint) makes nothing ours. Against the API harness: the world after each call."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from harness import Fault, RunningServer
from harness.objects import node

from pacekeeper.controller.actuators import Outcome
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.marks import (
    CORDON_ANNOTATION,
    TAINT_ANNOTATION,
    TAINT_EFFECT_ANNOTATION,
    TAINT_KEY,
    Provenance,
    our_marks,
)
from pacekeeper.controller.core.observations import MarkKind

THEN = datetime(2026, 11, 28, 1, 0, tzinfo=UTC)
"""When our earlier mark was placed (the stale note's time)."""
NOW = THEN + timedelta(days=2)


def _prov(actuators: KubernetesActuators, reason: Reason, at: datetime) -> Provenance:
    return actuators.provenance("ml/train-a", reason, "gpu", at)


def _node(server: RunningServer, name: str = "n1") -> dict[str, Any]:
    found = server.read("v1", "Node", name)
    assert found is not None
    return found


def _annotations(server: RunningServer) -> dict[str, str]:
    return dict(_node(server)["metadata"].get("annotations") or {})


def _maintenance_cordon_with_our_old_note(
    server: RunningServer, actuators: KubernetesActuators
) -> None:
    """Our cordon of THEN, uncordoned by a human (note left), then cordoned again by one."""
    body = node("n1", unschedulable=True)
    old = _prov(actuators, Reason.BELOW_THRESHOLD, THEN)
    body["metadata"]["annotations"] = {CORDON_ANNOTATION: old.to_annotation()}
    server.apply(body)


def test_a_cordon_beside_our_old_note_is_not_claimed_and_the_note_goes(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    _maintenance_cordon_with_our_old_note(k8s_server, actuators)

    # A new episode's record was made NOW: the note of THEN is not its mark.
    result = actuators.nodes.cordon(
        "n1", _prov(actuators, Reason.BELOW_THRESHOLD, NOW), marked_at=NOW
    )

    assert result.outcome is Outcome.NOT_OURS
    assert _node(k8s_server)["spec"]["unschedulable"] is True
    assert CORDON_ANNOTATION not in _annotations(k8s_server)
    assert our_marks(_node(k8s_server)) == frozenset()


def test_a_cordon_beside_our_old_note_is_never_uncordoned(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    _maintenance_cordon_with_our_old_note(k8s_server, actuators)

    result = actuators.nodes.uncordon("n1", _prov(actuators, Reason.RECOVERED, NOW), marked_at=NOW)

    assert result.outcome is Outcome.NOT_OURS
    assert _node(k8s_server)["spec"]["unschedulable"] is True
    assert CORDON_ANNOTATION not in _annotations(k8s_server)


def test_our_current_cordon_is_still_claimed_and_undone(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    slow = _prov(actuators, Reason.BELOW_THRESHOLD, NOW)
    assert actuators.nodes.cordon("n1", slow, marked_at=NOW).outcome is Outcome.APPLIED
    # Another job joining the record claims the same mark: its time is the record's.
    other = actuators.provenance("ml/train-b", Reason.BELOW_THRESHOLD, "gpu", NOW + timedelta(1))
    assert actuators.nodes.cordon("n1", other, marked_at=NOW).outcome is Outcome.ALREADY_APPLIED

    undone = actuators.nodes.uncordon("n1", _prov(actuators, Reason.RECOVERED, NOW), marked_at=NOW)

    assert undone.outcome is Outcome.UNDONE
    assert not _node(k8s_server)["spec"].get("unschedulable")
    assert CORDON_ANNOTATION not in _annotations(k8s_server)


def test_a_taint_a_human_edited_is_theirs(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    slow = _prov(actuators, Reason.BELOW_THRESHOLD, NOW)
    assert actuators.nodes.taint("n1", slow, marked_at=NOW).outcome is Outcome.APPLIED
    # As `kubectl taint nodes n1 pacekeeper.dev/straggler=maintenance:NoSchedule --overwrite`.
    edited = _node(k8s_server)
    edited["spec"]["taints"] = [{"key": TAINT_KEY, "value": "maintenance", "effect": "NoSchedule"}]
    k8s_server.apply(edited)
    assert MarkKind.TAINT not in our_marks(_node(k8s_server))

    result = actuators.nodes.untaint("n1", _prov(actuators, Reason.RECOVERED, NOW), marked_at=NOW)

    assert result.outcome is Outcome.ALREADY_UNDONE
    assert _node(k8s_server)["spec"]["taints"] == edited["spec"]["taints"]
    assert TAINT_ANNOTATION not in _annotations(k8s_server)


@pytest.mark.parametrize("kind", [MarkKind.CORDON, MarkKind.TAINT])
def test_forget_clears_only_our_note_of_that_record_and_never_the_spec(
    k8s_server: RunningServer, actuators: KubernetesActuators, kind: MarkKind
) -> None:
    k8s_server.apply(node("n1"))
    slow = _prov(actuators, Reason.BELOW_THRESHOLD, NOW)
    mark = actuators.nodes.cordon if kind is MarkKind.CORDON else actuators.nodes.taint
    assert mark("n1", slow, marked_at=NOW).outcome is Outcome.APPLIED
    spec = _node(k8s_server)["spec"]

    # A note of another record is not this call's to clear.
    actuators.nodes.forget("n1", kind, slow, marked_at=THEN)
    assert _annotations(k8s_server)
    result = actuators.nodes.forget("n1", kind, slow, marked_at=NOW)

    assert result.detail == {"annotation": "cleared"}
    assert _node(k8s_server)["spec"] == spec, "the mark itself is the human's now"
    notes = {CORDON_ANNOTATION, TAINT_ANNOTATION, TAINT_EFFECT_ANNOTATION}
    assert not notes & set(_annotations(k8s_server))


def test_forget_without_permission_leaves_the_note_and_says_so(
    k8s_server: RunningServer, actuators: KubernetesActuators, caplog: pytest.LogCaptureFixture
) -> None:
    k8s_server.apply(node("n1"))
    slow = _prov(actuators, Reason.BELOW_THRESHOLD, NOW)
    actuators.nodes.cordon("n1", slow, marked_at=NOW)
    k8s_server.inject(Fault(status=403, reason="Forbidden", verb="patch", plural="nodes"))

    with caplog.at_level(logging.WARNING):
        result = actuators.nodes.forget("n1", MarkKind.CORDON, slow, marked_at=NOW)

    assert result.detail == {"annotation": "left"}
    assert CORDON_ANNOTATION in _annotations(k8s_server)
    left = [r for r in caplog.records if r.getMessage() == "stale mark note left on node"]
    assert left and "no permission" in left[0].__dict__["cause"]
