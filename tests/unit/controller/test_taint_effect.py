"""``ladder.taintNode.effect``: NoSchedule by default, NoExecute only when acknowledged as
unsafe (and then warned about), and the effect travels in the decision to the actuator."""

from __future__ import annotations

from typing import Any

import pytest
from controller_builders import Loop, policy_doc

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import (
    TAINT_EFFECT_ANNOTATION,
    TAINT_KEY,
    our_marks,
    recorded_taint_effect,
)
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy import (
    ActionKind,
    Ladder,
    LadderStep,
    PolicyError,
    TaintEffect,
    parse_policy_document,
)

SLOW = 0.4


def _enforce(effect: str, **top: Any) -> dict[str, Any]:
    ladder = {"taintNode": {"enabled": True, "effect": effect}}
    return {"mode": "enforce", "policies": {"default": {"ladder": ladder}}, **top}


def test_the_default_effect_is_noschedule() -> None:
    assert Ladder().taint_node.effect is TaintEffect.NO_SCHEDULE


def test_a_plain_ladder_step_for_the_taint_keeps_its_settings_and_gets_noschedule() -> None:
    ladder = Ladder(taint_node=LadderStep(enabled=True, timeout_s=5.0))  # type: ignore[arg-type]
    assert ladder.taint_node.enabled and ladder.taint_node.timeout_s == 5.0
    assert ladder.taint_node.effect is TaintEffect.NO_SCHEDULE


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule"])
def test_the_gentle_effects_need_no_acknowledgement(effect: str) -> None:
    doc = parse_policy_document(_enforce(effect))
    assert doc.policies["default"].ladder.taint_node.effect.value == effect
    assert doc.warnings() == []


def test_noexecute_in_enforce_mode_is_refused_saying_why_and_how_to_accept() -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy_document(_enforce("NoExecute"), "p.yaml")
    (line,) = e.value.problems
    assert line.startswith("p.yaml: ladder.taintNode.effect=NoExecute in policy 'default' ")
    assert "evicts every pod on the node that does not tolerate the taint" in line
    assert "no PodDisruptionBudget" in line
    assert "Kueue" in line
    assert "acknowledgeUnsafe: [noExecuteTaint]" in line


def test_noexecute_acknowledged_is_accepted_and_still_warned_about() -> None:
    doc = parse_policy_document(_enforce("NoExecute", acknowledgeUnsafe=["noExecuteTaint"]))
    (warning,) = doc.warnings()
    assert warning.endswith("; accepted by acknowledgeUnsafe: noExecuteTaint")


def test_noexecute_outside_enforce_mode_writes_nothing_and_needs_nothing() -> None:
    doc = parse_policy_document({**_enforce("NoExecute"), "mode": "dry-run"})
    assert doc.policies["default"].ladder.taint_node.effect is TaintEffect.NO_EXECUTE


def test_a_mistyped_effect_names_the_three() -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy_document(_enforce("NoExec"), "p.yaml")
    assert e.value.problems == [
        "p.yaml: policy 'default': ladder.taintNode.effect='NoExec' must be one of NoSchedule, "
        "PreferNoSchedule, NoExecute; did you mean 'NoExecute'?"
    ]


@pytest.mark.parametrize("effect", list(TaintEffect))
def test_the_taint_decision_carries_the_policys_effect(effect: TaintEffect) -> None:
    doc = policy_doc(
        {"ladder": {"taintNode": {"effect": effect.value}}},
        {"acknowledgeUnsafe": ["noExecuteTaint"]} if effect is TaintEffect.NO_EXECUTE else {},
    )
    loop = Loop(doc, world=64)
    for _ in range(3):  # slow from the first report, a whole node could be a stage
        loop.step()
    for _ in range(20):
        loop.step(dict.fromkeys(range(8), SLOW))
    taint = next(
        d for d in loop.log if d.action is ActionKind.TAINT_NODE and d.verdict is Verdict.ACT
    )
    assert taint.evidence["taintEffect"] == effect.value
    assert taint.taint_effect is effect


def test_a_decision_without_an_effect_reads_as_noschedule() -> None:
    d = Decision(JobKey("ml/a"), "node/n1", Verdict.ACT, ActionKind.TAINT_NODE, Reason.RECOVERED)
    assert d.taint_effect is TaintEffect.NO_SCHEDULE


def _node(taints: list[dict[str, str]], notes: dict[str, str]) -> dict[str, Any]:
    owner = '{"at":"2026-01-01T00:00:00Z","job":"a","owner":"pacekeeper","policy":"p","reason":"x"}'
    return {
        "metadata": {"annotations": {"pacekeeper.dev/taint": owner, **notes}},
        "spec": {"taints": taints},
    }


def test_our_taint_is_our_key_with_the_effect_we_recorded() -> None:
    ours = {"key": TAINT_KEY, "effect": "NoExecute"}
    recorded = {TAINT_EFFECT_ANNOTATION: "NoExecute"}
    assert recorded_taint_effect(_node([ours], recorded)) == "NoExecute"
    assert our_marks(_node([ours], recorded)) == {MarkKind.TAINT}
    # Our key with an effect we did not record (a person's) is not our mark.
    assert our_marks(_node([ours], {})) == frozenset()
    assert recorded_taint_effect(_node([], {})) == "NoSchedule"
