"""Ray Train: the Detector in the workers of a ``TorchTrainer``, reporting to the ScoreBoard.

In ``train_loop_per_worker``, on every worker::

    with detect_stragglers(report_time_interval=60) as detection:
        for batch in loader:
            with Detector.detection_section("forward"):
                loss = model(batch)
            ...
            detection.step()  # generate_report_if_interval_elapsed, on every worker
        ray.train.report(metrics | detection.stats())

Ray Train has made the torch process group by then (gloo or NCCL), so the Detector
reports over the workers' group; the reporting worker (group rank 0) publishes each
report to the cluster's ScoreBoard under the Ray job of the driver (the job the
Ray-side controller places and acts on), and reads that job's runtime control there.
Leaving the block flushes what is queued (``flush_timeout_s``) and shuts the Detector
down, even when training raised. On the driver, ``job_key()`` names the job on the board
and ``latest_report()`` / ``report_history()`` read it back.

Ray is imported inside functions, never at import of this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..detector import Detector
from ..reports import Report
from ..score_report import ScoreReport


class WorkerDetection:
    """What ``detect_stragglers`` yields on each worker."""

    def __init__(self, publisher: Any) -> None:
        self.publisher = publisher
        """The reporting worker's publisher (None on the others)."""

    def step(self) -> Report | None:
        """Call once per training iteration on every worker; the report on the reporting
        worker when the interval elapsed, else None."""
        return Detector.generate_report_if_interval_elapsed()

    def report(self) -> Report | None:
        """Report now (a collective: every worker must call it at the same point)."""
        return Detector.generate_report()

    def stats(self) -> dict[str, int]:
        """``reports_published`` and ``reports_failed`` (refused by the board) so far,
        on the reporting worker; empty elsewhere (for ``ray.train.report``)."""
        if self.publisher is None:
            return {}
        s = self.publisher.stats()
        return {"reports_published": s.published, "reports_failed": s.rejected}

    def flush(self, timeout_s: float) -> bool:
        """Wait until queued reports are delivered; True when none is left."""
        return True if self.publisher is None else bool(self.publisher.flush(timeout_s))


@contextlib.contextmanager
def detect_stragglers(
    *,
    report_time_interval: float = 60.0,
    flush_timeout_s: float = 30.0,
    **initialize_kwargs: Any,
) -> Iterator[WorkerDetection]:
    """Start the Detector on this Ray Train worker with the ScoreBoard reporter (other
    ``Detector.initialize`` keywords pass through; ``reporter`` defaults to ``"ray"``)."""
    initialize_kwargs.setdefault("reporter", "ray")
    Detector.initialize(report_time_interval=report_time_interval, **initialize_kwargs)
    detection = WorkerDetection(Detector.reporter())
    try:
        yield detection
    finally:
        try:
            detection.flush(flush_timeout_s)
        finally:
            Detector.shutdown()


def job_key() -> str:
    """This Ray job's key on the ScoreBoard (``ray:<job id>``); needs ``ray.init``. A
    TorchTrainer's workers belong to the job of the driver that called ``fit``."""
    import ray

    from ..reporters.ray_badge import ray_job_key

    return ray_job_key(ray.get_runtime_context().get_job_id())


def latest_report(job: str | None = None) -> ScoreReport | None:
    """The newest report of ``job`` (default: this driver's job) on the ScoreBoard."""
    import ray

    from ..reporters.ray_scoreboard import get_scoreboard

    wire = ray.get(get_scoreboard(create=False).latest.remote(job or job_key()))
    return None if wire is None else ScoreReport.from_wire(wire)


def report_history(job: str | None = None, n: int | None = None) -> list[ScoreReport]:
    """The board's reports of ``job`` (default: this driver's job), oldest first."""
    import ray

    from ..reporters.ray_scoreboard import get_scoreboard

    board = get_scoreboard(create=False)
    return [ScoreReport.from_wire(w) for w in ray.get(board.window.remote(job or job_key(), n))]
