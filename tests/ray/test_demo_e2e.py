"""The README's first command (`make demo`: examples/demo.py) end to end, as a user runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).parents[2] / "examples" / "demo.py"


@pytest.mark.slow
def test_demo_names_the_slow_rank_and_shows_what_the_controller_would_do(
    tmp_path: Path,
) -> None:
    out = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out)],
        capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path,
        env={**os.environ, "COLUMNS": "160"},
    )  # fmt: skip
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-4000:]
    assert "STRAGGLER (backward)" in text
    # Rank 0 joined Ray to publish: its reports are filed under that Ray job.
    assert re.search(r"reports from job ray:[0-9a-f]+ \(demo\)", text), text[-4000:]
    assert "would restartRank rank 2 on node1" in text
    png = out / "heatmap.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    # The reports as data: the JSONL trace and the policy that `pacekeeper replay` reads.
    assert sorted(p.name for p in out.iterdir()) == ["heatmap.png", "policy.yaml", "trace.jsonl"]
    assert f"pacekeeper replay --policy {out}/policy.yaml --trace {out}/trace.jsonl" in text
    replayed = subprocess.run(
        [sys.executable, "-m", "pacekeeper.controller.cli", "replay",
         "--policy", str(out / "policy.yaml"), "--trace", str(out / "trace.jsonl")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "restartRank" in replayed.stdout and "(would act)" in replayed.stdout
