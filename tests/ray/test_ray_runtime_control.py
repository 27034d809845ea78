"""Runtime control on Ray: only the holder of the board's control key writes a job's
control, it survives a restart of the board, and the workers of a Ray Train
``TorchTrainer`` (``detect_stragglers``) apply it at the same report."""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Any

import pytest

from pacekeeper.detector.reporters.ray_scoreboard import (
    SCOREBOARD_NAME,
    SCOREBOARD_NAMESPACE,
    get_scoreboard,
)

KEY = "operator-secret"


def _kill_board() -> None:
    import ray

    try:
        ray.kill(ray.get_actor(SCOREBOARD_NAME, namespace=SCOREBOARD_NAMESPACE), no_restart=True)
    except ValueError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get_actor(SCOREBOARD_NAME, namespace=SCOREBOARD_NAMESPACE)
        except ValueError:
            return
        time.sleep(0.1)


def _refused(call: Any) -> str:
    import ray
    from ray.exceptions import RayTaskError

    with pytest.raises(RayTaskError) as caught:
        ray.get(call)
    return str(caught.value)


def test_only_the_control_key_writes_and_a_restarted_board_keeps_it(ray_cluster: str) -> None:
    import ray

    _kill_board()
    keyless = get_scoreboard()
    assert "created without a control key" in _refused(
        keyless.set_control.remote("ray:01000000", {"enabled": False}, KEY)
    )
    _kill_board()
    board = get_scoreboard(control_key=KEY)
    assert "wrong control key" in _refused(
        board.set_control.remote("ray:01000000", {"enabled": False}, "guess")
    )
    assert "outside [0, 1]" in _refused(
        board.set_control.remote("ray:01000000", {"thresholds": {"gpuRelative": 2}}, KEY)
    )
    ray.get(board.set_control.remote("ray:01000000", {"reportTimeIntervalS": 5}, KEY))
    assert ray.get(board.control.remote("ray:01000000")) == {"reportTimeIntervalS": 5.0}
    assert ray.get(board.control.remote("ray:02000000")) is None
    assert ray.get(board.stats.remote())["control_refused"] == 1  # the wrong key
    ray.kill(board, no_restart=False)  # Ray restarts it with the same arguments
    deadline = time.monotonic() + 60
    while True:
        try:
            assert ray.get(board.control.remote("ray:01000000"), timeout=10) == {
                "reportTimeIntervalS": 5.0
            }
            break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            assert time.monotonic() < deadline
            time.sleep(0.2)


def train_loop(config: dict[str, Any]) -> dict[str, Any]:
    import ray.train
    import torch.distributed as dist

    from pacekeeper.detector import Detector
    from pacekeeper.detector.integrations.ray_train import detect_stragglers

    seen = []
    with detect_stragglers(report_time_interval=0, kernel_timing="none") as detection:
        time.sleep(1.0)  # the reporting worker reads the board's control meanwhile
        dist.barrier()
        for _ in range(24):
            with Detector.detection_section("step", profile_cuda=False):
                time.sleep(0.005)
            report = detection.step()
            state = Detector.control_state()
            if Detector.is_interval_elapsed() and state is not None:
                seen.append([state.enabled, state.report_time_interval, report is not None])
        metrics = {"seen": seen, "rank": dist.get_rank()} | detection.stats()
    ray.train.report({"rank": metrics["rank"]})
    return metrics


def test_ray_train_workers_follow_the_control_the_operator_set(ray_cluster: str) -> None:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    from pacekeeper.detector.integrations.ray_train import job_key, report_history

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    _kill_board()
    board = get_scoreboard(control_key=KEY)
    ray.get(board.set_control.remote(job_key(), {"enabled": False}, KEY))
    with tempfile.TemporaryDirectory() as storage:
        result = TorchTrainer(
            train_loop,  # type: ignore[arg-type]
            torch_config=TorchConfig(backend="gloo"),
            scaling_config=ScalingConfig(num_workers=2, use_gpu=False,
                                         resources_per_worker={"CPU": 1}),
            run_config=RunConfig(storage_path=storage, name="pacekeeper-control"),
        ).fit()  # fmt: skip
    assert result.error is None, result.error
    rank0 = result.return_value
    assert rank0["seen"] and all(s == [False, 0.0, False] for s in rank0["seen"])
    assert rank0["reports_published"] == 0
    assert report_history(job_key()) == []
