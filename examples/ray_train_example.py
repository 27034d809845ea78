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

    ``detect_stragglers`` starts the Detector with the ScoreBoard reporter (the reporting
    worker publishes under the driver's Ray job) and flushes and shuts it down at the end."""
    import ray.train
    import torch
    import torch.distributed as dist

    from pacekeeper.detector import Detector
    from pacekeeper.detector.integrations.ray_train import detect_stragglers

    rank = dist.get_rank()
    steps: int = config.get("steps", 6)
    report_every: int = config.get("report_every", 3)
    slow_rank: int = config.get("slow_rank", 1)
    extra_delay_s: float = config.get("extra_delay_s", 0.02)

    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(16, 32)
    with detect_stragglers(report_time_interval=3600, kernel_timing="none") as detection:
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
                detection.report()  # or detection.step() every iteration, on the interval
        detection.flush(timeout_s=30)
        metrics: dict[str, Any] = {"loss": float(loss.detach())} | detection.stats()
    ray.train.report(metrics)
    return metrics  # Ray Train 2.5x+ hands rank 0's back as Result.return_value


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

    from pacekeeper.detector.integrations.ray_train import job_key, latest_report

    if os.environ.get("RAY_ADDRESS"):
        ray.init()
    else:
        ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024**2)
    with tempfile.TemporaryDirectory() as storage:
        result = run(num_workers=2, steps=6, report_every=3, storage_path=storage)
    print("worker metrics:", result.metrics)
    job = job_key()
    latest = latest_report(job)
    assert latest is not None
    print("job", job, "report", latest.sequence, "worst rank", latest.summary.worst_rank)
    for r in latest.ranks:
        print(f"  rank {r.rank} on {r.node}: forward score {r.section_relative.get('forward')}")
    summary = {"job": job, "error": None if result.error is None else str(result.error)}
    print(json.dumps(summary | {"return_value": result.return_value}))


if __name__ == "__main__":
    main()
