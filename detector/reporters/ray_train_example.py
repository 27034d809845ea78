"""A Ray Train job that reports straggler scores to the ScoreBoard: the example that
docs/examples/ray_train_example.py runs and tests/ray runs in the test suite.

It lives in the package (not only under docs/) so Ray can import the training function
by reference on every worker and the test can run it on the test session's cluster.
CPU workers, gloo: the same code runs on GPU workers with ``use_gpu=True``.
"""

from __future__ import annotations

import time
from typing import Any


def train_loop_per_worker(config: dict[str, Any]) -> dict[str, Any]:
    """Each worker: a small model, the Detector around the step, a report every few steps.

    The reporter needs no code beyond the Detector's: ``reporter="auto"`` in a Ray
    worker picks the ScoreBoard, and the Detector names the job after the Ray job id."""
    import ray.train
    import torch
    import torch.distributed as dist

    from pacekeeper.detector import Detector

    rank = dist.get_rank()
    steps: int = config.get("steps", 6)
    report_every: int = config.get("report_every", 3)
    slow_rank: int = config.get("slow_rank", 1)
    extra_delay_s: float = config.get("extra_delay_s", 0.02)

    Detector.initialize(report_time_interval=3600, kernel_timing="none", reporter="ray")
    publisher = Detector.reporter()  # on rank 0 only: it holds the whole job's report
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(16, 32)
    try:
        for step in range(steps):
            # Time the compute only: DDP's all-reduce in backward makes every rank wait
            # for the slowest, so a section around it would make them all look slow.
            with Detector.detection_section("forward", profile_cuda=False):
                loss = model(data).pow(2).mean()
                if rank == slow_rank:
                    time.sleep(extra_delay_s)  # the straggler we expect to find
            opt.zero_grad()
            loss.backward()
            opt.step()
            if (step + 1) % report_every == 0:
                Detector.generate_report()
        metrics: dict[str, Any] = {"loss": float(loss.detach())}
        if publisher is not None:
            publisher.close(timeout_s=30)
            stats = publisher.stats()
            metrics |= {"reports_published": stats.published, "reports_failed": stats.rejected}
        ray.train.report(metrics)
        return metrics  # Ray Train 2.5x+ hands rank 0's back as Result.return_value
    finally:
        Detector.shutdown()


def run(*, num_workers: int = 2, steps: int = 6, report_every: int = 3, storage_path: str) -> Any:
    """Runs the example with ``num_workers`` CPU workers on the connected Ray cluster."""
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        train_loop_per_worker,  # type: ignore[arg-type]  # returns metrics (return_value)
        train_loop_config={"steps": steps, "report_every": report_every},
        torch_config=TorchConfig(backend="gloo"),
        scaling_config=ScalingConfig(
            num_workers=num_workers, use_gpu=False, resources_per_worker={"CPU": 1}
        ),
        run_config=RunConfig(storage_path=storage_path, name="pacekeeper-ray-train-example"),
    )
    return trainer.fit()
