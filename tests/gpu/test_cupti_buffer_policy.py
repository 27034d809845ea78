"""CUPTI's buffer policy on a real GPU (cupti_ext/buffer_policy.py): kernels launched from
two threads inside one section entry, as a training step's forward and autograd's
backward are, come in one buffer with the default policy and in one per thread with
CUPTI's own, every kernel counted either way, in buffers we zero.

Each policy runs in a fresh process: CUPTI's per-thread mode is the process's. The second
thread lives as long as the run, as autograd's does: with a thread started and ended
per step, per-thread buffers read one buffer at the fence on the H200 (2026-12-03), as
if each ending thread's buffer were handed over when it ended."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading

import pytest

STEPS = 5


def _scenario() -> dict[str, object]:
    import torch
    from workloads import add_kernels, mul_kernels

    from pacekeeper.cupti_ext import CuptiBackend

    x = torch.randn(1 << 16, device="cuda")
    y = torch.randn(1 << 16, device="cuda")
    torch.cuda.synchronize()
    jobs: queue.Queue[threading.Event | None] = queue.Queue()

    def worker() -> None:  # launches from its own thread, like autograd's engine
        while (done := jobs.get()) is not None:
            mul_kernels(y, 20)
            done.set()

    other = threading.Thread(target=worker, daemon=True)
    other.start()
    b = CuptiBackend(sample_every=1, attribution="gated")
    windows = []
    try:
        for _ in range(3):  # buffers handed back and reused, window after window
            for _ in range(STEPS):
                b.start("step")
                done = threading.Event()
                jobs.put(done)
                add_kernels(x, 30)
                done.wait(30)
                b.stop("step")
            torch.cuda.synchronize()
            w = b.collect()
            names = b.kernel_names()
            kinds = {
                kind: sum(s.num for k, s in w.kernels.items() if kind in names[k].lower())
                for kind in ("add", "mul")
            }
            windows.append(
                {
                    "counts": [w.records, w.unattributed_records, w.dropped_records],
                    "kinds": kinds,
                    "buffers": b.last_collect["buffers_in_fence"],
                }
            )
        return {"policy": b._session.start_info, "windows": windows}
    finally:
        jobs.put(None)
        b.shutdown()


@pytest.mark.parametrize(
    ("threads", "zero", "buffers"), [("one", "ours", 1), ("per-thread", "cupti", 2)]
)
def test_two_launching_threads_fill_the_buffers_the_policy_says(
    threads: str, zero: str, buffers: int
) -> None:
    env = os.environ | {"PACEKEEPER_CUPTI_THREAD_BUFFERS": threads, "PACEKEEPER_CUPTI_ZERO": zero}
    run = subprocess.run(
        [sys.executable, __file__],
        check=False,
        env=env,
        cwd=os.path.dirname(__file__),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    print(threads, zero, out)
    assert out["policy"]["thread_buffers"] == threads and out["policy"]["zero"] == zero
    for window in out["windows"]:
        assert window["counts"] == [50 * STEPS, 0, 0]
        assert window["kinds"] == {"add": 30 * STEPS, "mul": 20 * STEPS}
        assert window["buffers"] == buffers


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    print(json.dumps(_scenario()))
