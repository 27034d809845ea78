"""The Ray transport: a named, detached ``ScoreBoard`` actor and the sink that feeds it.

One board per Ray cluster, in namespace ``pacekeeper``, created on demand by the first
reporter (``get_if_exists``) with ``num_cpus=0`` so it never takes a training slot.
It restarts itself when its process dies (``max_restarts=-1``) and reloads its history
from the GCS key-value store, where every accepted report is written through (one key
per stored report, so a write costs one report, not a whole history). A reporter whose
call fails drops its handle and resolves the name again on the next retry, which also
re-creates a board that was killed for good.

Ray is imported inside functions: ``pacekeeper.detector`` must import without it.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from ..score_report import ReportRejected, ScoreReport
from .scoreboard import (
    DEFAULT_MAX_HISTORY,
    DEFAULT_MAX_JOB_BYTES,
    DEFAULT_MAX_JOBS,
    DEFAULT_MAX_PAYLOAD_BYTES,
    Entry,
    ScoreBoardCore,
)

logger = logging.getLogger(__name__)

SCOREBOARD_NAME = "ScoreBoard"
SCOREBOARD_NAMESPACE = "pacekeeper"
_KV_NAMESPACE = "pacekeeper"
DEFAULT_STORE_PREFIX = "scoreboard/"


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
    ) -> None:
        self._core = ScoreBoardCore(
            max_history=max_history,
            max_jobs=max_jobs,
            max_payload_bytes=max_payload_bytes,
            max_job_bytes=max_job_bytes,
        )
        self._persist = persist
        self._prefix = store_prefix
        """Keys of this board in the GCS store; another board (a benchmark's) uses another."""
        self._restored = self._restore() if persist else 0

    # --- writes -----------------------------------------------------------------

    def publish(
        self,
        report: str | bytes | dict[str, Any],
        job: str | None = None,
        incarnation: str | None = None,
    ) -> dict[str, Any]:
        """Store one report (JSON text or wire dict). Raises ``ReportRejected`` naming the
        field for bad input; returns ``{"outcome", "job", "counter"}``."""
        result = self._core.publish(report, job=job, incarnation=incarnation, now=time.time())
        if self._persist:
            for gone in result.evicted_jobs:
                _kv().del_(self._job_prefix(gone), del_by_prefix=True)
            if result.entry is not None:
                self._write_through(result.entry, result.dropped)
        return result.to_dict()

    def _write_through(self, entry: Entry, dropped: tuple[Entry, ...] = ()) -> None:
        # One key per entry counter: deleting what the bounds pushed out keeps the store
        # exactly as large as the history in memory.
        prefix = self._job_prefix(entry.job)
        kv = _kv()
        for gone in dropped:
            kv.del_(f"{prefix}entry/{gone.counter}")
        kv.put(f"{prefix}entry/{entry.counter}", entry.to_json())
        meta = {"incarnation": entry.incarnation, "past": self._core.past_incarnations(entry.job)}
        kv.put(f"{prefix}meta", json.dumps(meta))

    def _restore(self) -> int:
        kv = _kv()
        by_job: dict[str, list[Entry]] = {}
        metas: dict[str, dict[str, Any]] = {}
        for raw in kv.list(self._prefix):
            key = raw.decode()
            job, _, rest = key[len(self._prefix) :].partition("\x00")
            value = kv.get(key)
            if value is None:
                continue
            try:
                if rest == "meta":
                    metas[job] = json.loads(value)
                elif rest.startswith("entry/"):
                    by_job.setdefault(job, []).append(Entry.from_json(value))
            except (ValueError, KeyError, TypeError):
                logger.warning("scoreboard skipped unreadable stored entry", extra={"key": key})
        for job, entries in by_job.items():
            meta = metas.get(job, {})
            dropped = self._core.restore(
                entries, meta.get("incarnation"), list(meta.get("past", []))
            )
            for gone in dropped:
                kv.del_(f"{self._job_prefix(job)}entry/{gone.counter}")
        if by_job:
            logger.info("scoreboard restored history", extra={"jobs": len(by_job)})
        return len(by_job)

    def _job_prefix(self, job: str) -> str:
        return f"{self._prefix}{job}\x00"  # NUL ends the key: job keys never contain it

    def stored_keys(self) -> int:
        """Keys this board holds in the GCS store (to check the store stays bounded)."""
        return len(_kv().list(self._prefix)) if self._persist else 0

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
        return dict(self._core.counters) | {"restored_jobs": self._restored}

    def ping(self) -> bool:
        return True


class _Kv:
    """The GCS key-value store under pacekeeper's namespace."""

    def __init__(self) -> None:
        from ray.experimental import internal_kv

        self._kv = internal_kv

    def put(self, key: str, value: str) -> None:
        self._kv._internal_kv_put(key, value, overwrite=True, namespace=_KV_NAMESPACE)

    def get(self, key: str) -> bytes | None:
        return self._kv._internal_kv_get(key, namespace=_KV_NAMESPACE)

    def list(self, prefix: str) -> list[bytes]:
        return self._kv._internal_kv_list(prefix, namespace=_KV_NAMESPACE)

    def del_(self, key: str, *, del_by_prefix: bool = False) -> None:
        self._kv._internal_kv_del(key, del_by_prefix=del_by_prefix, namespace=_KV_NAMESPACE)


def _kv() -> _Kv:
    return _Kv()


def get_scoreboard(*, create: bool = True, **board_options: Any) -> Any:
    """The board's actor handle; with ``create`` it is made when missing. Needs
    ``ray.init`` first. ``board_options`` only apply when this call creates it."""
    import ray

    if not create:
        return ray.get_actor(SCOREBOARD_NAME, namespace=SCOREBOARD_NAMESPACE)
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
    any failure. Bound to one job key: a report for another job is refused locally."""

    name = "ray"

    def __init__(
        self,
        *,
        job: str | None,
        incarnation: str,
        address: str | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.job = job
        self.incarnation = incarnation
        self.address = address
        self.timeout_s = timeout_s
        self._handle: Any = None
        # Import now, at initialize, not on the publisher thread (see kubernetes.py).
        import ray  # noqa: F401

    def send(self, report: ScoreReport) -> None:
        import ray
        from ray.exceptions import RayTaskError

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
        if self._handle is None:
            self._handle = get_scoreboard()
        try:
            ray.get(
                self._handle.publish.remote(report.to_json(), self.job, self.incarnation),
                timeout=self.timeout_s,
            )
        except RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, ReportRejected) or isinstance(e, ReportRejected):
                raise ReportRejected(str(cause or e)) from e
            self._handle = None
            raise
        except Exception:
            # Dead, restarting or unreachable board: resolve the name again next time.
            self._handle = None
            raise

    def close(self) -> None:
        self._handle = None
