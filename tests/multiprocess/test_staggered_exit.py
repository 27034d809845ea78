"""Plain 4-rank gloo scripts that leave without a final barrier, the ranks at staggered
times: every process exits 0 (no gloo abort at exit, no hang).

The worst cases of a plain script: ranks with uneven shares of the data, so one end of
the world is still in the loop, starting report collectives, while the other end has
shut the detector down, destroyed its groups and exited; the reporting rank (0) either
the last to leave or the first. Each run checks every rank's exit code and that the
ranks that stayed longer got their collectives' failures as None reports, counted,
never raised. bench/exit_without_barrier.py runs the same script 20 times per mode.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).with_name("staggered_exit_job.py")
WORLD = 4
STEPS = 200
INTERVAL_S = 0.05


@pytest.mark.parametrize(
    ("stagger", "mode"),
    [(40, "shutdown"), (40, "atexit"), (-40, "atexit")],
    ids=["reporter-first-shutdown", "reporter-first-atexit", "reporter-last-atexit"],
)
def test_a_plain_script_without_a_final_barrier_exits_cleanly(
    tmp_path: Path, stagger: int, mode: str
) -> None:
    store = tmp_path / "store"
    procs = [
        subprocess.Popen(
            [sys.executable, str(JOB), str(r), str(WORLD), str(store), str(STEPS),
             str(stagger), mode, str(INTERVAL_S)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        for r in range(WORLD)
    ]  # fmt: skip
    logs = [p.communicate(timeout=300)[0].decode(errors="replace") for p in procs]
    codes = [p.returncode for p in procs]
    assert codes == [0] * WORLD, f"exit codes {codes}\n" + "\n".join(
        f"--- rank {r}\n{log[-1500:]}" for r, log in enumerate(logs)
    )
    results = [
        json.loads(next(ln for ln in log.splitlines() if ln.startswith("{"))) for log in logs
    ]
    # The reporting rank gathered reports while every rank was still in the loop.
    assert results[0]["reports"] >= 1, results[0]
    # The rank that stayed longest met gone peers: counted failures, nothing raised.
    longest = WORLD - 1 if stagger > 0 else 0
    errors = results[longest]["errors"]
    assert set(errors) <= {"report.gather", "interval.sync"}, errors


def _result(log: str) -> dict[str, object]:
    line = next(ln for ln in log.splitlines() if ln.startswith("{"))
    parsed: dict[str, object] = json.loads(line)
    return parsed
