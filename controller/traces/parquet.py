"""The per-operation parquet of the straggler artifact ("Understanding Stragglers in
Large Model Training Using What-if Analysis", OSDI'25) and its meta YAML, read into
``Operations`` with each rank's parallel coordinates.

Columns: ``dp_rank, stage, rank, step, optype, start_ts, duration`` (seconds), plus
``seq_id, mc, gmc, mb_id``. Roles by optype: ``forward-compute`` and
``backward-compute`` (one microbatch's forward or backward) are the sections
``forward`` and ``backward`` and GPU work; send, receive, all-gather, all-reduce and
reduce-scatter are waits; the rest (optimizer, gc) is left out. With virtual pipeline
stages (``vpp_size`` > 1) each model chunk's compute is a section of its own.

The meta YAML gives ``dp_size, pp_size, tp_size, dsp_size`` (the artifact's sequence
parallelism, carried as ``cp``); coordinates follow Megatron's rank order (tp, cp, dp,
pp fastest first), checked against the ``dp_rank`` and ``stage`` columns.

pyarrow is optional (``pip install 'pacekeeper[traces]'``); without it the reader
fails with one line saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacekeeper.controller.traces.windows import Operations, Role, Topology

COLUMNS = ("dp_rank", "stage", "rank", "step", "optype", "start_ts", "duration")
"""Columns the reader needs (``mc`` too, with virtual pipeline stages)."""
COMPUTE_SUFFIX = "-compute"
WAIT_WORDS = ("send", "recv", "all-gather", "all-reduce", "reduce-scatter", "all-to-all")
PYARROW_MISSING = "reading parquet traces needs pyarrow: pip install 'pacekeeper[traces]'"


class TraceError(ValueError):
    """A trace or its meta that cannot be read; the message is one line naming the file."""


@dataclass(frozen=True, slots=True)
class JobMeta:
    """The artifact's ``meta-*.yaml``."""

    dp: int = 1
    pp: int = 1
    tp: int = 1
    cp: int = 1
    vpp: int = 1
    world_size: int = 1

    @property
    def topology(self) -> Topology:
        return Topology.of(tp=self.tp, cp=self.cp, dp=self.dp, pp=self.pp)


def read_meta(path: str | Path) -> JobMeta:
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise TraceError(f"{p}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise TraceError(f"{p}: not valid YAML: {str(e).splitlines()[0]}") from None
    if not isinstance(doc, dict):
        raise TraceError(f"{p}: expected a mapping with dp_size, pp_size, tp_size")
    sizes = {}
    for key, field in (("dp_size", "dp"), ("pp_size", "pp"), ("tp_size", "tp"), ("dsp_size", "cp")):
        value = doc.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TraceError(f"{p}: {key}={value!r} must be a positive integer")
        sizes[field] = value
    vpp = doc.get("vpp_size", 1)
    vpp = vpp if isinstance(vpp, int) and not isinstance(vpp, bool) and vpp >= 1 else 1
    world = sizes["dp"] * sizes["pp"] * sizes["tp"] * sizes["cp"]
    stated = doc.get("world_size", world)
    if stated != world:
        raise TraceError(f"{p}: world_size={stated!r} is not dp x pp x tp x dsp = {world}")
    return JobMeta(vpp=vpp, world_size=world, **sizes)


def read_parquet(path: str | Path, meta: JobMeta) -> tuple[Operations, dict[int, dict[str, int]]]:
    """The operations and each recorded rank's coordinates."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TraceError(PYARROW_MISSING) from None
    p = Path(path)
    try:
        table = pq.read_table(p)
    except (OSError, ValueError) as e:  # pyarrow's errors derive from these
        raise TraceError(f"{p}: cannot read parquet: {str(e).splitlines()[0]}") from None
    missing = [c for c in COLUMNS if c not in table.column_names]
    if missing:
        raise TraceError(f"{p}: missing columns {', '.join(missing)}")
    columns = {c: table.column(c).to_numpy() for c in COLUMNS}
    if meta.vpp > 1 and "mc" in table.column_names:
        columns["mc"] = table.column("mc").to_numpy()
    try:
        return operations_from_columns(columns, meta)
    except ValueError as e:
        raise TraceError(f"{p}: {e}") from None


def operations_from_columns(
    columns: Mapping[str, Any], meta: JobMeta
) -> tuple[Operations, dict[int, dict[str, int]]]:
    """``Operations`` from the artifact's columns as arrays (what a parquet file holds;
    the benchmark builds them in memory)."""
    optype = np.asarray(columns["optype"], dtype=object).astype(str)
    # "forward-compute" is what a section named "forward" around one microbatch's
    # forward compute measures: it gets that name (per model chunk with vpp).
    label = np.char.replace(optype, COMPUTE_SUFFIX, "")
    if meta.vpp > 1 and "mc" in columns:
        mc = np.asarray(columns["mc"], dtype=np.int64)
        chunked = np.char.add(label, np.char.mod(".chunk%d", mc))
        label = np.where(np.char.endswith(optype, COMPUTE_SUFFIX), chunked, label)
    names, first, code = np.unique(label, return_index=True, return_inverse=True)
    ops = Operations(
        rank=np.asarray(columns["rank"], dtype=np.int64),
        step=np.asarray(columns["step"], dtype=np.int64),
        name=code.astype(np.int64),
        start_s=np.asarray(columns["start_ts"], dtype=np.float64),
        duration_s=np.asarray(columns["duration"], dtype=np.float64),
        names=tuple(str(n) for n in names),
        roles=tuple(role_of(str(optype[i])) for i in first.tolist()),
    )
    return ops, _coords(columns, meta, ops.rank)


def role_of(optype: str) -> Role:
    if optype.endswith(COMPUTE_SUFFIX):
        return Role.SECTION | Role.KERNEL
    if any(w in optype for w in WAIT_WORDS):
        return Role.WAIT
    return Role(0)


def _coords(columns: Mapping[str, Any], meta: JobMeta, ranks: Any) -> dict[int, dict[str, int]]:
    """Coordinates per rank: dp and pp from the columns, tp and cp from the rank order
    when it agrees with them (else left out)."""
    dp = np.asarray(columns["dp_rank"], dtype=np.int64)
    stage = np.asarray(columns["stage"], dtype=np.int64)
    uniq, first = np.unique(ranks, return_index=True)
    topo = meta.topology
    out: dict[int, dict[str, int]] = {}
    for rank, i in zip(uniq.tolist(), first.tolist(), strict=True):
        if rank >= meta.world_size:
            raise ValueError(f"rank {rank} is outside world_size {meta.world_size}")
        derived = topo.coords(rank)
        c = {"dp": int(dp[i]), "pp": int(stage[i])}
        if (derived["dp"], derived["pp"]) == (c["dp"], c["pp"]):
            c |= {"tp": derived["tp"], "cp": derived["cp"]}
        out[rank] = c
    return out
