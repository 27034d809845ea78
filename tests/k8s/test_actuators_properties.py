"""Property: whatever API faults hit a mark's lifecycle, retries never duplicate anything.

For random scripts of faults (5xx, injected 409s, throttling, answers lost to a client
timeout after the write landed), the lifecycle taint -> cordon -> uncordon -> untaint,
each retried on RetryLater as the operator would, leaves exactly one taint of ours while
tainted, exactly one Event per action, and the node as it was before.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import kubernetes
from harness import Fault, RunningServer, client_configuration
from harness.objects import node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pacekeeper.controller.actuators import Outcome, RetryLater
from pacekeeper.controller.actuators.kubernetes_actuators import KubernetesActuators
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.marks import CORDON_ANNOTATION, TAINT_ANNOTATION, TAINT_KEY

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)
FOREIGN_TAINT = {"key": "gpu", "value": "a100", "effect": "NoSchedule"}

_faults = st.sampled_from(["500", "503", "409", "429", "lost-answer"])
_scripts = st.lists(
    st.tuples(_faults, st.sampled_from(["get", "patch"]), st.integers(1, 3), st.integers(0, 4)),
    max_size=4,
)


def _fault(kind: str, verb: str, times: int, skip: int) -> Fault:
    if kind == "lost-answer":
        return Fault(status=None, delay_s=0.25, times=1, verb="patch", skip=skip)
    if kind == "429":
        return Fault(status=429, retry_after_s=0, times=times, verb=verb, skip=skip)
    return Fault(status=int(kind), times=times, verb=verb, plural="nodes", skip=skip)


def _until_done(call: Any) -> Any:
    for _ in range(20):
        try:
            return call()
        except RetryLater:
            continue  # the operator would wait `delay_s`; the harness needs no wait
    raise AssertionError("never finished")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=_scripts)
def test_faults_never_duplicate_marks_or_events(script: list[tuple[str, str, int, int]]) -> None:
    with RunningServer() as server:
        server.apply(node("n1", taints=[FOREIGN_TAINT]))
        api_client = kubernetes.client.ApiClient(client_configuration(server.url))
        try:
            actuators = KubernetesActuators(
                api_client, settings=RetrySettings(request_timeout_s=0.1), sleep=lambda _: None
            )
            slow = actuators.provenance("ml/a", Reason.BELOW_THRESHOLD, "gpu", NOW)
            recovered = actuators.provenance("ml/a", Reason.RECOVERED, "gpu", NOW)
            for kind, verb, times, skip in script:
                server.inject(_fault(kind, verb, times, skip))

            taint = _until_done(lambda: actuators.nodes.taint("n1", slow))
            tainted = server.read("v1", "Node", "n1")
            assert tainted is not None
            ours = [t for t in tainted["spec"]["taints"] if t["key"] == TAINT_KEY]
            assert len(ours) == 1
            assert taint.outcome in {Outcome.APPLIED, Outcome.ALREADY_APPLIED}

            _until_done(lambda: actuators.nodes.cordon("n1", slow))
            _until_done(lambda: actuators.nodes.uncordon("n1", recovered))
            _until_done(lambda: actuators.nodes.untaint("n1", recovered))
        finally:
            api_client.close()

        final = server.read("v1", "Node", "n1")
        assert final is not None
        assert final["spec"]["taints"] == [FOREIGN_TAINT]
        assert not final["spec"].get("unschedulable")
        annotations = final["metadata"].get("annotations") or {}
        assert TAINT_ANNOTATION not in annotations
        assert CORDON_ANNOTATION not in annotations
        actions = [e["action"] for e in server.list("v1", "Event")]
        assert actions.count("taintNode") == 1
        assert actions.count("cordonNode") == 1
        assert actions.count("uncordonNode") == 1
        assert actions.count("untaintNode") == 1
