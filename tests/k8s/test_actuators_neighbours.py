"""Our taint's effect as the policy chose it, and living beside other systems that taint
and cordon nodes (NVSentinel's quarantine, a person's cordon): the world after each
action. Their marks are never counted as ours, never undone, and our undo leaves them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness import RunningServer
from harness.objects import node

from pacekeeper.controller.actuators import Outcome
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.marks import (
    CORDON_ANNOTATION,
    TAINT_ANNOTATION,
    TAINT_EFFECT_ANNOTATION,
    TAINT_KEY,
    our_marks,
)
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import TaintEffect

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)

# What NVSentinel's fault quarantine writes (its taint key and effect are configurable;
# this is the shape of one of its rules), and its own note on the node.
NVSENTINEL_TAINT = {"key": "nvidia.com/gpu-error", "value": "GpuXid79", "effect": "NoSchedule"}
NVSENTINEL_NOTES = {"quarantineHealthEvent": '[{"checkName":"GpuXidError"}]'}


def _slow(actuators: KubernetesActuators) -> Any:
    return actuators.provenance("ml/train-a", Reason.BELOW_THRESHOLD, "gpu", NOW)


def _recovered(actuators: KubernetesActuators) -> Any:
    return actuators.provenance("ml/train-a", Reason.RECOVERED, "gpu", NOW)


def _node(server: RunningServer, name: str = "n1") -> dict[str, Any]:
    found = server.read("v1", "Node", name)
    assert found is not None
    return found


def _apply(server: RunningServer, body: dict[str, Any], notes: dict[str, str]) -> None:
    body["metadata"]["annotations"] = {**body["metadata"].get("annotations", {}), **notes}
    server.apply(body)


# --- the effect the policy chose ---------------------------------------------------------


@pytest.mark.parametrize("effect", list(TaintEffect))
def test_the_taint_written_has_the_effect_asked_for_and_undo_removes_exactly_it(
    k8s_server: RunningServer, actuators: KubernetesActuators, effect: TaintEffect
) -> None:
    k8s_server.apply(node("n1"))

    assert actuators.nodes.taint("n1", _slow(actuators), effect).outcome is Outcome.APPLIED

    tainted = _node(k8s_server)
    assert tainted["spec"]["taints"] == [
        {"key": TAINT_KEY, "value": "BelowThreshold", "effect": effect.value}
    ]
    assert tainted["metadata"]["annotations"][TAINT_EFFECT_ANNOTATION] == effect.value
    assert our_marks(tainted) == {MarkKind.TAINT}
    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is Outcome.UNDONE
    after = _node(k8s_server)
    assert not after["spec"].get("taints")
    assert TAINT_EFFECT_ANNOTATION not in after["metadata"].get("annotations", {})


def test_undo_leaves_a_taint_with_our_key_but_another_effect(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    """Someone added ``pacekeeper.dev/straggler:NoExecute`` by hand beside our NoSchedule
    one: it is theirs, and survives our undo."""
    k8s_server.apply(node("n1"))
    actuators.nodes.taint("n1", _slow(actuators), TaintEffect.NO_SCHEDULE)
    by_hand = _node(k8s_server)
    theirs = {"key": TAINT_KEY, "effect": "NoExecute"}
    by_hand["spec"]["taints"].append(theirs)
    k8s_server.apply(by_hand)

    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is Outcome.UNDONE

    assert _node(k8s_server)["spec"]["taints"] == [theirs]


# --- NVSentinel and people ---------------------------------------------------------------


def test_an_nvsentinel_taint_and_cordon_are_not_counted_as_ours(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    body = node("n1", taints=[NVSENTINEL_TAINT])
    body["spec"]["unschedulable"] = True
    _apply(k8s_server, body, NVSENTINEL_NOTES)

    assert our_marks(_node(k8s_server)) == frozenset()
    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is (Outcome.ALREADY_UNDONE)
    assert actuators.nodes.uncordon("n1", _recovered(actuators)).outcome is Outcome.NOT_OURS
    after = _node(k8s_server)
    assert after["spec"]["taints"] == [NVSENTINEL_TAINT]
    assert after["spec"]["unschedulable"] is True
    assert k8s_server.history.find(verb="patch", plural="nodes") == []


def test_our_taint_goes_beside_nvsentinels_and_our_undo_leaves_theirs(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    _apply(k8s_server, node("n1", taints=[NVSENTINEL_TAINT]), NVSENTINEL_NOTES)

    assert actuators.nodes.taint("n1", _slow(actuators)).outcome is Outcome.APPLIED
    both = _node(k8s_server)
    assert [t["key"] for t in both["spec"]["taints"]] == [NVSENTINEL_TAINT["key"], TAINT_KEY]
    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is Outcome.UNDONE

    after = _node(k8s_server)
    assert after["spec"]["taints"] == [NVSENTINEL_TAINT]
    notes = after["metadata"]["annotations"]
    assert notes["quarantineHealthEvent"] == NVSENTINEL_NOTES["quarantineHealthEvent"]
    assert TAINT_ANNOTATION not in notes


def test_a_taint_nvsentinel_adds_after_ours_survives_our_undo(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    actuators.nodes.taint("n1", _slow(actuators))
    quarantined = _node(k8s_server)
    quarantined["spec"]["taints"].append(NVSENTINEL_TAINT)
    quarantined["metadata"]["annotations"].update(NVSENTINEL_NOTES)
    k8s_server.apply(quarantined)

    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is Outcome.UNDONE

    assert _node(k8s_server)["spec"]["taints"] == [NVSENTINEL_TAINT]


def test_a_human_cordon_is_never_ours_to_count_or_undo(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    body = node("n1")
    body["spec"]["unschedulable"] = True
    k8s_server.apply(body)

    assert our_marks(_node(k8s_server)) == frozenset()
    assert actuators.nodes.cordon("n1", _slow(actuators)).outcome is Outcome.NOT_OURS
    assert actuators.nodes.uncordon("n1", _recovered(actuators)).outcome is Outcome.NOT_OURS
    after = _node(k8s_server)
    assert after["spec"]["unschedulable"] is True
    assert CORDON_ANNOTATION not in after["metadata"].get("annotations", {})
