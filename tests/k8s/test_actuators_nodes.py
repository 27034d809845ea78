"""Node actuators against the API harness: the world after each action, not call order."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from harness import Fault, RunningServer
from harness.objects import node

from pacekeeper.controller.actuators import GiveUp, Outcome, RetryLater
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.marks import (
    CORDON_ANNOTATION,
    TAINT_ANNOTATION,
    TAINT_KEY,
    Provenance,
    our_marks,
)
from pacekeeper.controller.core.observations import MarkKind

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def _slow(actuators: KubernetesActuators) -> Provenance:
    return actuators.provenance("ml/train-a", Reason.BELOW_THRESHOLD, "gpu", NOW)


def _recovered(actuators: KubernetesActuators) -> Provenance:
    return actuators.provenance("ml/train-a", Reason.RECOVERED, "gpu", NOW)


def _node(server: RunningServer, name: str = "n1") -> dict[str, Any]:
    found = server.read("v1", "Node", name)
    assert found is not None
    return found


def _our_taints(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in obj["spec"].get("taints") or [] if t["key"] == TAINT_KEY]


def _events(server: RunningServer, reason: str | None = None) -> list[dict[str, Any]]:
    events = server.list("v1", "Event")
    return [e for e in events if reason is None or e["reason"] == reason]


def test_taint_adds_one_owned_noschedule_taint_with_provenance_and_an_event(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]))

    first = actuators.nodes.taint("n1", _slow(actuators))
    again = actuators.nodes.taint("n1", _slow(actuators))

    assert (first.outcome, again.outcome) == (Outcome.APPLIED, Outcome.ALREADY_APPLIED)
    tainted = _node(k8s_server)
    assert tainted["spec"]["taints"] == [
        {"key": "gpu", "value": "a100", "effect": "NoSchedule"},
        {"key": TAINT_KEY, "value": "BelowThreshold", "effect": "NoSchedule"},
    ]
    assert Provenance.from_annotation(
        tainted["metadata"]["annotations"][TAINT_ANNOTATION]
    ) == _slow(actuators)
    assert our_marks(tainted) == {MarkKind.TAINT}
    (event,) = _events(k8s_server)
    assert event["involvedObject"]["kind"] == "Node"
    assert event["involvedObject"]["name"] == "n1"
    assert (event["reason"], event["action"], event["type"]) == (
        "BelowThreshold",
        "taintNode",
        "Warning",
    )
    assert len(k8s_server.history.find(verb="patch", plural="nodes")) == 1


def test_untaint_removes_only_our_taint_and_its_provenance(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1", taints=[{"key": "gpu", "effect": "NoSchedule"}]))
    actuators.nodes.taint("n1", _slow(actuators))

    result = actuators.nodes.untaint("n1", _recovered(actuators))

    assert result.outcome is Outcome.UNDONE
    untainted = _node(k8s_server)
    assert untainted["spec"]["taints"] == [{"key": "gpu", "effect": "NoSchedule"}]
    assert TAINT_ANNOTATION not in untainted["metadata"].get("annotations", {})
    assert [e["action"] for e in _events(k8s_server, "Recovered")] == ["untaintNode"]


def test_a_taint_with_our_key_but_no_provenance_is_never_removed(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1", taints=[{"key": TAINT_KEY, "effect": "NoSchedule"}]))

    assert actuators.nodes.taint("n1", _slow(actuators)).outcome is Outcome.NOT_OURS
    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is Outcome.NOT_OURS
    assert len(_our_taints(_node(k8s_server))) == 1
    assert k8s_server.history.find(verb="patch") == []


def test_another_installations_taint_is_not_ours(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    other = Provenance("pacekeeper-staging", "ml/x", "BelowThreshold", "gpu", NOW)
    body = node("n1", taints=[{"key": TAINT_KEY, "effect": "NoSchedule"}])
    body["metadata"]["annotations"] = {TAINT_ANNOTATION: other.to_annotation()}
    k8s_server.apply(body)

    assert actuators.nodes.untaint("n1", _recovered(actuators)).outcome is Outcome.NOT_OURS
    assert len(_our_taints(_node(k8s_server))) == 1


def test_untaint_after_someone_removed_our_taint_only_clears_our_note(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    actuators.nodes.taint("n1", _slow(actuators))
    by_hand = _node(k8s_server)
    by_hand["spec"]["taints"] = []
    k8s_server.apply(by_hand)

    result = actuators.nodes.untaint("n1", _recovered(actuators))

    assert result.outcome is Outcome.ALREADY_UNDONE
    assert TAINT_ANNOTATION not in _node(k8s_server)["metadata"].get("annotations", {})
    assert _events(k8s_server, "Recovered") == []


def test_a_human_cordon_is_neither_claimed_nor_undone(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1", unschedulable=True))

    assert actuators.nodes.cordon("n1", _slow(actuators)).outcome is Outcome.NOT_OURS
    assert actuators.nodes.uncordon("n1", _recovered(actuators)).outcome is Outcome.NOT_OURS

    still = _node(k8s_server)
    assert still["spec"]["unschedulable"] is True
    assert CORDON_ANNOTATION not in still["metadata"].get("annotations", {})
    assert k8s_server.history.writes() == []


def test_cordon_then_uncordon_round_trips_with_events(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))

    assert actuators.nodes.cordon("n1", _slow(actuators)).outcome is Outcome.APPLIED
    cordoned = _node(k8s_server)
    assert cordoned["spec"]["unschedulable"] is True
    assert our_marks(cordoned) == {MarkKind.CORDON}
    assert actuators.nodes.cordon("n1", _slow(actuators)).outcome is Outcome.ALREADY_APPLIED

    assert actuators.nodes.uncordon("n1", _recovered(actuators)).outcome is Outcome.UNDONE
    released = _node(k8s_server)
    assert not released["spec"].get("unschedulable")
    assert CORDON_ANNOTATION not in released["metadata"].get("annotations", {})
    assert sorted(e["action"] for e in _events(k8s_server)) == ["cordonNode", "uncordonNode"]


def test_a_human_uncordon_of_our_cordon_is_respected(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    actuators.nodes.cordon("n1", _slow(actuators))
    by_hand = _node(k8s_server)
    by_hand["spec"]["unschedulable"] = False
    k8s_server.apply(by_hand)

    assert actuators.nodes.uncordon("n1", _recovered(actuators)).outcome is Outcome.ALREADY_UNDONE
    after = _node(k8s_server)
    assert not after["spec"]["unschedulable"]
    assert CORDON_ANNOTATION not in after["metadata"].get("annotations", {})


def test_undo_on_a_missing_node_is_done_and_marking_one_gives_up(
    actuators: KubernetesActuators,
) -> None:
    assert actuators.nodes.untaint("gone", _recovered(actuators)).outcome is Outcome.ALREADY_UNDONE
    assert actuators.nodes.uncordon("gone", _recovered(actuators)).outcome is Outcome.ALREADY_UNDONE
    with pytest.raises(GiveUp) as caught:
        actuators.nodes.taint("gone", _slow(actuators))
    assert caught.value.reason == "NodeNotFound"


def test_injected_500s_are_retried_with_backoff_into_one_taint(
    k8s_server: RunningServer, actuators: KubernetesActuators, backoff_sleeps: list[float]
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=500, times=2, verb="patch", plural="nodes"))

    assert actuators.nodes.taint("n1", _slow(actuators)).outcome is Outcome.APPLIED

    assert len(_our_taints(_node(k8s_server))) == 1
    statuses = [r.status for r in k8s_server.history.find(verb="patch", plural="nodes")]
    assert statuses == [500, 500, 200]
    assert backoff_sleeps == [0.2, 0.4]
    assert len(_events(k8s_server)) == 1


def test_injected_409_rereads_and_applies_once(
    k8s_server: RunningServer, actuators: KubernetesActuators, backoff_sleeps: list[float]
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=409, reason="Conflict", verb="patch"))

    assert actuators.nodes.cordon("n1", _slow(actuators)).outcome is Outcome.APPLIED
    assert [r.status for r in k8s_server.history.find(verb="patch")] == [409, 200]
    assert len(k8s_server.history.find(verb="get", plural="nodes")) == 2
    assert backoff_sleeps == []


def test_a_write_whose_answer_times_out_is_not_repeated(
    k8s_server: RunningServer, k8s_api_client: Any, backoff_sleeps: list[float]
) -> None:
    actuators = KubernetesActuators(
        k8s_api_client, settings=RetrySettings(request_timeout_s=0.3), sleep=backoff_sleeps.append
    )
    k8s_server.apply(node("n1"))
    # Served at once, answered after the client gave up: the taint landed.
    k8s_server.inject(Fault(status=None, delay_s=1.0, verb="patch"))

    result = actuators.nodes.taint("n1", _slow(actuators))

    assert result.outcome is Outcome.ALREADY_APPLIED
    assert len(_our_taints(_node(k8s_server))) == 1
    assert len(k8s_server.history.find(verb="patch")) == 1
    assert len(_events(k8s_server, "BelowThreshold")) == 1  # posted by the re-read


def test_a_lasting_outage_asks_to_retry_later_and_changes_nothing(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=503, times=100, verb="patch"))

    with pytest.raises(RetryLater) as caught:
        actuators.nodes.taint("n1", _slow(actuators))
    assert caught.value.reason == "ApiUnavailable"
    assert caught.value.delay_s > 0
    assert _our_taints(_node(k8s_server)) == []
    assert len(k8s_server.history.find(verb="patch")) == actuators.settings.attempts


def test_a_forbidden_write_gives_up_at_once(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=403, reason="Forbidden", verb="patch"))
    with pytest.raises(GiveUp) as caught:
        actuators.nodes.cordon("n1", _slow(actuators))
    assert caught.value.reason == "ApiRefused"
    assert len(k8s_server.history.find(verb="patch")) == 1


def _human_cordons(server: Any) -> None:
    current = server.read("v1", "Node", "n1")
    current["spec"]["unschedulable"] = True
    server.apply(current)


def test_a_human_cordon_racing_our_cordon_stays_the_humans(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=None, verb="patch", before=_human_cordons))

    result = actuators.nodes.cordon("n1", _slow(actuators))

    assert result.outcome is Outcome.NOT_OURS
    after = _node(k8s_server)
    assert after["spec"]["unschedulable"] is True
    assert CORDON_ANNOTATION not in after["metadata"].get("annotations", {})
    assert [r.status for r in k8s_server.history.find(verb="patch")] == [409]
    assert _events(k8s_server) == []


def test_a_human_cordon_racing_our_taint_is_kept_beside_it(
    k8s_server: RunningServer, actuators: KubernetesActuators
) -> None:
    k8s_server.apply(node("n1"))
    k8s_server.inject(Fault(status=None, verb="patch", before=_human_cordons))

    assert actuators.nodes.taint("n1", _slow(actuators)).outcome is Outcome.APPLIED

    after = _node(k8s_server)
    assert after["spec"]["unschedulable"] is True
    assert len(_our_taints(after)) == 1
    assert our_marks(after) == {MarkKind.TAINT}


def test_an_uncordon_whose_answer_times_out_is_confirmed_once(
    k8s_server: RunningServer, k8s_api_client: Any, backoff_sleeps: list[float]
) -> None:
    actuators = KubernetesActuators(
        k8s_api_client, settings=RetrySettings(request_timeout_s=0.2), sleep=backoff_sleeps.append
    )
    k8s_server.apply(node("n1"))
    actuators.nodes.cordon("n1", _slow(actuators))
    k8s_server.inject(Fault(status=None, delay_s=0.5, verb="patch"))

    result = actuators.nodes.uncordon("n1", _recovered(actuators))

    assert result.outcome is Outcome.UNDONE
    assert not _node(k8s_server)["spec"].get("unschedulable")
    assert len(k8s_server.history.find(verb="patch")) == 2
    assert [e["action"] for e in _events(k8s_server, "Recovered")] == ["uncordonNode"]


def test_an_unconfirmed_untaint_is_settled_by_the_next_call(
    k8s_server: RunningServer, k8s_api_client: Any, backoff_sleeps: list[float]
) -> None:
    actuators = KubernetesActuators(
        k8s_api_client, settings=RetrySettings(request_timeout_s=0.2), sleep=backoff_sleeps.append
    )
    k8s_server.apply(node("n1"))
    actuators.nodes.taint("n1", _slow(actuators))
    k8s_server.inject(Fault(status=None, delay_s=0.5, verb="patch"))
    k8s_server.inject(Fault(status=500, times=100, verb="get", skip=1))
    with pytest.raises(RetryLater):
        actuators.nodes.untaint("n1", _recovered(actuators))
    k8s_server.faults.clear()

    result = actuators.nodes.untaint("n1", _recovered(actuators))

    assert result.outcome is Outcome.UNDONE
    assert _our_taints(_node(k8s_server)) == []
    assert [e["action"] for e in _events(k8s_server, "Recovered")] == ["untaintNode"]
