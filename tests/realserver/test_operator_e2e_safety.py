"""The operator's safety nets on the real server. A storm: many jobs, each with a slow
node, all at once; the cluster's node budget is never exceeded (the server's audit log
shows every node the operator ever wrote), the circuit breaker opens, and the jobs left
out say why. SIGKILL mid-ladder: a restarted operator goes on from the state it
persisted, with exactly one write per action."""

from __future__ import annotations

from collections.abc import Callable

from e2e_world import World, fast_policy

JOBS = 6
CLUSTER_NODES = 2
BREAKER_MAX = 3


def test_a_storm_stays_within_the_cluster_node_budget_and_opens_the_breaker(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-storm")
    jobs = [world.job(f"job-{i}", world.nodes(1)) for i in range(JOBS)]
    policy = fast_policy(
        {"notify": {}, "taintNode": {}},
        cluster={
            "nodes": {"maxNodes": CLUSTER_NODES},
            "actionsPerHour": 20,
            "breaker": {"maxActions": BREAKER_MAX, "windowS": 300, "openS": 600},
        },
    )
    world.install(actions=("notify", "taintNode"), policy=policy)
    operator = world.start_operator()
    most = 0

    def watched_marks() -> list[str]:
        nonlocal most
        marked = world.marked()
        most = max(most, len(marked))
        return marked

    # Rank 1 of every job (one pod of four ranks, each job on its own node) is slow.
    reporters = world.publish({job: {1: 0.4} for job in jobs}, every_s=1.0)
    world.eventually(
        lambda: any("BreakerOpen" in world.reasons(job) for job in jobs), "the breaker opened"
    )
    world.eventually(lambda: len(watched_marks()) == CLUSTER_NODES, "the budget's nodes tainted")
    # Every job has decided at least once more since: nothing else got through.
    world.more_reports(3, *(reporters[job] for job in jobs))
    watched_marks()

    assert most == CLUSTER_NODES
    written = {str(w.name) for w in world.node_writes()}
    assert len(written) == CLUSTER_NODES, f"the operator wrote {sorted(written)}"
    assert written == set(world.marked())
    reasons = set().union(*(world.reasons(job) for job in jobs))
    assert {"BudgetExhausted", "BreakerOpen"} <= reasons
    cluster = world.cluster_state()
    assert cluster["breakerOpenUntil"]
    assert len(cluster["breakerDemand"]) > BREAKER_MAX
    # What the chart's PacekeeperBreakerOpen alert reads.
    assert operator.metric("pacekeeper_breaker_open") == 1
    # The budget gauges: the node budget full, each taint counted against the hour.
    assert operator.metric("pacekeeper_budget_used", scope="cluster.nodes") == CLUSTER_NODES
    assert operator.metric("pacekeeper_budget_limit", scope="cluster.nodes") == CLUSTER_NODES
    assert operator.metric("pacekeeper_budget_used", scope="cluster.actionsPerHour") == len(written)
    assert operator.metric("pacekeeper_budget_limit", scope="cluster.actionsPerHour") == 20
    tainted = [job for job in jobs if job.pods[0].node in written]
    assert all(("act", "taintNode") in [(v, a) for v, a, _ in world.acted(j)] for j in tainted)
    assert reporters.errors == []
    assert world.refusals() == []


def test_sigkill_after_the_taint_then_a_restart_cordons_with_one_write_per_action(
    make_world: Callable[[str], World],
) -> None:
    world = make_world("e2e-sigkill")
    job = world.job("llama", world.nodes(3))
    # The taint step waits 4 s for an effect: time to kill the operator after it.
    ladder = {"notify": {}, "taintNode": {"timeoutS": 4}, "cordonNode": {}}
    world.install(actions=ladder, policy=fast_policy(ladder))
    operator = world.start_operator()
    slow_node = job.node_of_rank(5)
    reporters = world.publish({job: {5: 0.5}}, every_s=0.5)

    world.eventually(lambda: world.our_taints(slow_node), "the slow rank's node tainted", 60)
    # The taint is on the node before the operator logs it: kill once it has (a kill in
    # between, seen once in CI, leaves the server's one write and no log line to count).
    taint_logged = f"taintNode node/{slow_node} Applied"
    world.eventually(lambda: taint_logged in operator.applied(), "the taint logged", 10)
    assert operator.kill() == -9
    assert not world.cordoned(slow_node), "cordoned before the kill: the window was missed"
    operator.start()  # the same pod name: it takes its own Lease back at once
    world.eventually(lambda: world.cordoned(slow_node), "cordoned by the restarted operator")
    world.more_reports(4, reporters[job])

    # The server saw one taint write and one cordon write, by two processes in turn.
    writes = world.node_writes()
    assert [w.name for w in writes] == [slow_node, slow_node]
    assert [sorted(w.request_object["spec"]) for w in writes] == [["taints"], ["unschedulable"]]
    applied = operator.applied()
    assert applied == [
        f"taintNode node/{slow_node} Applied",
        f"cordonNode node/{slow_node} Applied",
    ]
    assert [len(run.log_path.read_text().split('"msg": "action applied"')) - 1
            for run in operator.runs] == [1, 1]  # fmt: skip
    assert world.event_actions(slow_node) == ["taintNode", "cordonNode"]
    acted = [a for v, a, _ in world.acted(job) if v == "act"]
    assert acted == ["notify", "taintNode", "cordonNode"]
    assert world.marked() == [slow_node]
    assert reporters.errors == []
    assert world.refusals() == []
