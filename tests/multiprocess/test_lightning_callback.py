"""PyTorch Lightning: NVRx's callback arguments on two torchrun CPU ranks (DDP, gloo);
the slow rank is flagged, scores reach Lightning's logger, and training stops."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from framework_runs import require, torchrun

JOB = Path(__file__).with_name("lightning_job.py")


def test_the_callback_flags_the_slow_rank_logs_scores_and_stops_every_rank(
    tmp_path: Path,
) -> None:
    require("lightning", "pytorch_lightning", extra="lightning")
    output = torchrun(JOB, tmp_path)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    section = ranks[0]["sections"]["DDPStrategy.training_step"]
    assert section["1"] < 0.75 < section["0"]
    assert ranks[0]["stragglers"]["straggler_sections_relative"] == {
        "DDPStrategy.training_step": ["StragglerId(rank=1, node='" + _node(ranks) + "')"]
    }
    # stop_if_detected: both ranks stop at the same step, long before max_steps.
    assert ranks[0]["global_step"] == ranks[1]["global_step"] < 400
    assert all(r["should_stop"] for r in ranks)
    assert "stragglers detected; stopping training" in output
    (metrics,) = tmp_path.glob("logs/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics.open()))
    assert any(float(r["section_relative_perf/DDPStrategy.training_step/min"] or 1) < 0.75
               for r in rows)  # fmt: skip


def _node(ranks: list[dict]) -> str:
    (flagged,) = ranks[0]["stragglers"]["straggler_sections_relative"]["DDPStrategy.training_step"]
    return flagged.split("node='")[1].rstrip("')")


def test_the_callback_takes_nvrxs_arguments_by_keyword_and_refuses_no_scores() -> None:
    require("lightning", "pytorch_lightning", extra="lightning")
    import pytest

    from pacekeeper.detector.integrations.lightning import StragglerDetectionCallback

    cb = StragglerDetectionCallback(
        report_time_interval=60.0, calc_relative_gpu_perf=True, calc_individual_gpu_perf=True,
        num_gpu_perf_scores_to_print=3, gpu_relative_perf_threshold=0.7,
        gpu_individual_perf_threshold=0.7, stop_if_detected=False, enable_ptl_logging=False,
    )  # fmt: skip
    assert cb.scores_to_compute == ["relative_perf_scores", "individual_perf_scores"]
    assert cb.profiling_interval == 1
    assert cb.logger.name == "nemo_logger.StragglerDetectionCallback"
    try:
        from lightning.pytorch.callbacks import Callback
    except ImportError:
        from pytorch_lightning.callbacks import Callback
    assert isinstance(cb, Callback)
    with pytest.raises(ValueError, match="computes nothing"):
        StragglerDetectionCallback(60.0, False, False, 0, 0.7, 0.7, False, False)
