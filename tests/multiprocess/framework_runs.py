"""Runs a framework's training script under torchrun on CPU (gloo) for the integration
tests, and says loudly when the framework is missing where it must be installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest


def require(*modules: str, extra: str) -> None:
    """Skip when none of ``modules`` is installed, except under CI (``CI=true``), where
    the dev extra installs them: there a missing framework is a failure, not a skip."""
    if any(importlib.util.find_spec(m) is not None for m in modules):
        return
    message = f"{' or '.join(modules)} is not installed (pip install 'pacekeeper[{extra}]')"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def torchrun(script: Path, out: Path, *, nproc: int = 2, extra: list[str] | None = None,
             env: dict[str, str] | None = None, timeout_s: float = 240) -> str:  # fmt: skip
    """Runs ``script`` on ``nproc`` local ranks; returns its output, asserts it exited 0."""
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc-per-node={nproc}", *(extra or []), str(script)],
        env=os.environ | {"OMP_NUM_THREADS": "1", "OUT_DIR": str(out)} | (env or {}),
        capture_output=True, text=True, timeout=timeout_s, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-5000:]
    return output
