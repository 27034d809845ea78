"""Who waits for whom in one simulated step, and what the detector's collective timing
measures of it (``detector/collectives.py``).

A synchronous job's ranks meet in collectives: the ones that get there first wait for
the last. The detector times the blocking calls on each rank (the wait for the slowest
peer plus the transfer itself), and DDP's backward from its last ready bucket to the
end of the section around it, and scores each section on the median over entries of
each entry's time less its own wait (``SectionSummary.work_median_ns``). This module
places that wait:

* the gradient all-reduce, among the ranks of one data-parallel group: in the
  ``optimizer`` section, or, with DDP overlap, inside ``forward_backward`` (the
  reducer all-reduces buckets while backward runs; what is left when the last bucket
  is ready — the wait for the slowest peer and the last buckets' transfer — is timed
  as wait);
* the pipeline's point-to-point sends and receives, inside ``forward_backward``: a
  stage that finishes its micro-batches before the slowest stage of its pipeline
  idles in ``recv`` until the slowest one's activations or gradients arrive (the
  bubble a longer last stage opens in every earlier stage).

Pure numpy over ranks x steps arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def group_max(values: F64, groups: I64 | None) -> F64:
    """Per rank (row) and step (column), the largest value among the rows of its group;
    ``groups`` None: every row is in one group."""
    if groups is None:
        return np.broadcast_to(values.max(axis=0, keepdims=True), values.shape)
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
    per_group = np.maximum.reduceat(values[order], starts, axis=0)
    which = np.searchsorted(sorted_groups[starts], groups)
    return np.asarray(per_group[which], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Pipeline stages over nodes: stage ``s`` holds the ``s``-th run of consecutive
    nodes; within a stage every GPU is a data-parallel replica of that stage (tensor
    parallelism inside a node is not modelled), and replica ``d`` of every stage forms
    one pipeline."""

    stage: I64
    """Per rank: its pipeline stage (coordinate ``pp``)."""
    replica: I64
    """Per rank: its data-parallel replica within the stage (coordinate ``dp``)."""
    stages: int

    @classmethod
    def over_nodes(cls, ranks: int, gpus_per_node: int, stages: int) -> Pipeline:
        if stages < 1:
            raise ValueError(f"pipeline stages must be >= 1, got {stages}")
        rank = np.arange(ranks, dtype=np.int64)
        node = rank // gpus_per_node
        nodes = -(-ranks // gpus_per_node)
        per_stage = max(1, -(-nodes // stages))
        replica = (node % per_stage) * gpus_per_node + rank % gpus_per_node
        return cls(stage=node // per_stage, replica=replica, stages=stages)

    def last_stage(self) -> npt.NDArray[np.bool_]:
        return np.asarray(self.stage == self.stages - 1, dtype=np.bool_)

    def coords(self) -> list[dict[str, int]]:
        """Per rank, what ``Detector.set_topology(coords=...)`` would be given."""
        return [
            {"dp": d, "pp": s}
            for s, d in zip(self.stage.tolist(), self.replica.tolist(), strict=True)
        ]


@dataclass(frozen=True, slots=True)
class StepWaits:
    """Per rank and step (ranks x steps): section times with the waits in them, and the
    share of those times the collective timing would count as wait."""

    forward_backward_s: F64
    optimizer_s: F64
    forward_backward_wait_s: F64
    optimizer_wait_s: F64
    allreduce_sync_s: F64
    """What the all-reduce's NCCL kernels carry: the wait for the slowest peer and the
    whole transfer (hidden behind backward or not)."""
    p2p_wait_s: F64 | None
    """Pipeline bubbles (what the send/recv kernels carry); None: no pipeline."""


def synchronise(
    loader_s: F64,
    work_s: F64,
    comm_s: F64,
    transfer_s: F64,
    *,
    ddp_overlap: bool,
    exposed_share: float,
    pipeline: Pipeline | None,
) -> StepWaits:
    """The step's sections once ranks have waited for each other.

    ``work_s``: each rank's own forward+backward time (compute and pauses); ``comm_s``:
    the all-reduce and the optimizer's update, when nobody is waited for;
    ``transfer_s``: the all-reduce's part of it. The all-reduce group is the whole job,
    or with a ``pipeline`` one stage's replicas.
    """
    ready = loader_s + work_s
    bubble = None
    if pipeline is not None:
        bubble = group_max(ready, pipeline.replica) - ready
        ready = ready + bubble
    wait = group_max(ready, None if pipeline is None else pipeline.stage) - ready
    if ddp_overlap:
        # Only the wait and the last buckets' transfer are left once backward is done;
        # the rest of the transfer ran under the backward compute.
        fb_wait = wait + transfer_s * exposed_share
        opt_wait = np.zeros_like(comm_s)
        optimizer = comm_s - transfer_s
    else:
        fb_wait = np.zeros_like(work_s)
        opt_wait = wait + transfer_s
        optimizer = wait + comm_s
    if bubble is not None:
        fb_wait = fb_wait + bubble
    return StepWaits(
        forward_backward_s=work_s + fb_wait,
        optimizer_s=optimizer,
        forward_backward_wait_s=fb_wait,
        optimizer_wait_s=opt_wait,
        allreduce_sync_s=wait + transfer_s,
        p2p_wait_s=bubble,
    )
