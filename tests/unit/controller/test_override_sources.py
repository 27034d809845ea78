"""Decisions say when the job's own annotation chose its policy or holds its mode."""

from __future__ import annotations

from controller_builders import Loop, policy_doc

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.policy import Mode

SLOW = {0: 0.3}
POLICY_SOURCE = "annotation pacekeeper.dev/policy"
MODE_SOURCE = "annotation pacekeeper.dev/mode"


def annotated(**fields: object) -> Loop:
    loop = Loop(policy_doc())
    loop.job_fields = dict(fields)
    return loop


def test_a_mode_annotation_that_holds_the_job_in_observe_is_named_by_every_decision() -> None:
    loop = annotated(mode_override=Mode.OBSERVE, mode_source=MODE_SOURCE)
    for _ in range(6):
        loop.step(SLOW)
    held = [d for d in loop.log if d.reason is Reason.OBSERVE_MODE]
    assert held and all(d.evidence["modeSource"] == MODE_SOURCE for d in held)
    assert all(d.evidence.get("modeSource") == MODE_SOURCE for d in loop.log)
    job = next(iter(loop.state.jobs.values()))
    assert job.mode_source == MODE_SOURCE


def test_a_mode_annotation_at_enforce_chose_nothing() -> None:
    loop = annotated(mode_override=Mode.ENFORCE, mode_source=MODE_SOURCE)
    ds = loop.step(SLOW)
    assert all("modeSource" not in d.evidence for d in ds)


def test_a_policy_annotation_is_named_by_the_decisions_and_the_job_state() -> None:
    loop = annotated(policy_name="default", policy_source=POLICY_SOURCE)
    ds = loop.step(SLOW)
    assert ds and all(d.evidence["policySource"] == POLICY_SOURCE for d in ds)
    assert next(iter(loop.state.jobs.values())).policy_source == POLICY_SOURCE


def test_the_default_policy_needs_no_source() -> None:
    ds = annotated().step(SLOW)
    assert all("policySource" not in d.evidence and "modeSource" not in d.evidence for d in ds)


def test_an_unknown_policy_names_its_annotation_and_the_closest_known_one() -> None:
    loop = annotated(policy_name="defualt", policy_source=POLICY_SOURCE)
    (d,) = loop.step(SLOW)
    assert d.reason is Reason.UNKNOWN_POLICY
    assert d.evidence["policySource"] == POLICY_SOURCE
    assert d.evidence["known"] == ["default"]
    assert d.evidence["didYouMean"] == "default"


def test_an_unknown_policy_far_from_any_known_one_suggests_nothing() -> None:
    (d,) = annotated(policy_name="zzz", policy_source=POLICY_SOURCE).step(SLOW)
    assert d.reason is Reason.UNKNOWN_POLICY and "didYouMean" not in d.evidence
