"""Ray Train + pacekeeper: two CPU workers (gloo) whose straggler scores land in the
ScoreBoard actor, then read back the way a controller would.

    python examples/ray_train_example.py                         # starts a local Ray
    RAY_ADDRESS=HOST:PORT python examples/ray_train_example.py   # an existing cluster

Run as a script, the training function lives in ``__main__``, so Ray ships it to every
worker by value: nothing but pacekeeper itself has to be installed there. CPU workers,
gloo: the same code runs on GPU workers with ``use_gpu=True``. tests/ray runs this file
as a subprocess against the test's cluster; its last line is a JSON summary.
"""

from __future__ import annotations

import json
import os
import tempfile
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


def main() -> None:
    import ray

    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard
    from pacekeeper.detector.score_report import ScoreReport

    if os.environ.get("RAY_ADDRESS"):
        ray.init()
    else:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2)
    with tempfile.TemporaryDirectory() as storage:
        result = run(num_workers=2, steps=6, report_every=3, storage_path=storage)
    print("worker metrics:", result.metrics)
    job = f"ray:{ray.get_runtime_context().get_job_id()}"
    latest = ScoreReport.from_wire(ray.get(get_scoreboard().latest.remote(job)))
    print("job", job, "report", latest.sequence, "worst rank", latest.summary.worst_rank)
    for r in latest.ranks:
        print(f"  rank {r.rank} on {r.node}: forward score {r.section_relative.get('forward')}")
    summary = {"job": job, "error": None if result.error is None else str(result.error)}
    print(json.dumps(summary | {"return_value": result.return_value}))


if __name__ == "__main__":
    main()
