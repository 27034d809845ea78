"""The detector's report path against world size: flat gloo group against the tree (issue 42).

Real gloo ranks on this machine, grouped 4 to a "host" (``LOCAL_WORLD_SIZE=4``), each
timing 8 sections; for every world size and path, side by side in one run:

* **sockets added per rank**: sockets in /proc/self/fd before and after the first
  report (the one that makes the detector's groups), mean and largest over the ranks;
* **rank 0's report**: wall time of ``generate_report`` (median of the later reports,
  every rank entering together after a barrier of the job's group) and its RSS growth
  from before the first report to the end (``VmRSS``);
* the whole job's detector sockets (the sum over the ranks).

``--rank0-at 16384 131072`` adds rank 0's own part at those sizes, in this process
(no gloo ranks, no threads), on both paths (``rank0_part``): on the flat group N
synthetic payloads of ``SECTIONS`` sections unpickled and scored; on the tree, the
root's work as a node leader and its combining of every host's scores (scoring on the
leaders), each under ``tracemalloc``: its time and its peak allocation (numpy included).

Then a cost model is fitted to the points (least squares, line in the world size for
the flat path; for the tree, sockets from its shape and time as a line plus a term per
level) and its figure printed at 16,384 and 131,072 ranks. Every rank shares this
machine's cores, so report times grow with the ranks' contention as much as with the
path: read them side by side, not as a cluster's figures (docs/performance.md).

Run: .venv/bin/python bench/detector_scale.py [--worlds 4 8 16 32 64] [--reports 4]
"""

from __future__ import annotations

import argparse
import os
import pickle
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import emit

from pacekeeper.detector import Detector, report_path
from pacekeeper.detector.local_world import spawn_world

PER_HOST = 4
SECTIONS = 8
ENTRIES = 20
PATHS = {"flat": ("flat", 8), "tree": ("tree", 8), "tree-f2": ("tree", 2)}
"""Name -> (PACEKEEPER_REPORT_PATH, PACEKEEPER_REPORT_FANOUT). ``tree`` is the default
fan-out; ``tree-f2`` shows a deeper tree's bound at the small worlds this machine holds."""
MODEL_AT = (16_384, 131_072)
MODEL_PER_HOST = 8
"""The model's host size at 16,384 and 131,072 ranks: 8 GPUs a node."""


def _sockets() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    return n


def _rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _window() -> None:
    for s in range(SECTIONS):
        for _ in range(ENTRIES):
            with Detector.detection_section(f"section_{s}", profile_cuda=False):
                pass


def _count_gathered(sizes: list[int]) -> None:
    """Record the pickled bytes of what each report's exchange brings this rank: on the
    flat group every rank's payload, on the tree every host's scores."""
    from pacekeeper.detector import report_cycle

    inner = report_cycle._exchange

    def counted(*args: Any, **kwargs: Any) -> Any:
        out = inner(*args, **kwargs)
        if isinstance(out, list):
            sizes.append(sum(len(pickle.dumps(p)) for p in out))
        elif out is not None:  # the tree's root: the job's scores, joined on the way up
            sizes.append(len(pickle.dumps(out)))
        return out

    report_cycle._exchange = counted


def bench_rank(rank: int, world_size: int, out_dir: str, reports: int) -> None:
    import torch.distributed as dist

    gathered: list[int] = []
    _count_gathered(gathered)
    Detector.initialize(report_time_interval=3600, kernel_timing="none", node_name=f"h{rank // 4}")
    _window()
    dist.barrier()
    before, rss0 = _sockets(), _rss_kib()
    t0 = time.perf_counter()
    Detector.generate_report()
    first_ms = (time.perf_counter() - t0) * 1e3
    added = _sockets() - before
    times, cpu = [], []
    for _ in range(reports):
        _window()
        dist.barrier()
        t0, c0 = time.perf_counter(), time.process_time()
        Detector.generate_report()
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    result = {
        "added": added,
        "first_ms": first_ms,
        "report_ms": statistics.median(times),
        "cpu_ms": statistics.median(cpu),
        "gathered_kib": (gathered[-1] / 1024) if gathered else 0.0,
        "rss_growth_kib": _rss_kib() - rss0,
        "rss_kib": _rss_kib(),
        "errors": Detector.internal_errors(),
    }
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(result, f)
    Detector.shutdown()


