"""Hugging Face Transformers: the ``TrainerCallback`` on two torchrun CPU ranks (the
``Trainer``'s DDP over gloo); the slow rank is flagged, scores land in the Trainer's log
history, and ``stop_if_detected`` stops every rank at the same step."""

from __future__ import annotations

import json
from pathlib import Path

from framework_runs import require, torchrun

JOB = Path(__file__).with_name("huggingface_job.py")


def test_the_trainer_callback_flags_the_slow_rank_and_stops_every_rank(tmp_path: Path) -> None:
    require("transformers", extra="huggingface")
    require("accelerate", extra="huggingface")
    output = torchrun(JOB, tmp_path)
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    forward = ranks[0]["sections"]["Tiny.forward"]
    assert forward["1"] < 0.75 < forward["0"]
    assert ranks[0]["flagged"] == {"Tiny.forward": [1]}
    assert "sections" not in ranks[1]  # gather_on_rank0: only rank 0 holds the report
    logged = [h for h in ranks[0]["history"] if "section_relative_perf/Tiny.forward/min" in h]
    assert logged and logged[-1]["section_relative_perf/Tiny.forward/min"] < 0.75
    assert ranks[0]["global_step"] == ranks[1]["global_step"] < 400
    assert "stragglers detected; stopping training" in output
