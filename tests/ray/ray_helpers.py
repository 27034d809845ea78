"""Helpers the Ray tests share: a torchrun launcher, a reader in another process, this
process's job identity and its registration with a board."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pacekeeper.detector.score_report import JobIdentity, Platform


def driver_job(name: str = "t") -> JobIdentity:
    """The identity of reports from this process: its own Ray job (the only one it can
    publish for)."""
    import ray

    job_id = ray.get_runtime_context().get_job_id()
    return JobIdentity(platform=Platform.RAY, name=name, ray_job_id=job_id)


def register(board: Any, badge: Any) -> str:
    """The publishing token of this process's job on ``board``."""
    import ray

    answer = ray.get(board.register.remote(driver_job().key, badge), timeout=60)
    return str(answer["token"])


def reset_named_board() -> None:
    """Kills the cluster's ScoreBoard for good and deletes what it stored, so a test of
    the named board starts from an empty one (this process has one job key only)."""
    import ray
    from ray.experimental import internal_kv

    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

    with contextlib.suppress(ValueError):  # no board yet
        ray.kill(get_scoreboard(create=False), no_restart=True)
    deadline = time.monotonic() + 30
    while True:  # the name is released once the GCS has the actor dead
        try:
            get_scoreboard(create=False)
        except ValueError:
            break
        assert time.monotonic() < deadline, "the killed ScoreBoard kept its name"
        time.sleep(0.05)
    internal_kv._internal_kv_del("scoreboard/", del_by_prefix=True, namespace="pacekeeper")


def start_torchrun(script: Path, nproc: int, env: dict[str, str]) -> subprocess.Popen[str]:
    """Starts ``script`` on ``nproc`` gloo ranks with torchrun, in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={nproc}", str(script)],
        env=os.environ | {"OMP_NUM_THREADS": "1"} | env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """Waits for ``proc``; fails the test with its output tail unless it exited 0."""
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-4000:]
    return out


def read_latest_in_another_process(address: str, job: str) -> str:
    """A separate Python process joins the cluster and prints the job's latest report."""
    code = (
        "import json, sys, ray\n"
        "from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard\n"
        "ray.init(address=sys.argv[1], namespace='reader', log_to_driver=False)\n"
        "board = get_scoreboard(create=False)\n"
        "print(json.dumps(ray.get(board.latest.remote(sys.argv[2]))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, address, job],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]
