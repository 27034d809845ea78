"""The Ray-side controller: the decision core run against the ScoreBoard actor.

``ScoreBoardSource`` turns the board's recent reports into ``JobView``s (a report that
fails validation becomes a ``RejectedReport``: counted, never acted on). ``RayRunner``
is one level-based pass — read every job, decide, persist, act — repeated by
``run_forever``. State lives in the GCS key-value store (namespace ``pacekeeper``), is
written before acting, and is read back by a restarted runner, so a restart neither
loses nor repeats an action. Ray has no node marks: taints and cordons exist only in
that state (the runner reports them back to the core as present), drains go to Ray.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pacekeeper.controller.actuators.errors import GiveUp, RetryLater
from pacekeeper.controller.actuators.ray import RayActuators
from pacekeeper.controller.core.decisions import Decision, Verdict, summary_lines
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import (
    ClusterView,
    JobView,
    MarkKind,
    NodeView,
    RejectedReport,
    Window,
)
from pacekeeper.controller.core.policy import ActionKind, Mode, PolicyDocument
from pacekeeper.controller.core.state import State
from pacekeeper.detector.score_report import ReportRejected, ScoreReport

logger = logging.getLogger(__name__)

STATE_KEY = "controller/state"
KV_NAMESPACE = "pacekeeper"
DEFAULT_WINDOW_REPORTS = 16


class ScoreBoardSource:
    """Reads the ScoreBoard actor (``ray.init`` first)."""

    def __init__(self, board: Any = None, *, window_reports: int = DEFAULT_WINDOW_REPORTS):
        self._board = board
        self.window_reports = window_reports

    def _handle(self) -> Any:
        if self._board is None:
            from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

            self._board = get_scoreboard(create=False)
        return self._board

    def job_views(self, now: datetime) -> list[JobView]:
        import ray

        board = self._handle()
        views = []
        for head in ray.get(board.jobs.remote()):
            key = JobKey(head["job"])
            wires = ray.get(board.window.remote(key, n=self.window_reports))
            items: list[ScoreReport | RejectedReport] = []
            for wire in wires:
                try:
                    report = ScoreReport.from_wire(wire)
                except ReportRejected as e:
                    items.append(RejectedReport(received_at=now, error=str(e)))
                    continue
                if report.job.key != key:
                    items.append(
                        RejectedReport(received_at=now, error=f"report.job is {report.job.key!r}")
                    )
                    continue
                items.append(report)
            valid = [r for r in items if isinstance(r, ScoreReport)]
            if not valid:
                continue
            job = valid[-1].job
            views.append(
                JobView(key=key, reports=tuple(items), namespace=job.namespace, name=job.name)
            )
        return views

    def forget(self) -> None:
        """Drop the actor handle (the board restarted or moved); resolved again on use."""
        self._board = None


class KvStateStore:
    """The runner's ``State`` as one JSON value in the GCS key-value store."""

    def __init__(self, key: str = STATE_KEY) -> None:
        self.key = key

    def load(self) -> State:
        from ray.experimental import internal_kv

        raw = internal_kv._internal_kv_get(self.key, namespace=KV_NAMESPACE)
        if raw is None:
            return State()
        return State.from_dict(json.loads(raw))

    def save(self, state: State) -> None:
        from ray.experimental import internal_kv

        internal_kv._internal_kv_put(
            self.key, json.dumps(state.to_dict()), overwrite=True, namespace=KV_NAMESPACE
        )


@dataclass
class PassResult:
    decisions: tuple[Decision, ...] = ()
    drained: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    recheck_at: datetime | None = None


def cluster_view_of(views: list[JobView], state: State) -> ClusterView:
    """Nodes the reports name; a node's marks are those our state holds as applied (Ray
    has no marks of its own to read back)."""
    names = {
        NodeName(r.node)
        for v in views
        for rep in v.reports
        if isinstance(rep, ScoreReport)
        for r in rep.ranks
    }
    names |= set(state.cluster.nodes)
    nodes = {}
    for name in sorted(names):
        ns = state.cluster.nodes.get(name)
        marks = (
            frozenset(k for k, rec in ns.marks.items() if not rec.simulated)
            if ns is not None
            else frozenset()
        )
        nodes[name] = NodeView(name=name, our_marks=marks, unschedulable=MarkKind.CORDON in marks)
    return ClusterView(nodes=nodes)