def measure(world: int, path: str, reports: int) -> dict[str, Any]:
    mode, fanout = PATHS[path]
    os.environ.update(
        PACEKEEPER_REPORT_PATH=mode,
        PACEKEEPER_REPORT_FANOUT=str(fanout),
        LOCAL_WORLD_SIZE=str(PER_HOST),
    )
    with tempfile.TemporaryDirectory(prefix="pacekeeper-scale-") as out:
        spawn_world(bench_rank, world, out, reports)
        ranks = [pickle.loads(Path(out, f"rank{r}.pkl").read_bytes()) for r in range(world)]
    errors = sum(sum(r["errors"].values()) for r in ranks)
    added = [r["added"] for r in ranks]
    return {
        "world": world,
        "path": path,
        "sockets/rank mean": round(statistics.fmean(added), 2),
        "sockets/rank max": max(added),
        "sockets job": sum(added),
        "rank0 first ms": round(ranks[0]["first_ms"], 2),
        "rank0 report ms": round(ranks[0]["report_ms"], 2),
        "rank0 CPU ms": round(ranks[0]["cpu_ms"], 2),
        "rank0 gathered KiB": round(ranks[0]["gathered_kib"], 1),
        "rank0 RSS MiB": round(ranks[0]["rss_kib"] / 1024, 1),
        "rank0 RSS growth KiB": ranks[0]["rss_growth_kib"],
        "errors": errors,
    }


def _synthetic_payloads(world: int, kernels: int) -> tuple[list[Any], dict[int, str]]:
    """``world`` payloads of ``SECTIONS`` sections and ``kernels`` kernels (each named
    once, as a receiver's table holds them after the first report)."""
    from pacekeeper.detector.payload import RankPayload, key_id
    from pacekeeper.detector.reports import RankInfo

    names = {key_id(f"section_{s}"): f"section_{s}" for s in range(SECTIONS)}
    ids = np.array(list(names), dtype=np.uint64)
    k_names = {key_id(f"kernel_{k}"): f"kernel_{k}" for k in range(kernels)}
    k_ids = np.array(list(k_names), dtype=np.uint64)
    rng = np.random.default_rng(0)
    payloads = [
        RankPayload(
            RankInfo(r, f"h{r // MODEL_PER_HOST}", section_samples=ENTRIES),
            ids,
            rng.uniform(0.9e6, 1.1e6, SECTIONS),
            rng.uniform(0.9, 1.0, SECTIONS),
            k_ids,
            rng.uniform(0.9e4, 1.1e4, kernels),
            rng.uniform(0.9e5, 1.1e5, kernels),
            gpu_individual=0.95,
            names=names,
        )
        for r in range(world)
    ]
    return payloads, {**names, **k_names}


def _traced(work: Any) -> tuple[float, float, int]:
    """``work()``'s wall and CPU seconds and its peak allocation under tracemalloc
    (which slows Python's allocations: the times are also taken without it)."""
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    work()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return wall, cpu, peak


