"""The Ray-side controller: the decision core run against the ScoreBoard actor.

``ScoreBoardSource`` turns the board's recent reports into ``JobView``s: a report that
fails validation becomes a ``RejectedReport`` (counted, never acted on), and so does one
whose ranks Ray does not place in the job (``UntrustedReport``, ``ray_trust.py``): the
controller believes a report's numbers, never its placements. ``RayRunner`` is one
level-based pass — read every job, decide, persist, act — repeated by ``run_forever``.
State lives in the GCS key-value store (namespace ``pacekeeper``), signed
(``ray_state_store.py``); it is written before acting and read back by a restarted
runner, so a restart neither loses nor repeats an action, and a state someone else wrote
stops the runner instead of steering it. Ray has no node marks: taints and cordons exist
only in that state (the runner reports them back to the core as present), drains go to
Ray. Before a drain or a restart, the targets are checked again against the job's live
actors. Under ``confirm: probe`` the runner asks the job for its probe through the board's
runtime control, which only the holder of the board's control key may write
(``detector/reporters/board_control.py``): without the key it warns and the node step
keeps waiting.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pacekeeper.controller.actuators.errors import GiveUp, RetryLater
from pacekeeper.controller.actuators.ray import RayActuators
from pacekeeper.controller.core.decisions import (
    JOB_SUBJECT,
    Decision,
    Reason,
    Verdict,
    summary_lines,
)
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
from pacekeeper.controller.core.report_columns import columnar
from pacekeeper.controller.core.state import State
from pacekeeper.controller.sources.ray_records import RayRecords
from pacekeeper.controller.sources.ray_state_store import KV_NAMESPACE, STATE_KEY, KvStateStore
from pacekeeper.controller.sources.ray_trust import (
    RayActor,
    confirm_nodes,
    confirm_workers,
    place_ray_report,
    ray_job_of,
    wrong_platform,
)
from pacekeeper.controller.sources.signed_state import StateTampered
from pacekeeper.detector.score_report import ReportRejected, ScoreReport

logger = logging.getLogger(__name__)

__all__ = [
    "CONTROL_KEY_FILE_ENV",
    "KV_NAMESPACE",
    "STATE_KEY",
    "KvStateStore",
    "PassResult",
    "RayRunner",
    "ScoreBoardSource",
    "StateTampered",
    "cluster_view_of",
    "load_control_key",
]

DEFAULT_WINDOW_REPORTS = 16
_REFUSALS_REMEMBERED = 4096
CONTROL_KEY_FILE_ENV = "PACEKEEPER_CONTROL_KEY_FILE"
MIN_CONTROL_KEY_CHARS = 16
"""Any driver may call ``set_control`` with guesses: a short key would be found."""
_BOARD_CALL_TIMEOUT_S = 10.0


def load_control_key(path: Path | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """The ScoreBoard's control key, from ``path``, else the file named by
    ``$PACEKEEPER_CONTROL_KEY_FILE``; None when neither is given (the runner then never
    writes a job's control). A file, never an argument: argv is readable by every user
    of the machine. Raises ValueError for a file that is missing, unreadable or short:
    an operator who named a key expects it used."""
    env = os.environ if env is None else env
    if path is None:
        named = env.get(CONTROL_KEY_FILE_ENV)
        if not named:
            return None
        path = Path(named)
    try:
        key = path.read_text().strip()
        mode = path.stat().st_mode
    except OSError as e:
        raise ValueError(f"control key file {path}: {e.strerror or e}") from e
    if len(key) < MIN_CONTROL_KEY_CHARS:
        raise ValueError(
            f"control key file {path}: {len(key)} characters, need at least "
            f"{MIN_CONTROL_KEY_CHARS} (e.g. `openssl rand -hex 32`)"
        )
    if mode & 0o077:
        # Whoever reads it controls every job on the board (docs/security.md).
        logger.warning("control key file is readable by other users", extra={"path": str(path)})
    return key


class ScoreBoardSource:
    """Reads the ScoreBoard actor (``ray.init`` first) and places every report with Ray's
    records. ``verify_placement=False`` believes the reports' placements: only for a
    runner that never acts (``RayRunner`` refuses it in enforce mode), e.g. a demo whose
    ranks are not Ray actors."""

    def __init__(
        self,
        board: Any = None,
        *,
        window_reports: int = DEFAULT_WINDOW_REPORTS,
        records: RayRecords | None = None,
        verify_placement: bool = True,
        control_key: str | None = None,
    ):
        self._board = board
        self._control_key = control_key
        """Only for a board this source creates: the board keeps its digest."""
        self.window_reports = window_reports
        self.records = records or RayRecords()
        self.verify_placement = verify_placement
        self.alive_nodes: frozenset[str] | None = None
        """Ray's alive nodes at the last ``job_views`` (None without verification)."""
        self.untrusted: list[tuple[JobKey, RejectedReport]] = []
        """The reports the last ``job_views`` refused for their placements."""

    def _handle(self) -> Any:
        if self._board is None:
            from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

            # Created here when missing: a board the controller made holds a store key
            # no job has seen (docs/security.md, Ray).
            self._board = get_scoreboard(create=True, control_key=self._control_key)
        return self._board

    def job_views(self, now: datetime) -> list[JobView]:
        """Views of the jobs with at least one report that validates and places: a job
        whose every report was refused never reaches the core (it can spend no budget
        and leave no state). Refusals for placement are kept in ``untrusted``."""
        import ray

        board = self._handle()
        self.untrusted = []
        if self.verify_placement:
            self.alive_nodes = self.records.alive_nodes()
        views = []
        heads = ray.get(board.jobs.remote())
        self.records.keep({h for head in heads if (h := ray_job_of(head["job"])) is not None})
        for head in heads:
            key = JobKey(head["job"])
            wires = ray.get(board.window.remote(key, n=self.window_reports))
            items = self._items(key, wires, now)
            self.untrusted.extend(
                (key, r)
                for r in items
                if isinstance(r, RejectedReport) and r.reason is Reason.UNTRUSTED_REPORT
            )
            valid = [r for r in items if isinstance(r, ScoreReport)]
            if not valid:
                continue
            # The newest report's columns read once here (issue 42): every decision
            # reads it; the older ones of the window were mostly absorbed already.
            newest = max(valid, key=lambda r: (r.generated_at, r.sequence))
            items = [columnar(r) if r is newest else r for r in items]
            job = valid[-1].job
            views.append(
                JobView(key=key, reports=tuple(items), namespace=job.namespace, name=job.name)
            )
        return views

    def _items(
        self, key: JobKey, wires: list[Any], now: datetime
    ) -> list[ScoreReport | RejectedReport]:
        items: list[ScoreReport | RejectedReport] = []
        placed: set[tuple[str, int]] | None = None
        for wire in wires:
            try:
                report = ScoreReport.from_wire(wire)
            except ReportRejected as e:
                items.append(RejectedReport(received_at=now, error=str(e)))
                continue
            if (wrong := wrong_platform(report, now)) is not None:
                items.append(wrong)
                continue
            if report.job.key != key:
                items.append(
                    RejectedReport(received_at=now, error=f"report.job is {report.job.key!r}")
                )
                continue
            if not self.verify_placement:
                items.append(report)
                continue
            job_hex = ray_job_of(key)
            if job_hex is None:
                items.append(
                    RejectedReport(
                        received_at=min(report.generated_at, now),
                        error=f"job {key!r} is not a Ray job: Ray cannot place its ranks",
                        reason=Reason.UNTRUSTED_REPORT,
                        evidence={"sequence": report.sequence},
                    )
                )
                continue
            if placed is None:
                placed = self.records.placed(job_hex, self.records.job_actors(job_hex))
            items.append(place_ray_report(report, placed, now))
        return items

    def forget(self) -> None:
        """Drop the actor handle (the board restarted or moved); resolved again on use."""
        self._board = None


@dataclass
class PassResult:
    decisions: tuple[Decision, ...] = ()
    drained: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    recheck_at: datetime | None = None
    refused: list[Decision] = field(default_factory=list)
    """What this pass would not believe or do, as holds with reason ``UntrustedReport``:
    a report first seen placing ranks where Ray has no actor of the job, or an action
    whose targets are not (any longer) live actors of the job."""
    halted: str | None = None
    """Why this pass decided and did nothing (the stored state did not verify)."""


def cluster_view_of(
    views: list[JobView], state: State, *, total_nodes: int | None = None
) -> ClusterView:
    """Nodes the (placed) reports name; a node's marks are those our state holds as
    applied (Ray has no marks of its own to read back). ``total_nodes``: Ray's count of
    alive nodes, so percentage budgets count Ray's nodes, not the reports'."""
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
    return ClusterView(nodes=nodes, total_nodes=total_nodes)


class RayRunner:
    def __init__(
        self,
        policies: PolicyDocument,
        *,
        source: ScoreBoardSource | None = None,
        store: KvStateStore | None = None,
        actuators: RayActuators | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        control_key: str | None = None,
    ) -> None:
        """``control_key``: the board's control key, to ask jobs for their confirmation
        probe (``confirm: probe``); a default source creates a missing board with it."""
        self.policies = policies
        self.source = source or ScoreBoardSource(control_key=control_key)
        self._control_key = control_key
        if not self.source.verify_placement and policies.mode is Mode.ENFORCE:
            raise ValueError(
                "RayRunner: enforce mode needs verify_placement (a runner that believes "
                "the reports' placements may only observe or dry-run)"
            )
        self.store = store or KvStateStore.from_key_file()
        self.actuators = actuators or RayActuators()
        self._clock = clock
        self.counters = {
            "untrusted_reports": 0,
            "refused_actions": 0,
            "state_refused": 0,
            "probe_requested": 0,
            "probe_request_failed": 0,
        }
        self._refusals_seen: collections.OrderedDict[tuple[str, object, str], None] = (
            collections.OrderedDict()
        )
        self._probe_said: collections.OrderedDict[str, str] = collections.OrderedDict()
        """Per job, the last probe-request problem logged (each said once, not per pass)."""
        self._halt_said: str | None = None

    def run_once(self) -> PassResult:
        now = self._clock()
        try:
            state = self.store.load()
        except StateTampered as e:
            return self._halt(str(e))
        self._halt_said = None
        views = self.source.job_views(now)
        alive = self.source.alive_nodes
        total = None if alive is None else len(alive)
        window = Window(jobs=tuple(views), cluster=cluster_view_of(views, state, total_nodes=total))
        outcome = decide(window, state, self.policies, now)
        # Persist before acting: a crash after this re-reads a state that already holds
        # the decision, so the action is not decided twice.
        if outcome.next_state != state:
            self.store.save(outcome.next_state)
        result = PassResult(recheck_at=outcome.recheck_at)
        self._note_untrusted(now, result)
        for line in summary_lines(outcome.decisions):
            logger.info("decision", extra={"summary": line})
        result.decisions = tuple(self._apply(d, result) for d in outcome.decisions)
        return result

    def stats(self) -> dict[str, int]:
        return dict(self.counters)

    def _halt(self, why: str) -> PassResult:
        self.counters["state_refused"] += 1
        if why != self._halt_said:  # once per cause: the runner retries every pass
            logger.error(
                "controller state refused, taking no action",
                extra={"key": self.store.key, "reason": why},
            )
            self._halt_said = why
        return PassResult(halted=f"state refused: {why}")

    def _note_untrusted(self, now: datetime, result: PassResult) -> None:
        for job, rep in self.source.untrusted:
            seen = (job, rep.evidence.get("sequence"), rep.received_at.isoformat())
            if seen in self._refusals_seen:
                continue  # said once per report, however many passes it stays in view
            self._refusals_seen[seen] = None
            while len(self._refusals_seen) > _REFUSALS_REMEMBERED:
                self._refusals_seen.popitem(last=False)
            self.counters["untrusted_reports"] += 1
            logger.warning(
                "report refused", extra={"job": job, "reason": rep.reason.value, "error": rep.error}
            )
            result.refused.append(
                Decision(
                    job=job, subject=JOB_SUBJECT, verdict=Verdict.HOLD, action=None,
                    reason=Reason.UNTRUSTED_REPORT,
                    evidence={**rep.evidence, "error": rep.error[:500]},
                    mode=self.policies.mode, decided_at=now,
                )
            )  # fmt: skip

    def _apply(self, d: Decision, result: PassResult) -> Decision:
        """Carries out ``d``; returns it, or the hold that replaced it when Ray does not
        place its targets in the job."""
        if d.reason is Reason.AWAITING_PROBE and d.mode is Mode.ENFORCE:
            self._request_probe(d)
            return d
        if d.verdict is not Verdict.ACT or d.action is None or d.mode is not Mode.ENFORCE:
            return d  # holds (observe, budgets...) and undos of state-only marks
        try:
            match d.action:
                case ActionKind.DRAIN_NODE:
                    ids = [str(i) for i in d.evidence.get("rayNodeIds") or []]
                    if not ids:
                        raise GiveUp("NoRayNode", f"no Ray node id for {d.subject}")
                    problems = confirm_nodes(ids, self._live(d.job), self._alive_nodes())
                    if problems:
                        return self._refuse(d, problems, result)
                    message = f"pacekeeper: {d.reason.value} ({d.policy}, job {d.job})"
                    self.actuators.drain_nodes(ids, message)
                    result.drained.extend(ids)
                case ActionKind.RESTART_RANK:
                    workers = list(d.evidence.get("rayWorkers") or [])
                    problems = confirm_workers(workers, self._live(d.job)) if workers else []
                    if problems:
                        return self._refuse(d, problems, result)
                    result.restarted.extend(self.actuators.restart_workers(workers))
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
        return d

    def _request_probe(self, d: Decision) -> None:
        """Ask the job for its confirmation probe: ``probe.id`` in its control on the
        board, which its reporting rank reads. Merged into the control the board holds
        (the operator's fields stay) and written only when that does not carry this
        request, so a repeated decision or a restarted runner asks once; a failed write
        is asked again by the next pass, whose decision repeats the request. The job
        written to is the decision's, a board key its badge proved (``ray_badge.py``),
        never a name a report gave."""
        import ray

        request = (d.evidence.get("probe") or {}).get("request")
        if not isinstance(request, str) or not request:
            return
        if self._control_key is None:
            self._probe_problem(
                d.job, request, "no control key: give pacekeeper ray-controller "
                f"--control-key-file (or ${CONTROL_KEY_FILE_ENV}); the node step waits",
            )  # fmt: skip
            return
        try:
            board = self.source._handle()
            held = ray.get(board.control.remote(d.job), timeout=_BOARD_CALL_TIMEOUT_S)
            control = dict(held) if isinstance(held, dict) else {}
            asked = control.get("probe")
            if isinstance(asked, dict) and asked.get("id") == request:
                return
            control["probe"] = {"id": request}
            ray.get(
                board.set_control.remote(d.job, control, self._control_key),
                timeout=_BOARD_CALL_TIMEOUT_S,
            )
        except Exception as e:  # a dead board, a wrong key: the next pass asks again
            self.counters["probe_request_failed"] += 1
            cause = getattr(e, "cause", None)
            why = cause if isinstance(cause, Exception) else e  # not the remote traceback
            self._probe_problem(d.job, request, f"{type(why).__name__}: {why}"[:500])
            return
        self._probe_said.pop(d.job, None)
        self.counters["probe_requested"] += 1
        logger.info("probe requested", extra={"job": d.job, "node": d.node, "probe": request})

    def _probe_problem(self, job: str, request: str, error: str) -> None:
        if self._probe_said.get(job) == error:
            return
        self._probe_said[job] = error
        while len(self._probe_said) > _REFUSALS_REMEMBERED:
            self._probe_said.popitem(last=False)
        logger.warning(
            "probe request not written", extra={"job": job, "probe": request, "error": error}
        )

    def _live(self, job: str) -> list[RayActor]:
        job_hex = ray_job_of(job)
        return [] if job_hex is None else list(self.source.records.job_actors(job_hex))

    def _alive_nodes(self) -> frozenset[str]:
        alive: frozenset[str] = self.source.records.alive_nodes()
        return alive

    def _refuse(self, d: Decision, problems: list[str], result: PassResult) -> Decision:
        self.counters["refused_actions"] += 1
        hold = replace(
            d,
            verdict=Verdict.HOLD,
            reason=Reason.UNTRUSTED_REPORT,
            evidence={**d.evidence, "wouldBe": Verdict.ACT.value, "refused": problems[:8]},
        )
        result.refused.append(hold)
        logger.warning(
            "action refused",
            extra={"job": d.job, "action": d.action.value if d.action else None,
                   "subject": d.subject, "reason": Reason.UNTRUSTED_REPORT.value,
                   "error": "; ".join(problems[:3])},
        )  # fmt: skip
        return hold

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
    Ray-side controller on the cluster at ``--address`` (default: ``auto``). Kept for
    existing scripts; ``pacekeeper ray-controller`` (``controller/cli/ray_controller.py``)
    is the command, with ``--mode`` and one log line per decision group."""
    import argparse

    import ray

    from pacekeeper.controller.core.policy import load_policy_file
    from pacekeeper.controller.sources.signed_state import KEY_FILE_ENV, default_key_path

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--policy", required=True, help="RemediationPolicies YAML file")
    parser.add_argument("--address", default="auto", help="Ray cluster address")
    parser.add_argument("--interval-s", type=float, default=10.0, help="seconds between passes")
    parser.add_argument(
        "--state-key-file", type=Path, default=None,
        help=f"HMAC key of the stored state (created when absent; default ${KEY_FILE_ENV} "
        f"or {default_key_path()})",
    )  # fmt: skip
    parser.add_argument(
        "--control-key-file", type=Path, default=None,
        help=f"the ScoreBoard's control key, for confirm: probe (default ${CONTROL_KEY_FILE_ENV})",
    )  # fmt: skip
    args = parser.parse_args(argv)
    policies = load_policy_file(args.policy)  # raises naming the field on a bad policy
    store = KvStateStore.from_key_file(args.state_key_file)
    control_key = load_control_key(args.control_key_file)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    ray.init(address=args.address, namespace="pacekeeper", log_to_driver=False)
    stop = threading.Event()
    try:
        runner = RayRunner(policies, store=store, control_key=control_key)
        runner.run_forever(stop, interval_s=args.interval_s)
    except KeyboardInterrupt:
        stop.set()


if __name__ == "__main__":
    main()
