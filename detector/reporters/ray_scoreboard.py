"""The Ray transport: a named, detached ``ScoreBoard`` actor and the sink that feeds it.

One board per Ray cluster, in namespace ``pacekeeper``, created on demand (``get_if_exists``)
by the Ray-side controller or else the first reporter, with ``num_cpus=0`` so it never
takes a training slot. It restarts itself when its process dies (``max_restarts=-1``)
and reloads its history from the GCS key-value store, signed (``board_store.py``).

A job writes only its own reports: the sink registers a ``JobBadge`` actor of its job
(``ray_badge.py``), the board checks with Ray's actor table which job that is, and the
token it returns must come with every publish of that job's reports
(``publish_tokens.py``). A sink whose call fails drops its handle and resolves the name
again on the next retry, which also re-creates a board that was killed for good; a
board that lost its tokens (restarted) makes the sink register again.

Runtime control: the operator sets a job's control with the board's control key
(``board_control.py``); the sink's ``read_control`` reads it for the job's reporting rank.

Ray is imported inside functions: ``pacekeeper.detector`` must import without it.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from ..compaction import compact
from ..score_report import JobIdentity, Platform, ReportRejected, ScoreReport
from .board_control import ControlTable, control_key_digest
from .board_store import BoardStore
from .publish_tokens import PublishRefused, UnknownToken
from .ray_badge import badge_job, create_badge, ray_job_key
from .scoreboard import (
    DEFAULT_MAX_HISTORY,
    DEFAULT_MAX_JOB_BYTES,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    ScoreBoardCore,
)

logger = logging.getLogger(__name__)

SCOREBOARD_NAME = "ScoreBoard"
SCOREBOARD_NAMESPACE = "pacekeeper"
DEFAULT_STORE_PREFIX = "scoreboard/"
BADGE_START_TIMEOUT_S = 60.0


class ScoreBoard:
    """The actor class. Methods take and return plain JSON-ready values only, so any
    Ray client (controller, dashboard script) reads it without pacekeeper's models."""

    def __init__(
        self,
        *,
        max_history: int = DEFAULT_MAX_HISTORY,
        max_jobs: int = DEFAULT_MAX_JOBS,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        max_job_bytes: int = DEFAULT_MAX_JOB_BYTES,
        persist: bool = True,
        store_prefix: str = DEFAULT_STORE_PREFIX,
        store_key: str | None = None,
        control_key_sha256: str | None = None,
    ) -> None:
        self._core = ScoreBoardCore(
            max_history=max_history,
            max_jobs=max_jobs,
            max_payload_bytes=max_payload_bytes,
            max_job_bytes=max_job_bytes,
        )
        self._persist = persist
        if persist and store_key is None:
            logger.warning(
                "scoreboard has no store_key: what it stores now cannot be restored after "
                "a restart (get_scoreboard passes one)",
                extra={"prefix": store_prefix},
            )
        key = bytes.fromhex(store_key) if store_key is not None else secrets.token_bytes(32)
        self._store = BoardStore(store_prefix, key)
        """Keys of this board in the GCS store; another board (a benchmark's) uses another."""
        self._restored = 0
        self._restore_refused = 0
        control_store = BoardStore(f"{store_prefix.rstrip('/')}-control/", key) if persist else None
        self._controls = ControlTable(
            key_digest=control_key_sha256, max_jobs=max_jobs, store=control_store
        )
        """Runtime control per job (``board_control.py``): written with the control key."""
        if persist:
            self._restore()
            self._controls.restore()

    # --- writes -----------------------------------------------------------------

    def register(self, job: str, badge: Any) -> dict[str, str]:
        """Registers the calling job's publisher: ``badge`` is a live ``JobBadge`` actor
        of ``job`` (Ray's actor table must say so). Returns ``{"job", "token"}``; the token
        replaces the job's previous one. Raises ``PublishRefused`` naming why not."""
        try:
            derived, badge_id = badge_job(badge)
            if derived != job:
                raise PublishRefused(
                    f"registration for {job!r} with an actor of {derived!r}: "
                    "a job registers only itself"
                )
        except PublishRefused as e:
            self._core.counters["registration_refused"] += 1
            logger.warning("publisher registration refused", extra={"job": job, "error": str(e)})
            raise
        token = self._core.register(job, badge_id, now=time.time())
        logger.info("publisher registered", extra={"job": job, "badge": badge_id})
        return {"job": job, "token": token}

    def publish(
        self,
        report: str | bytes | dict[str, Any],
        token: str | None = None,
        incarnation: str | None = None,
    ) -> dict[str, Any]:
        """Store one report (JSON text or wire dict) of the job whose current ``token``
        this is. Raises ``PublishRefused`` (``UnknownToken``: register again) for the
        wrong sender, ``ReportRejected`` naming the field for bad input; returns
        ``{"outcome", "job", "counter"}``."""
        result = self._core.publish(report, token=token, incarnation=incarnation, now=time.time())
        if self._persist:
            for gone in result.evicted_jobs:
                self._store.evict(gone)
            if result.entry is not None:
                meta = {
                    "incarnation": result.entry.incarnation,
                    "past": self._core.past_incarnations(result.entry.job),
                }
                self._store.write(result.entry, result.dropped, meta)
        return result.to_dict()

    def _restore(self) -> None:
        loaded = self._store.load()
        for job, entries in loaded.entries.items():
            meta = loaded.metas.get(job, {})
            dropped = self._core.restore(
                entries, meta.get("incarnation"), list(meta.get("past", []))
            )
            for gone in dropped:
                self._store.drop(job, gone.counter)
        self._restored = len(loaded.entries)
        self._restore_refused = loaded.refused
        if loaded.entries or loaded.refused:
            logger.info(
                "scoreboard restored history",
                extra={"jobs": len(loaded.entries), "refused": loaded.refused},
            )

    def stored_keys(self) -> int:
        """Keys this board holds in the GCS store (to check the store stays bounded)."""
        return self._store.count() if self._persist else 0

    def set_control(self, job: str, control: dict[str, Any] | None, key: str) -> dict[str, Any]:
        """Set (None: remove) ``job``'s runtime control; ``key`` is the control key the
        board was created with. Raises ``PublishRefused`` without it, ValueError for a
        document that does not check. The job's reporting rank reads it within
        ``PACEKEEPER_CONTROL_POLL_S`` and every rank applies it at the next report."""
        return self._controls.set(job, control, key)

    def control(self, job: str) -> dict[str, Any] | None:
        """``job``'s runtime control document (wire form), or None."""
        return self._controls.get(job)

    # --- reads ------------------------------------------------------------------

    def latest(self, job: str) -> dict[str, Any] | None:
        return self._core.latest(job)

    def head(self, job: str) -> dict[str, Any] | None:
        return self._core.head(job)

    def window(
        self, job: str, n: int | None = None, since: str | float | None = None
    ) -> list[dict[str, Any]]:
        return self._core.window(job, n=n, since=since)

    def jobs(self) -> list[dict[str, Any]]:
        return self._core.jobs()

    def stats(self) -> dict[str, int]:
        return dict(self._core.counters) | {
            "restored_jobs": self._restored,
            "restore_refused": self._restore_refused,
            "registered_jobs": len(self._core.tokens),
            "control_refused": self._controls.refused,
        }

    def ping(self) -> bool:
        return True


