"""Every key the controller writes on objects it touches, and how to read them back.

A mark is a change we make to somebody else's object (a node taint, a cordon). Each
carries a provenance annotation — owner, job, reason, policy and time — in the same
write as the change itself, so that the controller undoes only what it did: a taint
with our key but without our provenance, or a cordon a human made, is never removed.

Our provenance alone does not make a mark ours: the note outlives a human's uncordon
(``kubectl cordon``/``uncordon`` leave annotations alone), so a later maintenance
cordon would carry it too. A mark is ours only while it is *current*: our note, its
time the one the controller's own record of the mark holds (``is_record_of``), and for a
taint the value we wrote (``current_taint``: a human who edits it took it over).

Pure: no Kubernetes client here, only the JSON shapes the API serves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy_types import TaintEffect

DOMAIN = "pacekeeper.dev"
DEFAULT_OWNER = "pacekeeper"
"""Default `owner` in provenance; two installations in one cluster must differ."""

TAINT_KEY = f"{DOMAIN}/straggler"
"""Ours alone: other systems that taint nodes (NVSentinel, the node lifecycle controller,
cloud autoscalers, people) use their own keys, so a taint is ours only with this key, the
effect we recorded and our provenance (docs/integrations.md)."""
TAINT_EFFECT = TaintEffect.NO_SCHEDULE.value
"""The default effect: a taint keeps new pods off a slow node; evicting running ones is a
separate, budgeted action (drain). A policy may choose another (``ladder.taintNode.effect``;
NoExecute only when acknowledged as unsafe)."""

TAINT_ANNOTATION = f"{DOMAIN}/taint"
"""Node annotation: provenance of our taint."""
TAINT_EFFECT_ANNOTATION = f"{DOMAIN}/taint-effect"
"""Node annotation: the effect of the taint we wrote, so that undo removes exactly that
taint (key and effect) even after the policy changed its effect. Absent (written before
effects could be chosen): NoSchedule."""
CORDON_ANNOTATION = f"{DOMAIN}/cordon"
"""Node annotation: provenance of our cordon (`spec.unschedulable`)."""

ANNOTATION_OF_MARK: dict[MarkKind, str] = {
    MarkKind.TAINT: TAINT_ANNOTATION,
    MarkKind.CORDON: CORDON_ANNOTATION,
}

EVENT_COMPONENT = "pacekeeper-controller"
"""`source.component` and `reportingComponent` of the Events we post."""
EVENT_JOB_ANNOTATION = f"{DOMAIN}/job"
EVENT_POLICY_ANNOTATION = f"{DOMAIN}/policy"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
"""Label on the Events we create (value: the owner)."""


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who made a mark, for which job, why, under which policy, and when."""

    owner: str
    job: str
    reason: str
    policy: str
    at: datetime

    def to_annotation(self) -> str:
        return json.dumps(
            {
                "owner": self.owner,
                "job": self.job,
                "reason": str(self.reason),
                "policy": self.policy,
                "at": self.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            },
            sort_keys=True,
            separators=(",", ":"),
        )

    @classmethod
    def from_annotation(cls, text: str | None) -> Provenance | None:
        """Parse our annotation; anything malformed reads as `None` (not ours)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            at = datetime.fromisoformat(str(data["at"]).replace("Z", "+00:00"))
            provenance = cls(
                owner=str(data["owner"]),
                job=str(data["job"]),
                reason=str(data["reason"]),
                policy=str(data["policy"]),
                at=at if at.tzinfo else at.replace(tzinfo=UTC),
            )
        except (ValueError, TypeError, KeyError):
            return None
        return provenance


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def provenance_of(obj: Mapping[str, Any], mark: MarkKind) -> Provenance | None:
    return Provenance.from_annotation(_annotations(obj).get(ANNOTATION_OF_MARK[mark]))


def owns(obj: Mapping[str, Any], mark: MarkKind, owner: str) -> bool:
    provenance = provenance_of(obj, mark)
    return provenance is not None and provenance.owner == owner


def our_taint(node: Mapping[str, Any], effect: str | None = None) -> Mapping[str, Any] | None:
    """The taint with our key (and ``effect``, when given) on `node`, whoever put it there."""
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("key") == TAINT_KEY and effect in (None, taint.get("effect")):
            return dict(taint)
    return None


def recorded_taint_effect(node: Mapping[str, Any]) -> str:
    """The effect we recorded writing our taint on `node` (NoSchedule when none was)."""
    return _annotations(node).get(TAINT_EFFECT_ANNOTATION) or TAINT_EFFECT


def is_our_taint(taint: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether `taint` is the one we wrote on `node`: our key and the effect we recorded.
    Ownership (our provenance) is checked apart."""
    return taint.get("key") == TAINT_KEY and taint.get("effect") == recorded_taint_effect(node)


def current_taint(node: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """Our taint as we wrote it: our key, the effect we recorded and, where the taint has
    a value, the reason our note records (we always write one). A taint with our key that
    a human edited (``kubectl taint ...=maintenance --overwrite``) no longer matches its
    note: it is the human's, never ours to remove. Ownership (our provenance) is apart."""
    taint = our_taint(node, recorded_taint_effect(node))
    if taint is None:
        return None
    value = taint.get("value")
    provenance = provenance_of(node, MarkKind.TAINT)
    if value and provenance is not None and value != provenance.reason:
        return None
    return taint


def is_record_of(provenance: Provenance | None, owner: str, marked_at: datetime) -> bool:
    """Whether a note on a node is the one the controller's record of a mark describes:
    ours (``owner``) and written at the record's time. Any other note of ours is left from
    a mark that is gone (one a human took over): it makes nothing ours."""
    return provenance is not None and provenance.owner == owner and provenance.at == marked_at


def is_cordoned(node: Mapping[str, Any]) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def our_marks(node: Mapping[str, Any], owner: str = DEFAULT_OWNER) -> frozenset[MarkKind]:
    """Marks present on `node` that carry `owner`'s provenance (for `NodeView.our_marks`)."""
    marks: set[MarkKind] = set()
    if current_taint(node) is not None and owns(node, MarkKind.TAINT, owner):
        marks.add(MarkKind.TAINT)
    if is_cordoned(node) and owns(node, MarkKind.CORDON, owner):
        marks.add(MarkKind.CORDON)
    return frozenset(marks)
