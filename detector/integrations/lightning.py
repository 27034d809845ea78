"""PyTorch Lightning: ``StragglerDetectionCallback``, with the arguments of NVRx's.

NVRx ships a Lightning callback of this name
(``nvidia_resiliency_ext.ptl_resiliency.StragglerDetectionCallback``), deprecated since
2026-03 with the rest of its Lightning package (importing it warns). That path lies
outside NVRx's straggler package, so no import swap reaches it: code that built it
writes ``from pacekeeper.detector.integrations.lightning import
StragglerDetectionCallback`` and keeps the same ten arguments, positions and defaults,
and the same behaviour. At ``setup`` it
starts the Detector and times ``trainer.strategy.training_step`` (the forward pass and
loss of each batch; backward and its all-reduce stay outside, so a rank that waits for
others does not look slow); after every training batch it reports when the interval has
elapsed; on the reporting rank it logs stragglers and the best and worst GPU scores,
and logs min/median/max scores to Lightning's loggers (``enable_ptl_logging``); with
``stop_if_detected`` every rank stops training when rank 0 found a straggler.

Beyond NVRx (keyword-only): section thresholds (a CPU-only job has no GPU scores),
``detector_options`` passed to ``Detector.initialize`` (``kernel_timing``, ``reporter``,
``control``...), and runtime control's thresholds, which win over the callback's.
Where NVRx saved a checkpoint and exited the process with status 1 on
``stop_if_detected``, this sets ``trainer.should_stop`` (Lightning ends the fit, its
checkpoint callbacks run) unless ``exit_on_stop=True``.

Lightning is imported when the class is first used (``lightning.pytorch``, else
``pytorch_lightning``, as NVRx chose), never at import of this module.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..control import Thresholds
from ..detector import Detector
from ..wrapping import CallableId
from . import findings
from .lazy_class import mixed_in

__all__ = ["StragglerDetectionCallback"]


def _callback_base() -> type:
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        try:
            from pytorch_lightning.callbacks import Callback
        except ImportError:
            raise ImportError(
                "StragglerDetectionCallback needs PyTorch Lightning: "
                "pip install 'pacekeeper[lightning]'"
            ) from None
    base: type = Callback
    return base


class _StragglerDetection:
    """The callback's behaviour; mixed with Lightning's ``Callback`` on first use."""

    def __init__(  # noqa: PLR0917 - NVRx's positional signature
        self,
        report_time_interval: float,
        calc_relative_gpu_perf: bool,
        calc_individual_gpu_perf: bool,
        num_gpu_perf_scores_to_print: int,
        gpu_relative_perf_threshold: float,
        gpu_individual_perf_threshold: float,
        stop_if_detected: bool,
        enable_ptl_logging: bool,
        profiling_interval: int = 1,
        logger_name: str | None = "nemo_logger.StragglerDetectionCallback",
        *,
        section_relative_perf_threshold: float | None = None,
        section_individual_perf_threshold: float | None = None,
        detector_options: Mapping[str, Any] | None = None,
        exit_on_stop: bool = False,
    ) -> None:
        scores = []
        if calc_relative_gpu_perf:
            scores.append("relative_perf_scores")
        if calc_individual_gpu_perf:
            scores.append("individual_perf_scores")
        if not scores:
            raise ValueError(
                "StragglerDetectionCallback computes nothing: set calc_relative_gpu_perf "
                "or calc_individual_gpu_perf"
            )
        self.scores_to_compute = scores
        self.report_time_interval = report_time_interval
        self.calc_relative_gpu_perf = calc_relative_gpu_perf
        self.calc_individual_gpu_perf = calc_individual_gpu_perf
        self.num_gpu_perf_scores_to_print = num_gpu_perf_scores_to_print
        self.gpu_relative_perf_threshold = gpu_relative_perf_threshold
        self.gpu_individual_perf_threshold = gpu_individual_perf_threshold
        self.stop_if_detected = stop_if_detected
        self.enable_ptl_logging = enable_ptl_logging
        self.profiling_interval = profiling_interval
        self.logger = logging.getLogger(logger_name)
        self.thresholds = Thresholds(
            gpu_relative=gpu_relative_perf_threshold if calc_relative_gpu_perf else None,
            gpu_individual=gpu_individual_perf_threshold if calc_individual_gpu_perf else None,
            section_relative=section_relative_perf_threshold,
            section_individual=section_individual_perf_threshold,
        )
        self.detector_options = dict(detector_options or {})
        self.exit_on_stop = exit_on_stop
        self.initialized = False
        self.last_report: Any = None
        """The latest report on the reporting rank (None elsewhere)."""
        self.last_stragglers: dict[str, Any] = {}

    # --- Lightning hooks ---------------------------------------------------------

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.initialized:
            return
        findings.start_detector(self)
        strategy = trainer.strategy
        if getattr(strategy, "training_step", None) is None:
            Detector.shutdown()
            raise TypeError(f"{type(strategy).__name__} has no training_step to time")
        Detector.wrap_callables([CallableId(strategy, "training_step")])
        self.initialized = True

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if self.initialized:
            # Ranks leave together: a rank that exits while another still runs a report
            # collective on the detector's group can abort in gloo at exit.
            trainer.strategy.barrier("pacekeeper-teardown")
            Detector.shutdown()
            self.initialized = False

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        report = Detector.generate_report_if_interval_elapsed()
        found = False
        if report is not None:
            found = self._handle(pl_module, report)
        # Every rank reported at this batch; rank 0 alone knows what it found.
        if (
            Detector.is_interval_elapsed()
            and self.stop_if_detected
            and bool(trainer.strategy.broadcast(found, src=0))
        ):
            self._stop(trainer)

    # --- the reporting rank ------------------------------------------------------

    def _handle(self, pl_module: Any, report: Any) -> bool:
        self.last_report = report
        self.last_stragglers = findings.examine(
            self.logger, report, self.thresholds, self.num_gpu_perf_scores_to_print
        )
        if self.enable_ptl_logging:
            try:
                pl_module.log_dict(
                    findings.metrics(report), logger=True, batch_size=1, rank_zero_only=True
                )
            except Exception:
                self.logger.exception("logging straggler scores to Lightning failed")
        return findings.any_found(self.last_stragglers)

    def _stop(self, trainer: Any) -> None:
        self.logger.error("stragglers detected; stopping training")
        trainer.should_stop = True
        if self.exit_on_stop:
            sys.exit(1)


def __getattr__(name: str) -> Any:
    if name != "StragglerDetectionCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return mixed_in(__name__, name, _StragglerDetection, _callback_base, __doc__)


if TYPE_CHECKING:  # the class users get (built on first use, below Lightning's base)
    StragglerDetectionCallback = _StragglerDetection
