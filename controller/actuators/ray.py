"""Ray actuators: drain a node with the preemption reason (the autoscaler's own path).

Node drain is not public Ray API: ``ray._raylet.GcsClient.drain_node(node_id, reason,
message, deadline_ms)`` with the reason from ``autoscaler_pb2.DrainNodeReason``. It is
gated on the Ray version it was tested with; anything else raises ``GiveUp`` naming the
version instead of calling a private API blindly. ``PREEMPTION`` is always accepted
(``IDLE_TERMINATION`` can be refused when the node is busy); after a drain, running
actors and tasks go on and new work is not scheduled on the node. A drain cannot be
undone: Ray terminates the node at the deadline (or when it is idle).

Restarting one Ray worker needs the worker's actor handle, which a score report does not
carry; ``restartRank`` on Ray raises ``GiveUp`` (the ladder then moves to the node steps).
Taint and cordon have no Ray equivalent: the runner records them in its own state only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass

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

    def restart_rank(self, ranks: Iterable[int]) -> None:
        raise GiveUp(
            NOT_SUPPORTED,
            "restarting a Ray worker needs its actor handle, which reports do not carry "
            f"(ranks {sorted(ranks)})",
        )
