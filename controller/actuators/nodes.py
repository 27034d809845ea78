"""Node marks: our taint (NoSchedule unless the policy chose another effect) and our
cordon, and undoing only our own.

Each method reads the node, decides from what it sees, and writes the change together
with its provenance annotation in one merge patch that carries the resourceVersion it
read: if the node changed in between, the server answers 409 and the step re-reads.
So a repeated call (after a timeout, a 500, a controller restart) finds the mark in
place and changes nothing, and a mark without our provenance is never taken over or
removed. Our taint is the one with our key and the effect we recorded beside it: a taint
of another system (NVSentinel's, a person's) on the same node is never touched, and undo
removes exactly the key and effect we wrote.

Ownership is current, not historic (docs/actuators.md): the runtime passes the time the
controller's record of the mark holds (``marked_at``), and a mark is ours to keep or undo
only while our note on the node carries that time (and, for a taint, the value we wrote).
A note of ours that no record holds was left by a mark a human took over (an uncordon,
then a maintenance cordon): the mark beside it is the human's, never claimed
(``AlreadyApplied``) nor removed, and the stale note is cleared. ``forget`` clears the
note of a mark the core saw a human take.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pacekeeper.controller.actuators.api import Body, KubeApi
from pacekeeper.controller.actuators.errors import NODE_NOT_FOUND, GiveUp, RetryLater
from pacekeeper.controller.actuators.events import (
    EventAction,
    EventRecorder,
    EventType,
    ObjectRef,
)
from pacekeeper.controller.actuators.results import ActionResult, Outcome
from pacekeeper.controller.actuators.retries import RetrySettings, retrying, status_of
from pacekeeper.controller.actuators.unanswered import UnansweredWrites
from pacekeeper.controller.core.marks import (
    CORDON_ANNOTATION,
    TAINT_ANNOTATION,
    TAINT_EFFECT_ANNOTATION,
    TAINT_KEY,
    Provenance,
    current_taint,
    is_cordoned,
    is_our_taint,
    is_record_of,
    our_taint,
    provenance_of,
)
from pacekeeper.controller.core.observations import MarkKind
from pacekeeper.controller.core.policy_types import TaintEffect

logger = logging.getLogger(__name__)


def _taints(node: Body) -> list[Body]:
    return list((node.get("spec") or {}).get("taints") or [])


def _owner_of(node: Body, mark: MarkKind) -> str | None:
    provenance = provenance_of(node, mark)
    return provenance.owner if provenance is not None else None


@dataclass(frozen=True, slots=True)
class _MarkOps:
    """How one kind of mark is seen, added and removed in a node's spec."""

    kind: MarkKind
    annotation: str
    present: Callable[[Body], bool]
    """For marking: is any mark of this kind there (ours or not)? For undo, ``ours_present``."""
    ours_present: Callable[[Body], bool]
    """Is the mark our note describes there as we wrote it (a human's edit makes it theirs;
    ownership is checked apart)?"""
    added: Callable[[Body, Provenance], Body]
    removed: Callable[[Body], Body]
    notes: Callable[[Provenance], dict[str, Any]]
    """The annotations written with the mark (``None`` values: removed with it)."""
    do: EventAction
    undo: EventAction
    done_message: Callable[[Provenance], str]
    undone_message: Callable[[Provenance], str]


def _for_job(provenance: Provenance) -> str:
    return f"for job {provenance.job} (policy {provenance.policy})"


def _taint_ops(effect: TaintEffect) -> _MarkOps:
    """Our taint with ``effect``. Any taint with our key counts as present when marking (a
    second one with another effect would be a second mark); undo sees and removes only
    the one with the effect recorded on the node, never another system's taint."""
    return _MarkOps(
        kind=MarkKind.TAINT,
        annotation=TAINT_ANNOTATION,
        present=lambda node: our_taint(node) is not None,
        ours_present=lambda node: current_taint(node) is not None,
        added=lambda node, provenance: {
            "taints": [
                *_taints(node),
                {"key": TAINT_KEY, "value": str(provenance.reason), "effect": effect.value},
            ]
        },
        removed=lambda node: {"taints": [t for t in _taints(node) if not is_our_taint(t, node)]},
        notes=lambda provenance: {
            TAINT_ANNOTATION: provenance.to_annotation(),
            TAINT_EFFECT_ANNOTATION: effect.value,
        },
        do=EventAction.TAINT_NODE,
        undo=EventAction.UNTAINT_NODE,
        done_message=lambda p: f"Tainted {TAINT_KEY}={p.reason}:{effect.value} {_for_job(p)}",
        undone_message=lambda p: f"Removed {TAINT_KEY} {_for_job(p)}",
    )


