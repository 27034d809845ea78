"""Helpers the Ray tests share: a torchrun launcher, a reader in another process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


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
