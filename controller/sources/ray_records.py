"""Ray's own record of a job: its actors (node, process, state) and the cluster's nodes.

The one module of the Ray-side controller that reads Ray's GCS tables. Ray 2.60 offers
them without the dashboard only through ``ray._private.state`` (``actors(job_id=...)``:
the GCS actor table filtered by job, each entry with ``Address.NodeID``, ``Pid`` and
``State``) and ``ray.nodes()``; the worker table would name plain task workers too, but
it leaves ``job_id`` empty in 2.60, so only actors (Ray Train's workers are actors) can
be placed in a job. ``ray.util.state`` needs the dashboard and is not used.
"""

from __future__ import annotations

from typing import Any

from pacekeeper.controller.sources.ray_trust import RayActor


class RayRecords:
    """Reads Ray's tables for the runner (``ray.init`` first). Also remembers, per job,
    every (node, pid) it ever saw as the job's actor, so a report from before a worker
    restart still places (``place_ray_report``); actions check live actors again."""

    def __init__(self, *, remember: int = 4096) -> None:
        self._seen: dict[str, set[tuple[str, int]]] = {}
        self._remember = remember

    def job_actors(self, job_hex: str) -> list[RayActor]:
        import ray
        from ray._private import state

        table = state.actors(job_id=ray.JobID.from_hex(job_hex))
        out = []
        for actor_id, info in table.items():
            node = str((info.get("Address") or {}).get("NodeID") or "")
            pid = int(info.get("Pid") or 0)
            if not node or pid <= 0:
                continue  # not placed yet (pending creation)
            out.append(RayActor(str(actor_id), node, pid, info.get("State") == "ALIVE"))
        return out

    def placed(self, job_hex: str, actors: list[RayActor]) -> set[tuple[str, int]]:
        """(node, pid) of the job's actors now, and of those seen before (bounded)."""
        seen = self._seen.setdefault(job_hex, set())
        seen.update((a.node_id, a.pid) for a in actors)
        if len(seen) > self._remember:  # forget the past, keep the present
            seen.clear()
            seen.update((a.node_id, a.pid) for a in actors)
        return set(seen)

    def keep(self, job_hexes: set[str]) -> None:
        """Forget the placements of jobs no longer on the board."""
        for gone in set(self._seen) - job_hexes:
            del self._seen[gone]

    def alive_nodes(self) -> frozenset[str]:
        import ray

        nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        return frozenset(str(n["NodeID"]) for n in nodes if n.get("Alive"))
