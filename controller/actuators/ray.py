"""Ray actuators: drain a node with the preemption reason (the autoscaler's own path).

Node drain is not public Ray API: ``ray._raylet.GcsClient.drain_node(node_id, reason,
message, deadline_ms)`` with the reason from ``autoscaler_pb2.DrainNodeReason``. It is
gated on the Ray version it was tested with; anything else raises ``GiveUp`` naming the
version instead of calling a private API blindly. ``PREEMPTION`` is always accepted
(``IDLE_TERMINATION`` can be refused when the node is busy); after a drain, running
actors and tasks go on and new work is not scheduled on the node. A drain cannot be
undone: Ray terminates the node at the deadline (or when it is idle).

Restarting one Ray worker (``restartRank``): a report names each rank's Ray node and
process id, and a zero-CPU task pinned to that node sends the process SIGTERM — after
checking that the pid is still a Ray worker process (its title starts with ``ray::``), so
a recycled pid is never hit. Ray then restarts the actor (``max_restarts``) or Ray Train
replaces the worker group (``FailureConfig``). Linux only (it reads ``/proc``).
Taint and cordon have no Ray equivalent: the runner records them in its own state only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pacekeeper.controller.actuators.errors import API_UNAVAILABLE, GiveUp, RetryLater

logger = logging.getLogger(__name__)

DRAIN_MIN_RAY = (2, 40)
"""Oldest Ray whose ``GcsClient.drain_node`` signature and semantics we tested against."""
DRAIN_DEADLINE_S = 600.0
"""How long running work may finish on a drained node before Ray terminates it."""
NOT_SUPPORTED = "NotSupported"
DRAIN_REFUSED = "DrainRefused"


def ray_version_tuple(version: str) -> tuple[int, int]:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


def drain_supported(version: str) -> bool:
    return ray_version_tuple(version) >= DRAIN_MIN_RAY


@dataclass(frozen=True, slots=True)
class DrainOutcome:
    node_id: str
    accepted: bool
    rejection: str = ""


class RayActuators:
    """Acts on the Ray cluster this process is connected to (``ray.init`` first)."""

    def __init__(self, *, gcs_address: str | None = None, deadline_s: float = DRAIN_DEADLINE_S):
        self._gcs_address = gcs_address
        self.deadline_s = deadline_s
        self._client: object | None = None

    def _gcs(self) -> object:
        import ray

        if not drain_supported(ray.__version__):
            raise GiveUp(
                NOT_SUPPORTED,
                f"node drain needs Ray >= {DRAIN_MIN_RAY[0]}.{DRAIN_MIN_RAY[1]}, "
                f"this is {ray.__version__}",
            )
        if self._client is None:
            from ray._raylet import GcsClient  # type: ignore[attr-defined]

            address = self._gcs_address or ray.get_runtime_context().gcs_address
            client = GcsClient(address=address)
            if not hasattr(client, "drain_node"):
                raise GiveUp(NOT_SUPPORTED, f"Ray {ray.__version__} has no GcsClient.drain_node")
            self._client = client
        return self._client

    def drain_nodes(self, node_ids: Iterable[str], message: str) -> list[DrainOutcome]:
        """Drains each Ray node (hex id) with reason PREEMPTION. Idempotent: draining a
        draining node again is accepted. Raises ``RetryLater`` when the GCS cannot be
        reached, ``GiveUp`` when Ray refuses or cannot drain."""
        from ray.core.generated import autoscaler_pb2

        client = self._gcs()
        reason = autoscaler_pb2.DrainNodeReason.Value(  # type: ignore[attr-defined]
            "DRAIN_NODE_REASON_PREEMPTION"
        )
        deadline_ms = int((time.time() + self.deadline_s) * 1000)
        outcomes = []
        for node_id in node_ids:
            try:
                accepted, rejection = client.drain_node(  # type: ignore[attr-defined]
                    node_id, reason, message, deadline_ms
                )
            except Exception as e:  # the GCS is unreachable or restarting
                raise RetryLater(30.0, API_UNAVAILABLE, f"drain_node {node_id}: {e}") from e
            outcome = DrainOutcome(node_id, bool(accepted), str(rejection or ""))
            outcomes.append(outcome)
            if not outcome.accepted:
                raise GiveUp(DRAIN_REFUSED, f"Ray refused to drain {node_id}: {rejection}")
            logger.info("ray node drained", extra={"rayNodeId": node_id, "note": message})
        return outcomes

    def restart_workers(self, workers: Iterable[Mapping[str, Any]]) -> list[str]:
        """SIGTERM each worker process ({rank, rayNodeId, pid}) on its own node; returns
        one ``rank N: <outcome>`` per worker. ``GiveUp`` when a report carried no
        placement; a pid that is gone or no longer a Ray worker is reported, not hit."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        workers = list(workers)
        if not workers:
            raise GiveUp(NOT_SUPPORTED, "the report names no Ray node and pid for the rank")
        terminate = ray.remote(_terminate)
        pending = []
        for w in workers:
            strategy = NodeAffinitySchedulingStrategy(node_id=str(w["rayNodeId"]), soft=False)
            ref = terminate.options(num_cpus=0, scheduling_strategy=strategy).remote(int(w["pid"]))
            pending.append((w, ref))
        out = []
        for w, ref in pending:
            try:
                outcome = ray.get(ref, timeout=30)
            except Exception as e:  # node gone or unreachable: decide again later
                raise RetryLater(30.0, API_UNAVAILABLE, f"restart rank {w['rank']}: {e}") from e
            logger.info("ray worker restart", extra={"rank": w["rank"], "outcome": outcome})
            out.append(f"rank {w['rank']}: {outcome}")
        return out


def _terminate(pid: int) -> str:
    """Runs on the worker's node. Kills only a live Ray worker process that is not us."""
    import os
    import signal

    if pid == os.getpid():
        return "refused: that is this task's own process"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            title = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except FileNotFoundError:
        return "gone"
    if not title.startswith("ray::"):
        return f"refused: pid {pid} is not a Ray worker ({title[:40]!r})"
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return "gone"
    return "terminated"
