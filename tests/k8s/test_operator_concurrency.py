"""Several reconciles at once (the operator's worker pool), against the API harness: jobs
overlap, one job never overlaps itself, and a storm of slow jobs reconciled side by side
never puts more of our marks on the cluster than its node budget allows."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import pytest
from born_reports import born
from harness import Fault, RunningServer
from harness.objects import node, pod
from operator_world import CONTROLLER_NS, NAMESPACE, POLICY_YAML, Clock
from reporter_helpers import CRD_PATH

from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.marks import TAINT_KEY
from pacekeeper.controller.core.policy import load_policy_document
from pacekeeper.controller.runtime.reconcile import Reconciler
from pacekeeper.controller.runtime.state_store import job_state_name
from pacekeeper.controller.runtime.work_queue import WorkQueue
from pacekeeper.controller.sources.world_cache import WorldCache
from pacekeeper.detector.reporters.kubernetes import KubernetesStatusSink
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

RANKS_PER_NODE = 4

STORM_POLICY = (
    POLICY_YAML.format(mode="enforce")
    .replace("consecutiveReports: 2, minSamples: 10, maxReportAgeS: 120", "consecutiveReports: 1")
    .replace("notify: {enabled: true, timeoutS: 60}", "notify: {enabled: true, timeoutS: 1}")
    .replace("nodes: {maxNodes: 2}", "nodes: {maxNodes: 3}")
    .replace("actionsPerHour: 20", "actionsPerHour: 100\n  breaker: {maxActions: 100}")
)
"""The usual policy, acting on one slow report, with a cluster budget of three nodes."""


def _job(server: RunningServer, name: str, nodes: int) -> list[str]:
    """A Job's opted-in pods, one per node of its own; returns the node names."""
    names = [f"{name}-n{i}" for i in range(nodes)]
    owner = {"kind": "Job", "name": name, "uid": f"uid-{name}"}
    for i, n in enumerate(names):
        server.apply(node(n))
        server.apply(
            pod(f"{name}-{i}", node_name=n, owner=owner,
                labels={"batch.kubernetes.io/job-name": name,
                        "batch.kubernetes.io/job-completion-index": str(i)},
                annotations={"pacekeeper.dev/detect": "true"})
        )  # fmt: skip
    return names


def _report(name: str, nodes: list[str], seq: int, clock: Clock, slow_rank: int | None) -> Any:
    ranks = [
        RankScores(rank=r, node=nodes[r // RANKS_PER_NODE], pod=f"{name}-{r // RANKS_PER_NODE}",
                   gpu_relative=0.4 if r == slow_rank else 0.98,
                   gpu_individual=0.4 if r == slow_rank else 0.98,
                   section_samples=100, kernel_samples=1000)
        for r in range(len(nodes) * RANKS_PER_NODE)
    ]  # fmt: skip
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace=NAMESPACE, name=name),
        sequence=seq, generated_at=clock(), window_s=30.0, ranks=ranks,
    )  # fmt: skip


def _world(server: RunningServer) -> None:
    server.apply_yaml(CRD_PATH)
    server.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}})


def _sink(api_client: Any, name: str) -> KubernetesStatusSink:
    born(api_client, NAMESPACE, name, controller_ns=CONTROLLER_NS)  # as the controller would
    return KubernetesStatusSink(
        namespace=NAMESPACE, name=name, incarnation="inc-1", api_client=api_client,
        pod_name=f"{name}-0",
    )  # fmt: skip


def _reconciler(api_client: Any, clock: Clock, policy_yaml: str | None = None) -> Reconciler:
    from operator_world import policy

    acts = KubernetesActuators(
        api_client, instance="test", settings=RetrySettings(request_timeout_s=5.0),
        sleep=lambda _s: None,
    )  # fmt: skip
    doc = policy("enforce") if policy_yaml is None else load_policy_document(policy_yaml, "t")
    return Reconciler(api_client, doc, namespace=CONTROLLER_NS, clock=clock, actuators=acts)


@contextmanager
def _overlaps(rec: Reconciler) -> Iterator[dict[str, Any]]:
    """Counts, for the duration, how many attempts of each job and of all jobs ran at
    once (the most seen), by wrapping the reconciler's one attempt."""
    seen: dict[str, Any] = {"per_job": Counter(), "all": 0}
    now: Counter[JobKey] = Counter()
    lock = threading.Lock()
    inner: Callable[..., Any] = rec._reconcile_once

    def counted(key: JobKey, obj: Any) -> Any:
        with lock:
            now[key] += 1
            seen["per_job"][key] = max(seen["per_job"][key], now[key])
            seen["all"] = max(seen["all"], sum(now.values()))
        try:
            return inner(key, obj)
        finally:
            with lock:
                now[key] -= 1

    rec._reconcile_once = counted  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        rec._reconcile_once = inner  # type: ignore[method-assign]


