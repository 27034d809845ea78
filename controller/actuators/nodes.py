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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pacekeeper.controller.actuators.api import Body, KubeApi
from pacekeeper.controller.actuators.errors import NODE_NOT_FOUND, GiveUp
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
    is_cordoned,
    is_our_taint,
    our_taint,
    provenance_of,
    recorded_taint_effect,
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
        ours_present=lambda node: our_taint(node, recorded_taint_effect(node)) is not None,
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
    ) -> ActionResult:
        """Add our taint (value: the reason; ``effect``: the policy's) with its provenance
        and the effect it was written with."""
        return self._mark(node, provenance, _taint_ops(effect))

    def untaint(self, node: str, provenance: Provenance) -> ActionResult:
        """Remove our taint (our key, the effect we recorded), only if its provenance is
        ours; a missing node is done."""
        return self._unmark(node, provenance, _UNTAINT)

    def cordon(self, node: str, provenance: Provenance) -> ActionResult:
        """Cordon with provenance; a node already cordoned by anyone else stays theirs."""
        return self._mark(node, provenance, _CORDON)

    def uncordon(self, node: str, provenance: Provenance) -> ActionResult:
        """Uncordon only our own cordon; a human's cordon or uncordon is respected."""
        return self._unmark(node, provenance, _CORDON)

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

    def _mark(self, node: str, provenance: Provenance, ops: _MarkOps) -> ActionResult:
        target = f"node/{node}"

        def step() -> ActionResult:
            current = self._read(node, missing_ok=False)
            assert current is not None
            if ops.present(current):
                if _owner_of(current, ops.kind) != provenance.owner:
                    return ActionResult(Outcome.NOT_OURS, target, {"mark": str(ops.kind)})
                if provenance_of(current, ops.kind) == provenance:
                    # This very action wrote the mark and may have lost its answer (a
                    # timeout) before the Event; the Event's name is deterministic.
                    self._announce(current, provenance, ops.do, ops.done_message)
                return ActionResult(Outcome.ALREADY_APPLIED, target)
            written = self._write(current, ops.added(current, provenance), ops.notes(provenance))
            self._announce(written, provenance, ops.do, ops.done_message)
            return ActionResult(Outcome.APPLIED, target)

        return self._run(str(ops.do), step)

    def _unmark(self, node: str, provenance: Provenance, ops: _MarkOps) -> ActionResult:
        target = f"node/{node}"
        key = (node, ops.kind, provenance)

        def step() -> ActionResult:
            current = self._read(node, missing_ok=True)
            if current is None:
                self._unanswered.settle(key)
                return ActionResult(Outcome.ALREADY_UNDONE, target, {"node": "gone"})
            present = ops.ours_present(current)
            if _owner_of(current, ops.kind) != provenance.owner:
                if self._unanswered.settle(key) is not None and not present:
                    # Our removal went unanswered (a timeout) and mark and note are both
                    # gone: that removal landed.
                    self._announce(current, provenance, ops.undo, ops.undone_message)
                    return ActionResult(Outcome.UNDONE, target, {"confirmed": "by re-read"})
                return ActionResult(Outcome.NOT_OURS if present else Outcome.ALREADY_UNDONE, target)
            self._unanswered.settle(key)
            if not present:
                # Someone removed our mark (a human uncordon): drop our stale note only.
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
