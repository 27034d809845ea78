"""The detector's own gloo group, made outside torch.distributed's registry of groups.

Why not ``dist.new_group``: a registered group's store keys come from its name, and the
name from the ranks and how many groups the process has made. A torchrun restart that
shares the rendezvous store (torch's default since 2.4) runs the same code to the same
point and so makes a group of the same name, whose keys still hold the dead attempt's
addresses: gloo connects to a peer that is gone and the group is never made. Here the
keys live under a prefix the detector chooses (``report_group`` puts the restart count
and a per-process creation count in it), so each attempt meets only its own peers.

Unregistered, the group is also invisible to the job: it takes no name from the job's
counter, needs no call order relative to the job's own ``new_group`` calls, and
``destroy_process_group()`` by the job leaves it alone (``close`` ends it). The four
collectives reports need are written on the group's tensor calls: objects travel
pickled, as ``gather_object`` sends them, padded to the largest rank's size.
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Sequence
from datetime import timedelta
from typing import Any


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def available() -> bool:
    dist = _dist()
    return bool(
        dist.is_gloo_available()
        and hasattr(dist, "ProcessGroupGloo")
        and hasattr(dist.distributed_c10d, "_get_default_store")
    )


class OwnGlooGroup:
    """A gloo group over ``ranks`` (global ranks, sorted) keyed under ``prefix``."""

    def __init__(self, ranks: Sequence[int], global_rank: int, timeout_s: float, prefix: str):
        dist = _dist()

        self.ranks = tuple(sorted(ranks))
        self.rank = self.ranks.index(global_rank)
        self.size = len(self.ranks)
        self.prefix = prefix
        self.timeout = timedelta(seconds=timeout_s)
        # The job's default store (the rendezvous store every rank already reaches).
        store = dist.PrefixStore(prefix, dist.distributed_c10d._get_default_store())
        # Connects to every member here, within the timeout.
        self._pg: Any = dist.ProcessGroupGloo(store, self.rank, self.size, self.timeout)

    # --- collectives ----------------------------------------------------------------------

    def all_reduce_max(self, value: float) -> float:
        import torch

        dist = _dist()

        t = torch.tensor([value], dtype=torch.float64)
        opts = dist.AllreduceOptions()
        opts.reduceOp = dist.ReduceOp.MAX
        self._wait(self._pg.allreduce([t], opts))
        return float(t.item())

    def all_gather(self, obj: Any) -> list[Any]:
        data, sizes = self._sized(obj)
        width = max(sizes)
        out = [self._empty(width) for _ in range(self.size)]
        self._wait(self._pg.allgather([out], [self._padded(data, width)]))
        return [_decode(t, n) for t, n in zip(out, sizes, strict=True)]

    def gather_to_first(self, obj: Any) -> list[Any] | None:
        dist = _dist()

        data, sizes = self._sized(obj)
        width = max(sizes)
        first = self.rank == 0
        out = [self._empty(width) for _ in range(self.size)] if first else []
        opts = dist.GatherOptions()
        opts.rootRank = 0
        self._wait(self._pg.gather([out] if first else [], [self._padded(data, width)], opts))
        return [_decode(t, n) for t, n in zip(out, sizes, strict=True)] if first else None

    def broadcast_from_first(self, obj: Any) -> Any:
        import torch

        dist = _dist()

        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        data = pickle.dumps(obj) if self.rank == 0 else b""
        n = torch.tensor([len(data)], dtype=torch.int64)
        self._wait(self._pg.broadcast([n], opts))
        width = int(n.item())
        t = self._padded(data, width) if self.rank == 0 else self._empty(width)
        self._wait(self._pg.broadcast([t], opts))
        return _decode(t, width)

    def close(self) -> None:
        """End the group on this rank (its sockets close; peers' next call on it fails)."""
        pg, self._pg = self._pg, None
        if pg is not None:
            # A failed collective may have torn it down already.
            with contextlib.suppress(Exception):
                pg.shutdown()

    # --- helpers --------------------------------------------------------------------------

    def _wait(self, work: Any) -> None:
        if not work.wait(self.timeout):
            raise TimeoutError(f"detector collective timed out after {self.timeout}")

    def _sized(self, obj: Any) -> tuple[bytes, list[int]]:
        import torch

        data = pickle.dumps(obj)
        mine = torch.tensor([len(data)], dtype=torch.int64)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(self.size)]
        self._wait(self._pg.allgather([sizes], [mine]))
        return data, [int(s.item()) for s in sizes]

    @staticmethod
    def _empty(width: int) -> Any:
        import torch

        return torch.zeros(max(width, 1), dtype=torch.uint8)

    @classmethod
    def _padded(cls, data: bytes, width: int) -> Any:
        import torch

        t = cls._empty(width)
        if data:
            t[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return t


def _decode(t: Any, n: int) -> Any:
    # Our own payloads, from members of this job's group (as gather_object unpickles them).
    return pickle.loads(t[:n].numpy().tobytes())
