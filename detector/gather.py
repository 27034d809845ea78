"""The detector's only torch.distributed user.

The job's group is the one given to ``Detector.initialize`` (WORLD when none); it is
described afresh at every report, so a detector started before ``init_process_group``
sees the real ranks once they exist. Collectives run on whatever group the caller passes
(``report_group`` passes the detector's own group, made here by ``new_report_group``),
addressed by *group* rank, so ranks split into sub-groups each report on their own
without waiting for the other groups (NVRx's WORLD-rank arithmetic deadlocks there).
Without an initialised default group the job is a world of one and nothing is called.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from . import own_gloo, tree_group
from .own_gloo import OwnGlooGroup
from .tree_group import TreeGroup

OWN_GROUPS = (OwnGlooGroup, TreeGroup)
"""The detector's own gloo groups: flat, or a tree of small ones (``report_path``)."""


@dataclass(frozen=True, slots=True)
class GroupInfo:
    distributed: bool
    group_rank: int
    group_size: int
    global_rank: int
    world_size: int
    global_ranks: tuple[int, ...]
    """Global rank of each group rank."""
    backend: str

    @property
    def alone(self) -> bool:
        """Nobody to hear from: no process group, or a group of one (a collective would
        only add device copies)."""
        return not self.distributed or self.group_size == 1

    @property
    def is_reporter(self) -> bool:
        """Group rank 0 receives everything when reports are gathered on one rank."""
        return self.group_rank == 0


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def is_distributed() -> bool:
    # A process that never imported torch.distributed cannot have a group: no import
    # here, so a torch-free job (or one without torch installed) stays torch-free.
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return False
    return bool(dist.is_available() and dist.is_initialized())


def describe_group(process_group: Any = None) -> GroupInfo:
    """Ranks and sizes of ``process_group`` (or WORLD); raises ValueError if this process
    is not a member (user input: checked at ``initialize``)."""
    if not is_distributed():
        if process_group is not None:
            raise ValueError(
                "process_group was given but torch.distributed is not initialised; "
                "call init_process_group first"
            )
        return GroupInfo(False, 0, 1, 0, 1, (0,), "none")
    dist = _dist()
    if isinstance(process_group, OWN_GROUPS):
        return GroupInfo(
            True,
            process_group.rank,
            process_group.size,
            int(dist.get_rank()),
            int(dist.get_world_size()),
            process_group.ranks,
            "gloo",
        )
    group = process_group if process_group is not None else dist.group.WORLD
    group_rank = dist.get_rank(group)
    if group_rank < 0:
        raise ValueError(
            f"process_group: rank {dist.get_rank()} is not a member of the given group"
        )
    ranks = tuple(int(r) for r in dist.get_process_group_ranks(group))
    return GroupInfo(
        True,
        int(group_rank),
        int(dist.get_world_size(group)),
        int(dist.get_rank()),
        int(dist.get_world_size()),
        ranks,
        str(dist.get_backend(group)),
    )


def default_group() -> Any:
    """The job's default group (WORLD) object, or None when there is none."""
    if not is_distributed():
        return None
    return _dist().group.WORLD


def new_report_group(
    ranks: Sequence[int], backend: str | None, timeout_s: float, key_prefix: str
) -> Any:
    """A new group over ``ranks`` (global) for the detector alone, with its own timeout.

    ``backend`` None means gloo (CPU objects; a timed-out gloo collective raises in that
    call and leaves every other group alone), made outside torch's registry with its
    store keys under ``key_prefix`` (``own_gloo`` says why): one group over ``ranks`` or
    a tree of node and leader groups, as the job group's rank 0 decides (``tree_group``,
    ``report_path``). Otherwise, or when gloo is
    not built, a registered group of ``backend`` (the job's when None): only the members
    take part (``use_local_synchronization``) and its name is hashed from its ranks, so
    the job's own counter of group names is untouched; every member must then call this
    at the same point of its sequence of group creations.
    """
    dist = _dist()
    if backend is None and own_gloo.available():
        return tree_group.make(ranks, int(dist.get_rank()), timeout_s, key_prefix)
    chosen = backend
    if chosen is None and dist.is_gloo_available():
        chosen = "gloo"
    return dist.new_group(
        ranks=list(ranks),
        timeout=timedelta(seconds=timeout_s),
        backend=chosen,
        use_local_synchronization=True,
    )


def close_report_group(group: Any) -> None:
    """End a group ``new_report_group`` made (registered groups end with the job's)."""
    if isinstance(group, OWN_GROUPS):
        group.close()


def join_gloo_world(rank: int, world_size: int, store_file: str) -> None:
    """Join a gloo world through a file store (local demo, tests and benchmarks)."""
    _dist().init_process_group(
        "gloo", init_method=f"file://{store_file}", rank=rank, world_size=world_size
    )


def leave_world() -> None:
    if is_distributed():
        # Ranks leave together: one that tears its groups down while another still runs a
        # report collective on the detector's group can abort in gloo at exit.
        _dist().barrier()
        _dist().destroy_process_group()


def _group(process_group: Any) -> Any:
    return process_group if process_group is not None else _dist().group.WORLD


def gather_to_reporter(obj: Any, info: GroupInfo, process_group: Any) -> list[Any] | None:
    """Group rank 0 gets every group rank's ``obj`` (in group-rank order); others None."""
    if info.alone:
        return [obj]
    if isinstance(process_group, OWN_GROUPS):
        return process_group.gather_to_first(obj)
    dist = _dist()
    out: list[Any] | None = [None] * info.group_size if info.is_reporter else None
    dist.gather_object(obj, out, group=_group(process_group), group_dst=0)
    return out


def all_gather(obj: Any, info: GroupInfo, process_group: Any) -> list[Any]:
    """Every group rank gets every group rank's ``obj`` (in group-rank order)."""
    if info.alone:
        return [obj]
    if isinstance(process_group, OWN_GROUPS):
        return process_group.all_gather(obj)
    dist = _dist()
    out: list[Any] = [None] * info.group_size
    dist.all_gather_object(out, obj, group=_group(process_group))
    return out


def broadcast_from_reporter(obj: Any, info: GroupInfo, process_group: Any) -> Any:
    """Group rank 0's ``obj`` on every group rank (the runtime-control exchange)."""
    if info.alone:
        return obj
    if isinstance(process_group, OWN_GROUPS):
        return process_group.broadcast_from_first(obj)
    box = [obj if info.is_reporter else None]
    _dist().broadcast_object_list(box, group=_group(process_group), group_src=0)
    return box[0]


def all_reduce_max(value: float, info: GroupInfo, process_group: Any) -> float:
    """The largest ``value`` over the group (one float: the report-interval agreement)."""
    if info.alone:
        return value
    if isinstance(process_group, OWN_GROUPS):
        return process_group.all_reduce_max(value)
    import torch

    dist = _dist()
    # NCCL reduces only device tensors; every other backend takes CPU tensors.
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if info.backend == "nccl"
        else torch.device("cpu")
    )
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=_group(process_group))
    return float(t.item())
