"""Shared by the Ray controller tests: a test-sized policy, a fake clock, workers of
this process's job and reports that place ranks on them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pacekeeper.controller.core.policy import PolicyDocument, parse_policy_document
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.score_report import JobIdentity, ScoreReport

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def ray_policy(
    ladder: dict[str, Any], mode: str = "enforce", extra: dict[str, Any] | None = None
) -> PolicyDocument:
    """Acts after one report below 0.75, no warm-up, one-minute step timeouts; ``extra``:
    more fields of the policy (``confirm``, ``probe``)."""
    return parse_policy_document(
        {
            "apiVersion": "pacekeeper.dev/v1alpha1",
            "kind": "RemediationPolicies",
            "mode": mode,
            "cluster": {
                "nodes": {"maxNodes": 10},
                "actionsPerHour": 100,
                "breaker": {"maxActions": 100},
            },
            "policies": {
                "default": {
                    "thresholds": {"act": 0.75, "recover": 0.9},
                    "persistence": {"consecutiveReports": 1, "maxReportAgeS": 300},
                    "warmup": {"afterJobStartS": 0, "afterActionS": 0},
                    "ladder": ladder,
                    **(extra or {}),
                    "budgets": {
                        "nodes": {"maxNodes": 2},
                        "actionsPerHour": 100,
                        "betweenActionsS": 0,
                    },
                }
            },
        },
        "ray-test",
    )


class Clock:
    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float = 60.0) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


STATE_KEY_BYTES = bytes(range(32))
"""The tests' state signing key (a controller's real one lives in a private file)."""


def start_workers(n: int, *, max_restarts: int = 0) -> list[Any]:
    """``n`` zero-CPU actors of this process's job: the workers a report may place ranks on."""
    import os

    import ray

    # Defined here so Ray ships it by value (the test modules are not importable there).
    class Worker:
        """Stands in for a Ray Train worker: an actor of the job."""

        def where(self) -> tuple[int, str]:
            return os.getpid(), ray.get_runtime_context().get_node_id()

    cls: Any = ray.remote(Worker)
    return [
        cls.options(num_cpus=0, max_restarts=max_restarts, max_task_retries=-1 if max_restarts
                    else 0).remote()
        for _ in range(n)
    ]  # fmt: skip


def where(workers: list[Any]) -> list[tuple[int, str]]:
    import ray

    return [tuple(p) for p in ray.get([w.where.remote() for w in workers], timeout=60)]


def placed_report(
    job: JobIdentity,
    seq: int,
    at: datetime,
    placements: list[tuple[int, str]],
    *,
    world_size: int = 16,
    slow: dict[int, float] | None = None,
) -> ScoreReport:
    """A synthetic report whose ranks run, round robin, in the given (pid, Ray node id)
    processes, all on one node (``node-0``, as a single-node cluster has it)."""
    base = synthetic_report(job=job, sequence=seq, world_size=world_size, slow=slow or {},
                            generated_at=at)  # fmt: skip
    ranks = []
    for r in base.ranks:
        pid, node_id = placements[r.rank % len(placements)]
        ranks.append(r.model_copy(update={"node": "node-0", "ray_node_id": node_id, "pid": pid}))
    return ScoreReport.build(job=job, sequence=seq, generated_at=at, window_s=base.window_s,
                             ranks=ranks, world_size=world_size)  # fmt: skip