def rank0_part(world: int, kernels: int = 0, fanout: int = 8) -> list[dict[str, Any]]:
    """Rank 0's own part of a report of ``world`` ranks (8 a host), on each path,
    measured in this process.

    * flat: unpickle ``world`` payloads and score them all (``score_payloads``);
    * tree: the root as a node leader (unpickle its host's payloads, summarise them,
      merge its ``fanout`` children's summaries, score its host against the job's
      references), then unpickle its children's parts (each its subtree's hosts'
      ``HostScores`` joined, as their leaders pass them up), join them with its own and
      make the report's mappings and ``RankInfo`` from them. The children's parts are
      made beforehand, as their leaders would make them.
    """
    from pacekeeper.detector import host_scores, key_references
    from pacekeeper.detector.payload import score_payloads
    from pacekeeper.detector.work_mix import with_mix_groups

    payloads, names = _synthetic_payloads(world, kernels)
    blobs = [pickle.dumps(p) for p in payloads]
    per = MODEL_PER_HOST
    refs = key_references.of_payloads(payloads)
    child_refs = [pickle.dumps(refs)] * fanout
    rest = payloads[per:]
    size = -(-len(rest) // fanout)
    children = [
        pickle.dumps(
            host_scores.join(
                [
                    host_scores.score_host(
                        sub[i : i + per], names, refs, relative=True, individual=True
                    )
                    for i in range(0, len(sub), per)
                ]
            )
        )
        for sub in (rest[c : c + size] for c in range(0, len(rest), size))
    ]

    def flat() -> None:
        got = [pickle.loads(b) for b in blobs]
        score_payloads(got, names, relative=True, individual=True)
        with_mix_groups({p.info.rank: p.info for p in got}, got)

    def tree() -> None:
        mine = [pickle.loads(b) for b in blobs[:per]]
        summary = key_references.of_payloads(mine)
        key_references.merge([summary, *(pickle.loads(b) for b in child_refs)])
        own = host_scores.score_host(mine, names, refs, relative=True, individual=True)
        joined = host_scores.join([own, *(pickle.loads(b) for b in children)])
        joined.scores()
        joined.rank_info()

    received = {"flat": blobs, "tree": children}
    rows = []
    for path, work in (("flat", flat), ("tree", tree)):
        t0, c0 = time.perf_counter(), time.process_time()
        work()
        plain_wall, plain_cpu = time.perf_counter() - t0, time.process_time() - c0
        wall, cpu, peak = _traced(work)
        rows.append(
            {
                "world": world,
                "kernels": kernels,
                "path": path,
                "received MiB": round(sum(map(len, received[path])) / 2**20, 1),
                "rank0 s": round(plain_wall, 2),
                "CPU s": round(plain_cpu, 2),
                "rank0 s (traced)": round(wall, 2),
                "CPU s (traced)": round(cpu, 2),
                "peak alloc MiB": round(peak / 2**20, 1),
                "peak KiB/rank": round(peak / 1024 / world, 2),
            }
        )
    return rows


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares intercept and slope."""
    slope, intercept = np.polyfit(np.asarray(xs, float), np.asarray(ys, float), 1)
    return float(intercept), float(slope)


def tree_sockets(world: int, per_host: int, fanout: int) -> tuple[int, int]:
    """(most on a member, most on a leader) from the tree's shape: a group of k members
    adds k sockets to each (measured: k - 1 peers and a listener)."""
    nodes = -(-world // per_host)
    member = per_host if per_host > 1 else 0
    heads = min(fanout, nodes - 1) + 1 if nodes > 1 else 0
    under = min(fanout, nodes - 1) + 1 if nodes > 1 else 0
    return member, member + heads + under


def model(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fitted figures at ``MODEL_AT`` ranks (8 ranks a host there)."""
    out = []
    for path, (_, fanout) in PATHS.items():
        pts = [r for r in rows if r["path"] == path]
        xs = [float(r["world"]) for r in pts]
        t_a, t_b = _line(xs, [r["rank0 report ms"] for r in pts])
        c_a, c_b = _line(xs, [r["rank0 CPU ms"] for r in pts])
        g_a, g_b = _line(xs, [r["rank0 gathered KiB"] for r in pts])
        m_a, m_b = _line(xs, [r["rank0 RSS MiB"] for r in pts])
        s_a, s_b = _line(xs, [r["sockets/rank max"] for r in pts])
        for world in MODEL_AT:
            if path == "flat":
                sockets = round(s_a + s_b * world)
                member = sockets
            else:
                member, sockets = tree_sockets(world, MODEL_PER_HOST, fanout)
            levels = report_path.depth(-(-world // MODEL_PER_HOST), fanout)
            out.append(
                {
                    "world": world,
                    "path": path,
                    "sockets/rank (member)": member,
                    "sockets/rank max": sockets,
                    "tree levels": levels if path != "flat" else 0,
                    "rank0 CPU ms (line)": round(c_a + c_b * world, 1),
                    "rank0 gathered MiB (line)": round((g_a + g_b * world) / 1024, 1),
                    "rank0 wall ms (line)": round(t_a + t_b * world, 1),
                    "rank0 RSS MiB (line)": round(m_a + m_b * world, 1),
                    "fit": (
                        f"cpu {c_a:.2f}+{c_b:.4f}N ms; gathered {g_a:.1f}+{g_b:.3f}N KiB; "
                        f"wall {t_a:.1f}+{t_b:.3f}N ms; RSS {m_a:.1f}+{m_b:.4f}N MiB"
                    ),
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worlds", type=int, nargs="*", default=[4, 8, 16, 32])
    ap.add_argument("--reports", type=int, default=4)
    ap.add_argument("--name", default="detector_scale")
    ap.add_argument("--rank0-at", type=int, nargs="*", default=[])
    ap.add_argument(
        "--kernels", type=int, nargs="*", default=[0], help="kernels a rank, for --rank0-at"
    )
    args = ap.parse_args(argv)
    if args.rank0_at:
        part = [row for k in args.kernels for n in args.rank0_at for row in rank0_part(n, k)]
        emit(f"{args.name}_rank0", part, title="rank 0's decoding and scoring, one process")
    if not args.worlds:  # --worlds with no size: rank 0's part alone
        return 0
    rows = []
    t0 = time.monotonic()
    for world in args.worlds:
        for path in PATHS:  # side by side: each world's paths one after the other
            rows.append(measure(world, path, args.reports))
            print(rows[-1], flush=True)
    fitted = model(rows)
    meta = {
        "per_host": PER_HOST,
        "sections": SECTIONS,
        "entries_per_section": ENTRIES,
        "reports": args.reports,
        "paths": {k: {"mode": m, "fanout": f} for k, (m, f) in PATHS.items()},
        "model": fitted,
        "model_per_host": MODEL_PER_HOST,
        "wall_s": round(time.monotonic() - t0, 1),
    }
    emit(
        args.name,
        rows,
        title=f"detector report path by world size ({PER_HOST} ranks a host, this machine)",
        meta=meta,
    )
    emit(
        f"{args.name}_model",
        fitted,
        title="fitted cost model (8 ranks a host)",
        meta={"from": f"{args.name}.json"},
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