def test_two_jobs_reconcile_at_once_but_one_job_never_twice_at_once(
    k8s_server: RunningServer, k8s_api_client: Any
) -> None:
    _world(k8s_server)
    clock = Clock()
    nodes = {name: _job(k8s_server, name, 2) for name in ("a", "b")}
    keys = {name: JobKey(f"{NAMESPACE}/{name}") for name in nodes}
    sinks = {name: _sink(k8s_api_client, name) for name in nodes}
    rec = _reconciler(k8s_api_client, clock)
    for name, on in nodes.items():  # each job's state ConfigMap exists from here on
        sinks[name].send(_report(name, on, 0, clock, None))
        rec.reconcile_job(keys[name])
    clock.advance(30)
    for name, on in nodes.items():  # a slow rank starts a streak: each job's state changes
        sinks[name].send(_report(name, on, 1, clock, 1))
    a_state = job_state_name(keys["a"])
    earlier = len(k8s_server.history.find(method="PUT", plural="configmaps", name=a_state))
    # Job a's state write answers late: its reconcile is in flight for a second.
    k8s_server.inject(Fault(status=None, delay_s=1.0, method="PUT",
                            path=job_state_name(keys["a"])))  # fmt: skip

    with _overlaps(rec) as seen, ThreadPoolExecutor(4) as pool:
        first_a = pool.submit(rec.reconcile_job, keys["a"])
        deadline = time.monotonic() + 5
        while keys["a"] not in rec.in_flight() and time.monotonic() < deadline:
            time.sleep(0.01)
        second_a = pool.submit(rec.reconcile_job, keys["a"])
        started = time.monotonic()
        rec.reconcile_job(keys["b"])
        b_took = time.monotonic() - started
        assert not first_a.done(), "b finished while a was still being reconciled"
        first_a.result(10)
        second_a.result(10)
    assert b_took < 0.8, "b did not wait for a"
    assert seen["all"] == 2, "a and b overlapped"
    assert seen["per_job"][keys["a"]] == 1, "a's two reconciles ran one after the other"
    puts = k8s_server.history.find(method="PUT", plural="configmaps", name=a_state)[earlier:]
    assert [r.status for r in puts] == [200], "one state write for a: the second had nothing new"