def get_scoreboard(
    *, create: bool = True, control_key: str | None = None, **board_options: Any
) -> Any:
    """The board's actor handle; with ``create`` it is made when missing. Needs
    ``ray.init`` first. ``board_options`` only apply when this call creates it; the
    store key is new for each call, so only the creating call's is ever used. A board
    created with ``control_key`` accepts ``set_control`` calls that carry that key
    (it keeps only its digest); without one it accepts none."""
    import ray

    if control_key is not None:
        board_options.setdefault("control_key_sha256", control_key_digest(control_key))

    if not create:
        return ray.get_actor(SCOREBOARD_NAME, namespace=SCOREBOARD_NAMESPACE)
    board_options.setdefault("store_key", secrets.token_hex(32))
    actor_cls = ray.remote(ScoreBoard)
    return actor_cls.options(
        name=SCOREBOARD_NAME,
        namespace=SCOREBOARD_NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        max_restarts=-1,
        max_task_retries=0,
        num_cpus=0,
    ).remote(**board_options)


class RayScoreBoardSink:
    """Publisher sink: sends each report to the ScoreBoard, re-resolving the actor after
    any failure. Bound to one job key: a report for another job is refused locally.

    Reports are filed under the Ray job of this process, the one its badge proves: a
    process that joined Ray only to publish (torchrun ranks on a Ray node) has a Ray job
    of its own, and its reports' ``job`` becomes ``ray:<that job id>`` (the name is kept).

    A report whose JSON is over ``max_report_bytes`` (the board's default payload bound)
    is sent compacted to it, as the custom resource's status is (``compaction``: the
    worst ranks, every node's summary or, past the budget, the worst nodes and a
    histogram of the rest): a job of 100,000 ranks still reports, and what reaches the
    controller is what its decision reads (issue 42)."""

    name = "ray"

    def __init__(
        self,
        *,
        job: str | None,
        incarnation: str,
        address: str | None = None,
        timeout_s: float = 10.0,
        max_report_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.job = job
        self.incarnation = incarnation
        self.address = address
        self.timeout_s = timeout_s
        self.max_report_bytes = max_report_bytes
        self._handle: Any = None
        self._badge: Any = None
        self._token: str | None = None
        self._ray_job: str | None = None
        # Import now, at initialize, not on the publisher thread (see kubernetes.py).
        import ray  # noqa: F401

    def send(self, report: ScoreReport) -> None:
        import ray

        if self.job is None:
            self.job = report.job.key
        elif report.job.key != self.job:
            raise ReportRejected(
                f"job identity mismatch: reporter is bound to {self.job!r}, "
                f"report.job is {report.job.key!r}"
            )
        if not ray.is_initialized():
            # A torchrun-style job on a Ray node: join the cluster just to publish.
            ray.init(
                address=self.address or "auto",
                namespace=SCOREBOARD_NAMESPACE,
                log_to_driver=False,
                # ERROR: joining from the publisher thread makes Ray warn that it cannot
                # install its SIGTERM handler there, which is expected and harmless.
                logging_level=logging.ERROR,
            )
        filed = self._filed(report)
        text = filed.to_json()
        if len(text) > self.max_report_bytes:
            text = compact(filed, self.max_report_bytes).to_json()
        if self._handle is None:
            self._handle = get_scoreboard()
        try:
            try:
                self._publish(text)
            except UnknownToken:
                self._token = None  # the board restarted, or we registered elsewhere
                self._publish(text)
        except ReportRejected:
            raise
        except Exception:
            # Dead, restarting or unreachable board: resolve the name again next time.
            self._handle = None
            raise

    def _filed(self, report: ScoreReport) -> ScoreReport:
        import ray

        if self._ray_job is None:
            self._ray_job = ray_job_key(ray.get_runtime_context().get_job_id())
            if report.job.key != self._ray_job:
                logger.info(
                    "reports filed under this process's Ray job",
                    extra={"job": report.job.key, "rayJob": self._ray_job},
                )
        if report.job.key == self._ray_job:
            return report
        job = JobIdentity(
            platform=Platform.RAY,
            namespace=report.job.namespace,
            name=report.job.name,
            ray_job_id=self._ray_job.removeprefix("ray:"),
        )
        return report.model_copy(update={"job": job})

    def _publish(self, text: str) -> None:
        if self._token is None:
            self._token = self._register()
        self._call(self._handle.publish.remote(text, self._token, self.incarnation))

    def _register(self) -> str:
        register = getattr(self._handle, "register", None)
        if register is None:
            raise ReportRejected(
                "the ScoreBoard actor is from a pacekeeper without publisher registration: "
                "replace it once (docs/security.md, Ray)"
            )
        if self._badge is not None:
            try:
                return str(self._call(register.remote(self._ray_job, self._badge))["token"])
            except PublishRefused:
                self._badge = None  # our badge died: a new one, once
        # A badge is a new worker process: give it longer than one call on a busy node.
        self._badge = create_badge(max(self.timeout_s, BADGE_START_TIMEOUT_S))
        return str(self._call(register.remote(self._ray_job, self._badge))["token"])

    def _call(self, ref: Any) -> Any:
        import ray
        from ray.exceptions import RayTaskError

        try:
            return ray.get(ref, timeout=self.timeout_s)
        except RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, ReportRejected):
                raise type(cause)(str(cause)) from e  # keeps UnknownToken apart
            if isinstance(e, ReportRejected):
                raise ReportRejected(str(e)) from e
            raise

    def read_control(self) -> dict[str, Any] | None:
        """This job's runtime control on the board (None: none, or no board or Ray yet);
        called on the control watcher's thread, never creating the board."""
        import ray

        if not ray.is_initialized():
            return None
        job = self._ray_job or ray_job_key(ray.get_runtime_context().get_job_id())
        try:
            board = ray.get_actor(SCOREBOARD_NAME, namespace=SCOREBOARD_NAMESPACE)
        except ValueError:
            return None  # no board yet: the first publish creates it
        control: Any = ray.get(board.control.remote(job), timeout=self.timeout_s)
        return control if isinstance(control, dict) else None

    def close(self) -> None:
        self._handle = None
        self._badge = None
        self._token = None