class RayRunner:
    def __init__(
        self,
        policies: PolicyDocument,
        *,
        source: ScoreBoardSource | None = None,
        store: KvStateStore | None = None,
        actuators: RayActuators | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.policies = policies
        self.source = source or ScoreBoardSource()
        self.store = store or KvStateStore()
        self.actuators = actuators or RayActuators()
        self._clock = clock

    def run_once(self) -> PassResult:
        now = self._clock()
        views = self.source.job_views(now)
        state = self.store.load()
        outcome = decide(Window(jobs=tuple(views), cluster=cluster_view_of(views, state)),
                         state, self.policies, now)  # fmt: skip
        # Persist before acting: a crash after this re-reads a state that already holds
        # the decision, so the action is not decided twice.
        if outcome.next_state != state:
            self.store.save(outcome.next_state)
        result = PassResult(decisions=outcome.decisions, recheck_at=outcome.recheck_at)
        for line in summary_lines(outcome.decisions):
            logger.info("decision", extra={"summary": line})
        for d in outcome.decisions:
            self._apply(d, result)
        return result

    def _apply(self, d: Decision, result: PassResult) -> None:
        if d.verdict is not Verdict.ACT or d.action is None or d.mode is not Mode.ENFORCE:
            return  # holds (observe, budgets...) and undos of state-only marks: nothing to do
        try:
            match d.action:
                case ActionKind.DRAIN_NODE:
                    ids = [str(i) for i in d.evidence.get("rayNodeIds") or []]
                    if not ids:
                        raise GiveUp("NoRayNode", f"no Ray node id for {d.subject}")
                    message = f"pacekeeper: {d.reason.value} ({d.policy}, job {d.job})"
                    self.actuators.drain_nodes(ids, message)
                    result.drained.extend(ids)
                case ActionKind.RESTART_RANK:
                    result.restarted.extend(
                        self.actuators.restart_workers(d.evidence.get("rayWorkers") or [])
                    )
                case ActionKind.NOTIFY | ActionKind.TAINT_NODE | ActionKind.CORDON_NODE:
                    logger.info(
                        "action recorded",
                        extra={"job": d.job, "action": d.action.value, "subject": d.subject},
                    )
        except (GiveUp, RetryLater) as e:
            result.failed.append(f"{d.action.value} {d.subject}: {e}")
            logger.error(
                "action failed",
                extra={"job": d.job, "action": d.action.value, "subject": d.subject,
                       "error": str(e)},
            )  # fmt: skip

    def run_forever(self, stop: threading.Event, interval_s: float = 10.0) -> None:
        """Passes every ``interval_s`` (sooner when the core asks) until ``stop`` is set."""
        while not stop.is_set():
            wait = interval_s
            try:
                result = self.run_once()
                if result.recheck_at is not None:
                    soon = (result.recheck_at - self._clock()).total_seconds()
                    wait = max(0.5, min(interval_s, soon))
            except Exception:
                logger.exception("ray runner pass failed")
                self.source.forget()
            stop.wait(wait)


def main(argv: list[str] | None = None) -> None:
    """``python -m pacekeeper.controller.sources.ray_scoreboard --policy FILE``: run the
    Ray-side controller on the cluster at ``--address`` (default: ``auto``)."""
    import argparse

    import ray

    from pacekeeper.controller.core.policy import load_policy_file

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--policy", required=True, help="RemediationPolicies YAML file")
    parser.add_argument("--address", default="auto", help="Ray cluster address")
    parser.add_argument("--interval-s", type=float, default=10.0, help="seconds between passes")
    args = parser.parse_args(argv)
    policies = load_policy_file(args.policy)  # raises naming the field on a bad policy
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    ray.init(address=args.address, namespace="pacekeeper", log_to_driver=False)
    stop = threading.Event()
    try:
        RayRunner(policies).run_forever(stop, interval_s=args.interval_s)
    except KeyboardInterrupt:
        stop.set()


if __name__ == "__main__":
    main()
