"""Small per-operation traces in the straggler artifact's columns, made by the tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

META = (
    "trial_name: T\nrun_id: 0\ndp_size: 2\ndsp_size: 1\npp_size: 2\ntp_size: 2\n"
    "vpp_size: 1\nworld_size: 8\n"
)
"""dp 2 x pp 2 x tp 2: the trace records one rank per TP group, ranks 0, 2, 4 and 6."""


def artifact_columns(
    *, steps: int = 24, first_step: int = 100, slow: dict[int, float] | None = None, seed: int = 0
) -> dict[str, np.ndarray]:
    """Per step and recorded rank: 4 microbatches of forward and backward compute, a
    batched send+receive (the same interval twice), and a reduce-scatter. ``slow``
    multiplies a rank's compute."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list[Any]] = {
        k: [] for k in ("dp_rank", "stage", "rank", "step", "optype", "start_ts", "duration")
    }
    for step in range(first_step, first_step + steps):
        busy = {}
        plan = {}
        for rank in (0, 2, 4, 6):
            f = (slow or {}).get(rank, 1.0)
            ops = []
            for _ in range(4):
                ops.append(("forward-compute", 0.5 * f * (1 + 0.005 * rng.standard_normal())))
                ops.append(("backward-compute", 1.0 * f * (1 + 0.005 * rng.standard_normal())))
            plan[rank] = ops
            busy[rank] = sum(d for _, d in ops)
        step_s = max(busy.values()) + 0.2
        for rank, ops in plan.items():
            dp, stage = (rank // 2) % 2, rank // 4
            t = 0.0
            for op, d in ops:
                _row(cols, dp, stage, rank, step, op, t, d)
                t += d
            wait = step_s - busy[rank] - 0.2
            _row(cols, dp, stage, rank, step, "forward-send", t, wait)
            _row(cols, dp, stage, rank, step, "backward-recv", t, wait)  # batched: same span
            _row(cols, dp, stage, rank, step, "grads-reduce-scatter", t + wait, 0.2)
            _row(cols, dp, stage, rank, step, "optimizer", t + wait + 0.2, 0.01)
    return {k: np.asarray(v) for k, v in cols.items()}


def _row(cols: dict[str, list[Any]], *values: Any) -> None:
    for key, v in zip(cols, values, strict=True):
        cols[key].append(v)


def write_artifact(tmp: Path, **kw: Any) -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = artifact_columns(**kw)
    table = pa.table(
        {
            "dp_rank": pa.array(cols["dp_rank"], pa.int8()),
            "stage": pa.array(cols["stage"], pa.int8()),
            "rank": pa.array(cols["rank"], pa.int16()),
            "step": pa.array(cols["step"], pa.int64()),
            "optype": pa.array(cols["optype"]).dictionary_encode(),
            "start_ts": pa.array(cols["start_ts"], pa.float32()),
            "duration": pa.array(cols["duration"], pa.float32()),
            "seq_id": pa.array(np.zeros(len(cols["rank"]), dtype=np.int32)),
            "mc": pa.array(np.zeros(len(cols["rank"]), dtype=np.int8)),
            "mb_id": pa.array(np.zeros(len(cols["rank"]), dtype=np.int8)),
            "gmc": pa.array(np.zeros(len(cols["rank"]), dtype=np.int16)),
        }
    )
    trace, meta = tmp / "trace-T.parquet", tmp / "meta-T.yaml"
    pq.write_table(table, trace)
    meta.write_text(META)
    return trace, meta
