"""PyTorch profiler (Kineto) Chrome-trace JSON, one file per rank (``.json`` or
``.json.gz``, as ``torch.profiler.tensorboard_trace_handler`` or
``prof.export_chrome_trace`` writes them), read into ``Operations``.

* steps: the ``ProfilerStep#N`` ranges; an event belongs to the step whose range it
  starts in (GPU events run a little after their step's CPU range, so a step reaches to
  the next one's start). A file without them is one step.
* sections: ``user_annotation`` ranges (``record_function``, the names you gave);
* kernels: ``kernel`` events; communication kernels (``cupti_ext.kernel_keys``' rule:
  NCCL and collective-named) are waits, not GPU work — their time is mostly spent
  waiting for the slowest peer;
* on ranks without communication kernels (gloo, CPU-only), the CPU collectives
  (``c10d::``, ``gloo:``, ``nccl:``, ``record_param_comms``) are the waits.

The rank is ``distributedInfo.rank``; else the number in the file name (``rank3``,
``rank_3``, ``rank-3``); else the file's position. Times are microseconds.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacekeeper.controller.traces.parquet import TraceError
from pacekeeper.controller.traces.windows import Operations, Role, Topology
from pacekeeper.cupti_ext.kernel_keys import is_comm_kernel

STEP = re.compile(r"^ProfilerStep#(\d+)$")
RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)", re.IGNORECASE)
CPU_COLLECTIVE = re.compile(r"^(c10d::|gloo:|nccl:|record_param_comms)")
MAX_TRACE_BYTES = 4 * 1024**3


@dataclass
class _Rank:
    """One rank's events, as (role, name, start us, duration us) rows."""

    rank: int
    world_size: int | None
    steps: list[tuple[int, float]] = field(default_factory=list)
    """(step number, start us), in order."""
    rows: list[tuple[Role, str, float, float]] = field(default_factory=list)


def read_kineto(paths: Sequence[str | Path]) -> tuple[Operations, int]:
    """The operations of every file and the job's world size."""
    if not paths:
        raise TraceError("no Kineto trace files given")
    ranks = [_read_one(Path(p), i) for i, p in enumerate(paths)]
    seen: dict[int, int] = {}
    for i, r in enumerate(ranks):
        if r.rank in seen:
            raise TraceError(f"{paths[i]}: rank {r.rank} again (also {paths[seen[r.rank]]})")
        seen[r.rank] = i
    worlds = {r.world_size for r in ranks if r.world_size is not None}
    world = max([*worlds, max(seen) + 1])
    return _operations(ranks), world


def _load(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_TRACE_BYTES:
            raise TraceError(f"{path}: larger than {MAX_TRACE_BYTES} bytes")
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError) as e:
        raise TraceError(f"{path}: not a Chrome-trace JSON file: {e}") from None


def _read_one(path: Path, position: int) -> _Rank:
    doc = _load(path)
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list")
    info = doc.get("distributedInfo") if isinstance(doc, dict) else None
    info = info if isinstance(info, dict) else {}
    rank = _int(info.get("rank"))
    if rank is None:
        m = RANK_IN_NAME.search(path.name)
        rank = int(m.group(1)) if m else position
    out = _Rank(rank=rank, world_size=_int(info.get("world_size")))
    comm_kernels = False
    cpu_waits: list[tuple[Role, str, float, float]] = []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        name, ts, dur = e.get("name"), _num(e.get("ts")), _num(e.get("dur"))
        if not isinstance(name, str) or ts is None or dur is None or dur < 0:
            continue
        cat = str(e.get("cat", "")).lower()
        step = STEP.match(name)
        if step is not None:
            out.steps.append((int(step.group(1)), ts))
            out.rows.append((Role(0), "ProfilerStep", ts, dur))  # the step's wall time
        elif cat == "kernel":
            comm = is_comm_kernel(name)
            comm_kernels |= comm
            out.rows.append((Role.WAIT if comm else Role.KERNEL, name, ts, dur))
        elif cat == "user_annotation":
            out.rows.append((Role.SECTION, name, ts, dur))
        elif cat == "cpu_op" and CPU_COLLECTIVE.match(name):
            cpu_waits.append((Role.WAIT, name, ts, dur))
    if not comm_kernels:
        out.rows.extend(cpu_waits)
    out.steps.sort(key=lambda s: s[1])
    if not any(role for role, *_ in out.rows):
        raise TraceError(f"{path}: no kernels, annotations or collectives to import")
    return out


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _operations(ranks: Iterable[_Rank]) -> Operations:
    index: dict[tuple[Role, str], int] = {}
    cols: dict[str, list[Any]] = {"rank": [], "step": [], "name": [], "start": [], "dur": []}
    for r in ranks:
        numbers = np.array([n for n, _ in r.steps], dtype=np.int64)
        starts = np.array([t for _, t in r.steps], dtype=np.float64)
        for role, name, ts, dur in r.rows:
            if numbers.size:
                at = int(np.searchsorted(starts, ts, side="right")) - 1
                if at < 0:
                    continue  # before the first step: set-up, not training
                step = int(numbers[at])
            else:
                step = 0
            code = index.setdefault((role, name), len(index))
            for key, value in zip(cols, (r.rank, step, code, ts / 1e6, dur / 1e6), strict=True):
                cols[key].append(value)
    keys = list(index)
    return Operations(
        rank=np.asarray(cols["rank"], dtype=np.int64),
        step=np.asarray(cols["step"], dtype=np.int64),
        name=np.asarray(cols["name"], dtype=np.int64),
        start_s=np.asarray(cols["start"], dtype=np.float64),
        duration_s=np.asarray(cols["dur"], dtype=np.float64),
        names=tuple(name for _, name in keys),
        roles=tuple(role for role, _ in keys),
    )


def coords_of(ranks: Iterable[int], sizes: Mapping[str, int]) -> dict[int, dict[str, int]]:
    """Coordinates of ``ranks`` for parallel ``sizes`` given fastest-varying first
    (``{"tp": 2, "dp": 4, "pp": 2}``)."""
    topo = Topology.of(**sizes)
    return {r: topo.coords(r) for r in ranks}