def test_a_storm_of_slow_jobs_reconciled_at_once_never_exceeds_the_cluster_node_budget(
    k8s_server: RunningServer, k8s_api_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _world(k8s_server)
    clock = Clock()
    names = [f"job{i:02d}" for i in range(12)]
    nodes = {name: _job(k8s_server, name, 2) for name in names}
    every_node = [n for ns in nodes.values() for n in ns]
    keys = [JobKey(f"{NAMESPACE}/{name}") for name in names]
    sinks = {name: _sink(k8s_api_client, name) for name in names}
    rec = _reconciler(k8s_api_client, clock, STORM_POLICY)
    # Slow decisions (a big job's) and state writes that answer late: reconciles pile up
    # on the cluster lock, and one that decided on a cluster state another had just
    # replaced would let its action through past the budget.
    k8s_server.inject(Fault(status=None, delay_s=0.05, method="PUT", plural="configmaps",
                            times=10_000))  # fmt: skip
    from pacekeeper.controller.runtime import reconcile

    def slow_decide(*args: Any) -> Any:
        time.sleep(0.02)
        return decide(*args)

    monkeypatch.setattr(reconcile, "decide", slow_decide)

    def tainted() -> list[str]:
        return [
            n for n in every_node
            if any(t.get("key") == TAINT_KEY
                   for t in (k8s_server.read("v1", "Node", n) or {}).get("spec", {}).get("taints")
                   or [])
        ]  # fmt: skip

    most = 0
    with _overlaps(rec) as seen, ThreadPoolExecutor(8) as pool:
        for seq in range(4):
            for name in names:  # rank 1 is slow: its node is the job's first
                sinks[name].send(_report(name, nodes[name], seq, clock, 1))
            list(pool.map(rec.reconcile_job, keys))
            most = max(most, len(tainted()))
            clock.advance(2)  # past notify's timeout: the next round wants the taint
    assert seen["all"] > 1, "the reconciles overlapped"
    assert max(seen["per_job"].values()) == 1
    assert most == 3 and len(tainted()) == 3, "the budget is used, and never exceeded"
    taint_writes = {r.name for r in k8s_server.history.find(verb="patch", plural="nodes")}
    assert len(taint_writes) == 3, "no node was ever marked past the budget, not even briefly"
    refused = rec.metrics.registry.get_sample_value(
        "pacekeeper_decisions_total",
        {"verdict": "hold", "action": "taintNode", "reason": "BudgetExhausted", "mode": "enforce"},
    )
    assert refused and refused >= 9, "every other job was told why"


def test_the_work_queue_hands_a_job_to_one_worker_and_runs_it_again_after() -> None:
    async def scenario() -> list[tuple[str, str]]:
        loop = asyncio.get_running_loop()
        queue = WorkQueue(loop.time)
        log: list[tuple[str, str]] = []
        a, b = JobKey("ns/a"), JobKey("ns/b")
        gate = asyncio.Event()

        async def worker(name: str) -> None:
            while True:
                key = await queue.next()
                log.append((name, f"start {key}"))
                if key == a and not gate.is_set():
                    queue.add(a)  # an event for a while a is in flight
                    await gate.wait()
                await asyncio.sleep(0)
                log.append((name, f"end {key}"))
                queue.done(key)

        workers = [asyncio.create_task(worker(f"w{i}")) for i in range(3)]
        queue.add(a)
        queue.add(b, 0.01)
        await asyncio.sleep(0.1)
        assert queue.in_flight() == {a}, "a is not handed out again while in flight"
        assert (
            ("w0", "start ns/b") in log
            or ("w1", "start ns/b") in log
            or any(e == f"start {b}" for _, e in log)
        )
        gate.set()
        await asyncio.sleep(0.1)
        for w in workers:
            w.cancel()
        return [(w, e) for w, e in log if "ns/a" in e]

    events = asyncio.run(scenario())
    assert [e for _, e in events] == ["start ns/a", "end ns/a", "start ns/a", "end ns/a"]


def test_the_cache_answers_a_jobs_pods_and_one_shared_cluster_view() -> None:
    cache = WorldCache()
    owner = {"kind": "Job", "name": "a", "uid": "u"}
    big = pod("a-0", node_name="n0", labels={"job-name": "a"}, owner=owner,
              annotations={"pacekeeper.dev/detect": "true"})  # fmt: skip
    big["spec"]["containers"][0]["env"] = [{"name": "X", "value": "y" * 1000}]
    cache.prime([big], [node("n0"), node("n1")])
    assert cache.pods_of_job("default", "a")[0]["spec"] == {"nodeName": "n0"}
    assert cache.pods_of_job("default", "b") == []
    view = cache.cluster_view()
    assert cache.cluster_view() is view, "shared until a node changes"
    cache.put_node("MODIFIED", node("n1"))  # a heartbeat: nothing we read changed
    assert cache.cluster_view() is view
    cordoned = node("n1")
    cordoned["spec"]["unschedulable"] = True
    cache.put_node("MODIFIED", cordoned)
    assert cache.cluster_view() is not view and cache.cluster_view().nodes["n1"].unschedulable
    moved = pod("a-0", node_name="n0", labels={"job-name": "c"}, owner=owner)
    cache.put_pod("MODIFIED", moved)
    assert cache.pods_of_job("default", "a") == [] and len(cache.pods_of_job("default", "c")) == 1
    # Primed but never confirmed by the watch, and gone from a later list: dropped.
    assert cache.unconfirmed() == 1  # n0 (n1 came through the watch)
    assert cache.sweep([], [node("n1")]) == 1
    assert set(cache.cluster_view().nodes) == {"n1"}


def test_the_backlog_counts_due_jobs_no_worker_took_and_how_long_they_waited() -> None:
    from pacekeeper.controller.runtime.metrics import ControllerMetrics

    now = [100.0]

    async def scenario() -> None:
        queue = WorkQueue(lambda: now[0])
        metrics = ControllerMetrics()
        metrics.watch_queue(queue.backlog)
        reg = metrics.registry
        a, b, c = JobKey("ns/a"), JobKey("ns/b"), JobKey("ns/c")
        queue.add(a)
        queue.add(b, 1.0)
        queue.add(c, 30.0)  # a timer: not due, not backlog
        now[0] = 104.0
        assert queue.backlog() == (2, 4.0)
        assert reg.get_sample_value("pacekeeper_queue_depth") == 2
        assert reg.get_sample_value("pacekeeper_queue_longest_wait_seconds") == 4.0
        assert await queue.next() == a  # handed to a worker: no longer waiting
        assert queue.backlog() == (1, 3.0)
        queue.add(a)  # asked for again while in flight: waits for done, not for a worker
        assert queue.backlog() == (1, 3.0)
        assert await queue.next() == b
        assert queue.backlog() == (0, 0.0)

    asyncio.run(scenario())
