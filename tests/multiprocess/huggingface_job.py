"""A torchrun script: two CPU ranks train a tiny torch model with the Hugging Face
``Trainer`` (DDP over gloo) and pacekeeper's ``TrainerCallback``; rank 1 is slow in its
forward pass. Each rank writes what it saw to ``OUT_DIR``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch
from transformers import Trainer, TrainingArguments

from pacekeeper.detector.integrations.huggingface import StragglerDetectionCallback


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        import torch.distributed as dist

        if dist.get_rank() == 1:
            time.sleep(0.02)  # the straggler
        time.sleep(0.01)
        return {"loss": torch.nn.functional.mse_loss(self.layer(x), labels)}


class Points(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 4096

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return {"x": torch.randn(8, generator=g), "labels": torch.randn(1, generator=g)}


def main() -> None:
    out = Path(os.environ["OUT_DIR"])
    callback = StragglerDetectionCallback(
        report_time_interval=0.3, stop_if_detected=True,
        detector_options={"kernel_timing": "none"},
    )  # fmt: skip
    args = TrainingArguments(
        output_dir=str(out / "trainer"), per_device_train_batch_size=4, max_steps=400,
        use_cpu=True, ddp_backend="gloo", report_to=[], save_strategy="no",
        logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
    )  # fmt: skip
    trainer = Trainer(model=Tiny(), args=args, train_dataset=Points(), callbacks=[callback])
    trainer.train()
    rank = trainer.args.process_index
    result: dict[str, object] = {"global_step": trainer.state.global_step}
    if callback.last_report is not None:
        report = callback.last_report
        result["sections"] = {
            k: {str(r): s for r, s in v.items()}
            for k, v in report.section_relative_perf_scores.items()
        }
        result["flagged"] = {
            k: sorted(s.rank for s in v)
            for k, v in callback.last_stragglers["straggler_sections_relative"].items()
        }
        result["history"] = [h for h in trainer.state.log_history if "step" in h and len(h) > 1]
    (out / f"rank{rank}.json").write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