# Undo reads the effect from the node, so the effect given here is not used by it.
_UNTAINT = _taint_ops(TaintEffect.NO_SCHEDULE)
_CORDON = _MarkOps(
    kind=MarkKind.CORDON,
    annotation=CORDON_ANNOTATION,
    present=is_cordoned,
    ours_present=is_cordoned,
    added=lambda node, provenance: {"unschedulable": True},
    removed=lambda node: {"unschedulable": None},
    notes=lambda provenance: {CORDON_ANNOTATION: provenance.to_annotation()},
    do=EventAction.CORDON_NODE,
    undo=EventAction.UNCORDON_NODE,
    done_message=lambda p: f"Cordoned {_for_job(p)}",
    undone_message=lambda p: f"Uncordoned {_for_job(p)}",
)


def _cleared(ops: _MarkOps, provenance: Provenance) -> dict[str, Any]:
    return dict.fromkeys(ops.notes(provenance))


class NodeActuator:
    def __init__(
        self,
        api: KubeApi,
        events: EventRecorder,
        *,
        settings: RetrySettings,
        sleep: Callable[[float], None],
    ) -> None:
        self._api = api
        self._events = events
        self._settings = settings
        self._sleep = sleep
        self._unanswered = UnansweredWrites()

    def taint(
        self,
        node: str,
        provenance: Provenance,
        effect: TaintEffect = TaintEffect.NO_SCHEDULE,
        *,
        marked_at: datetime | None = None,
    ) -> ActionResult:
        """Add our taint (value: the reason; ``effect``: the policy's) with its provenance
        and the effect it was written with. ``marked_at``: the time of the controller's
        record of the mark (a taint already there counts as ours only with that time)."""
        return self._mark(node, provenance, _taint_ops(effect), marked_at)

    def untaint(
        self, node: str, provenance: Provenance, *, marked_at: datetime | None = None
    ) -> ActionResult:
        """Remove our taint (our key, the effect we recorded), only if its provenance is
        ours (and of the record ``marked_at`` names); a missing node is done."""
        return self._unmark(node, provenance, _UNTAINT, marked_at)

    def cordon(
        self, node: str, provenance: Provenance, *, marked_at: datetime | None = None
    ) -> ActionResult:
        """Cordon with provenance; a node already cordoned by anyone else stays theirs."""
        return self._mark(node, provenance, _CORDON, marked_at)

    def uncordon(
        self, node: str, provenance: Provenance, *, marked_at: datetime | None = None
    ) -> ActionResult:
        """Uncordon only our own cordon; a human's cordon or uncordon is respected.

        ``marked_at`` None (a caller with no record: tools, older tests) checks the owner
        only; the runtime always passes its record's time."""
        return self._unmark(node, provenance, _CORDON, marked_at)

    def forget(
        self, node: str, kind: MarkKind, provenance: Provenance, *, marked_at: datetime
    ) -> ActionResult:
        """Clear our note of a mark a human took (the core saw the mark gone): the node's
        spec is never touched, so a mark the human put back since stays theirs, and no
        later episode reads it as ours. Without permission to patch nodes (the chart
        grants it only with a node action enabled) the note stays and a log line says so."""
        ops = _CORDON if kind is MarkKind.CORDON else _UNTAINT
        target = f"node/{node}"

        def step() -> ActionResult:
            current = self._read(node, missing_ok=True)
            if current is None or not is_record_of(
                provenance_of(current, kind), provenance.owner, marked_at
            ):
                return ActionResult(Outcome.ALREADY_UNDONE, target)
            self._write(current, {}, _cleared(ops, provenance))
            return ActionResult(Outcome.ALREADY_UNDONE, target, {"annotation": "cleared"})

        try:
            return self._run(f"forget {kind.value}", step)
        except (GiveUp, RetryLater) as exc:
            # The note is harmless to humans now (the core no longer holds the mark, and
            # the actuators claim and undo only what a record holds): leave it, say why.
            logger.warning(
                "stale mark note left on node",
                extra={
                    "node": node,
                    "mark": kind.value,
                    "cause": "no permission to patch nodes (node actions disabled)"
                    if getattr(exc, "http_status", None) == 403
                    else str(exc.reason),
                },
            )
            return ActionResult(Outcome.NOT_OURS, target, {"annotation": "left"})

    # ---- shared steps -------------------------------------------------------------

    def _read(self, node: str, *, missing_ok: bool) -> Body | None:
        try:
            return self._api.read_node(node)
        except Exception as exc:
            if status_of(exc) == 404:
                if missing_ok:
                    return None
                raise GiveUp(NODE_NOT_FOUND, f"node {node!r}") from exc
            raise

    def _write(self, node: Body, spec: Body, annotations: dict[str, Any]) -> Body:
        meta = node["metadata"]
        patch = {
            "metadata": {"resourceVersion": meta["resourceVersion"], "annotations": annotations},
            "spec": spec,
        }
        return self._api.patch_node(meta["name"], patch)

    def _run(
        self,
        what: str,
        step: Callable[[], ActionResult],
        unanswered: Callable[[], bool] = lambda: False,
    ) -> ActionResult:
        result = retrying(
            step, settings=self._settings, sleep=self._sleep, what=what, unanswered=unanswered
        )
        logger.info(
            "node action",
            extra={"what": what, "target": result.target, "outcome": str(result.outcome)},
        )
        return result

    def _mark(
        self, node: str, provenance: Provenance, ops: _MarkOps, marked_at: datetime | None
    ) -> ActionResult:
        target = f"node/{node}"

        def step() -> ActionResult:
            current = self._read(node, missing_ok=False)
            assert current is not None
            if ops.present(current):
                found = provenance_of(current, ops.kind)
                if found is None or found.owner != provenance.owner:
                    return ActionResult(Outcome.NOT_OURS, target, {"mark": str(ops.kind)})
                if marked_at is not None and not (
                    is_record_of(found, provenance.owner, marked_at) and ops.ours_present(current)
                ):
                    # Our note, but not of the mark our record holds: it outlived a mark a
                    # human took (uncordon, then a maintenance cordon). The mark is the
                    # human's: never claimed; the stale note goes.
                    self._write(current, {}, _cleared(ops, provenance))
                    return ActionResult(
                        Outcome.NOT_OURS, target, {"mark": str(ops.kind), "annotation": "cleared"}
                    )
                if found == provenance:
                    # This very action wrote the mark and may have lost its answer (a
                    # timeout) before the Event; the Event's name is deterministic.
                    self._announce(current, provenance, ops.do, ops.done_message)
                return ActionResult(Outcome.ALREADY_APPLIED, target)
            written = self._write(current, ops.added(current, provenance), ops.notes(provenance))
            self._announce(written, provenance, ops.do, ops.done_message)
            return ActionResult(Outcome.APPLIED, target)

        return self._run(str(ops.do), step)

    def _unmark(
        self, node: str, provenance: Provenance, ops: _MarkOps, marked_at: datetime | None
    ) -> ActionResult:
        target = f"node/{node}"
        key = (node, ops.kind, provenance)

        def step() -> ActionResult:
            current = self._read(node, missing_ok=True)
            if current is None:
                self._unanswered.settle(key)
                return ActionResult(Outcome.ALREADY_UNDONE, target, {"node": "gone"})
            present = ops.ours_present(current)
            found = provenance_of(current, ops.kind)
            if found is None or found.owner != provenance.owner:
                if self._unanswered.settle(key) is not None and not present:
                    # Our removal went unanswered (a timeout) and mark and note are both
                    # gone: that removal landed.
                    self._announce(current, provenance, ops.undo, ops.undone_message)
                    return ActionResult(Outcome.UNDONE, target, {"confirmed": "by re-read"})
                return ActionResult(Outcome.NOT_OURS if present else Outcome.ALREADY_UNDONE, target)
            self._unanswered.settle(key)
            if marked_at is not None and not is_record_of(found, provenance.owner, marked_at):
                # A note of ours that the record being released does not hold: left from a
                # mark a human took. Whatever mark is there is theirs; the note goes.
                self._write(current, {}, _cleared(ops, provenance))
                outcome = Outcome.NOT_OURS if ops.present(current) else Outcome.ALREADY_UNDONE
                return ActionResult(outcome, target, {"annotation": "cleared"})
            if not present:
                # Someone removed or changed our mark (a human uncordon, an edited taint):
                # it is theirs; drop our stale note only.
                self._write(current, {}, _cleared(ops, provenance))
                return ActionResult(Outcome.ALREADY_UNDONE, target, {"annotation": "cleared"})
            try:
                written = self._write(current, ops.removed(current), _cleared(ops, provenance))
            except Exception as exc:
                if status_of(exc) in {None, 504}:
                    self._unanswered.remember(key, current)  # no answer: it may have landed
                raise
            self._announce(written, provenance, ops.undo, ops.undone_message)
            return ActionResult(Outcome.UNDONE, target)

        return self._run(str(ops.undo), step, lambda: key in self._unanswered)

    def _announce(
        self,
        node: Body,
        provenance: Provenance,
        action: EventAction,
        message: Callable[[Provenance], str],
    ) -> None:
        disruptive = action in {EventAction.TAINT_NODE, EventAction.CORDON_NODE}
        self._events.record(
            ObjectRef.of(node),
            provenance,
            action,
            message(provenance),
            event_type=EventType.WARNING if disruptive else EventType.NORMAL,
        )
