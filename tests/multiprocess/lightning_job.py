"""A torchrun script: two CPU ranks train a tiny model with PyTorch Lightning (DDP,
gloo) and NVRx's callback arguments; rank 1 is slow in its training step. Rank 0 writes
what the callback found, every rank where training stopped, to ``OUT_DIR``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import torch

try:
    import lightning.pytorch as pl
except ImportError:
    import pytorch_lightning as pl

from pacekeeper.detector.integrations.lightning import StragglerDetectionCallback


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        if self.global_rank == 1:
            time.sleep(0.02)  # the straggler
        time.sleep(0.01)
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    out = Path(os.environ["OUT_DIR"])
    data = torch.utils.data.TensorDataset(torch.randn(2048, 8), torch.randn(2048, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    # NVRx's ten arguments, by position, then pacekeeper's keywords.
    callback = StragglerDetectionCallback(
        0.3, True, False, 2, 0.7, 0.7, True, True, 1, "test.straggler",
        section_relative_perf_threshold=0.75,
        detector_options={"kernel_timing": "none"},
    )  # fmt: skip
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, strategy="ddp", max_steps=400, callbacks=[callback],
        logger=pl.loggers.CSVLogger(str(out), name="logs"), enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1,
    )  # fmt: skip
    trainer.fit(Tiny(), loader)
    rank = trainer.global_rank
    result = {"global_step": trainer.global_step, "should_stop": trainer.should_stop}
    if rank == 0 and callback.last_report is not None:
        report = callback.last_report
        result["sections"] = {
            k: {str(r): s for r, s in v.items()}
            for k, v in report.section_relative_perf_scores.items()
        }
        result["stragglers"] = {k: sorted(str(s) for s in v) if isinstance(v, set)
                                else {n: sorted(map(str, s)) for n, s in v.items()}
                                for k, v in callback.last_stragglers.items()}  # fmt: skip
    (out / f"rank{rank}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
