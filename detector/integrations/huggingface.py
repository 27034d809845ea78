"""Hugging Face Transformers: ``StragglerDetectionCallback``, a ``TrainerCallback``.

``Trainer(..., callbacks=[StragglerDetectionCallback()])`` on every rank (torchrun,
``accelerate launch``, DeepSpeed's launcher: the Trainer's own process group). At
``on_train_begin`` it starts the Detector and times the model's ``forward`` (the
unwrapped model the Trainer hands to callbacks; DDP calls it on every micro-batch, and
backward's all-reduce stays outside, so ranks that wait do not look slow). At every
optimizer step's end it reports when the interval has elapsed; on the reporting rank it
judges the report (the callback's thresholds, or runtime control's), logs stragglers
and scores, keeps the report in ``last_report`` and adds min/median/max scores to the
Trainer's ``state.log_history``. With ``stop_if_detected`` every rank stops training
(``control.should_training_stop``) when the reporting rank found a straggler, agreed by
one broadcast on the Trainer's process group at that report.

The arguments mirror the Lightning callback's, by keyword; ``detector_options`` go to
``Detector.initialize``. Transformers is imported when the class is first used, never
at import of this module.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..control import Thresholds
from ..detector import Detector
from ..wrapping import CallableId
from . import findings
from .lazy_class import mixed_in

__all__ = ["StragglerDetectionCallback"]


def _callback_base() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError:
        raise ImportError(
            "StragglerDetectionCallback needs transformers: pip install 'pacekeeper[huggingface]'"
        ) from None
    base: type = TrainerCallback
    return base


class _StragglerDetection:
    """The callback's behaviour; mixed with ``TrainerCallback`` on first use."""

    def __init__(
        self,
        *,
        report_time_interval: float = 60.0,
        scores_to_compute: Sequence[str] | str = "all",
        profiling_interval: int = 1,
        gpu_relative_perf_threshold: float | None = 0.75,
        gpu_individual_perf_threshold: float | None = 0.75,
        section_relative_perf_threshold: float | None = 0.75,
        section_individual_perf_threshold: float | None = None,
        num_gpu_perf_scores_to_print: int = 0,
        stop_if_detected: bool = False,
        time_forward: bool = True,
        logger_name: str = "pacekeeper.detector.integrations.huggingface",
        detector_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.report_time_interval = report_time_interval
        self.scores_to_compute = scores_to_compute
        self.profiling_interval = profiling_interval
        self.thresholds = Thresholds(
            gpu_relative=gpu_relative_perf_threshold,
            gpu_individual=gpu_individual_perf_threshold,
            section_relative=section_relative_perf_threshold,
            section_individual=section_individual_perf_threshold,
        )
        self.num_gpu_perf_scores_to_print = num_gpu_perf_scores_to_print
        self.stop_if_detected = stop_if_detected
        self.time_forward = time_forward
        self.logger = logging.getLogger(logger_name)
        self.detector_options = dict(detector_options or {})
        self.initialized = False
        self.last_report: Any = None
        """The latest report on the reporting rank (None elsewhere)."""
        self.last_stragglers: dict[str, Any] = {}

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.initialized:
            return
        findings.start_detector(self)
        self.initialized = True
        model = kwargs.get("model")
        if self.time_forward and model is not None:
            Detector.wrap_callables([CallableId(model, "forward")])

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self.initialized:
            return
        report = Detector.generate_report_if_interval_elapsed()
        found = False
        if report is not None:
            found = self._handle(state, report)
        if Detector.is_interval_elapsed() and self.stop_if_detected and _agreed(found):
            self.logger.error("stragglers detected; stopping training")
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.initialized:
            # Ranks leave together: a rank that exits while another still runs a report
            # collective on the detector's group can abort in gloo at exit.
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                dist.barrier()
            Detector.shutdown()
            self.initialized = False

    def _handle(self, state: Any, report: Any) -> bool:
        self.last_report = report
        self.last_stragglers = findings.examine(
            self.logger, report, self.thresholds, self.num_gpu_perf_scores_to_print
        )
        state.log_history.append({"step": state.global_step, **findings.metrics(report)})
        return findings.any_found(self.last_stragglers)


def _agreed(found: bool) -> bool:
    """The reporting rank's verdict on every rank (a world of one: its own)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return found
    box = [found]
    dist.broadcast_object_list(box, src=0)
    return bool(box[0])


def __getattr__(name: str) -> Any:
    if name != "StragglerDetectionCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return mixed_in(__name__, name, _StragglerDetection, _callback_base, __doc__)


if TYPE_CHECKING:  # the class users get (built on first use, below TrainerCallback)
    StragglerDetectionCallback = _StragglerDetection
