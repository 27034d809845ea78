"""Where the core's ``State`` lives between reconciles, so a restart loses and repeats nothing.

- A job's part (streaks, history, ladders) lives in its StragglerReport's
  ``status.controller.state``, next to the decision records people read there.
- The cluster part (our marks, rate-limit stamps, breaker) lives in one ConfigMap in the
  controller's namespace, written with the resourceVersion it was read at: a stale
  writer gets 409 and re-reads instead of overwriting a newer state.

The operator writes state *before* it acts: a crash between the two leaves a decided
but unapplied mark, which the core re-issues after its confirm grace; the reverse order
could act twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

from pacekeeper.controller.core.decisions import Decision
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.state import ClusterState, JobState, State, StateError
from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION, merge_patch

logger = logging.getLogger(__name__)

STATE_CONFIGMAP = "pacekeeper-state"
STATE_KEY = "state.json"
DECISIONS_KEPT = 20
"""Decision records kept per job in status (newest last); older ones live in logs."""

MERGE_PATCH = "application/merge-patch+json"


def job_state_to_wire(key: JobKey, js: JobState) -> dict[str, Any]:
    out: dict[str, Any] = State(jobs={key: js}).to_dict()["jobs"][key]
    return out


def job_state_from_wire(key: JobKey, data: Mapping[str, Any]) -> JobState:
    return State.from_dict({"jobs": {key: dict(data)}}).jobs[key]


def cluster_state_to_wire(cs: ClusterState) -> dict[str, Any]:
    out: dict[str, Any] = State(cluster=cs).to_dict()["cluster"]
    return out


def cluster_state_from_wire(data: Mapping[str, Any]) -> ClusterState:
    return State.from_dict({"cluster": dict(data)}).cluster


def controller_status(
    key: JobKey,
    js: JobState | None,
    decisions: Sequence[Decision],
    previous: Mapping[str, Any] | None,
    observed_sequence: int | None,
) -> dict[str, Any]:
    """The ``status.controller`` block: state, the newest decision records, summary."""
    old_records = list((previous or {}).get("decisions") or [])
    new_records = [d.to_dict() for d in decisions]
    records = (old_records + new_records)[-DECISIONS_KEPT:]
    out: dict[str, Any] = {"decisions": records}
    if js is not None:
        out["state"] = job_state_to_wire(key, js)
    if observed_sequence is not None:
        out["observedSequence"] = observed_sequence
    if decisions:
        last = decisions[-1]
        out["lastDecision"] = {
            "verdict": last.verdict.value,
            "action": last.action.value if last.action else None,
            "reason": last.reason.value,
            "decidedAt": last.decided_at.isoformat() if last.decided_at else None,
        }
    elif previous and "lastDecision" in previous:
        out["lastDecision"] = previous["lastDecision"]
    return out


class StateStore:
    def __init__(self, api_client: Any, *, namespace: str, request_timeout_s: float = 10.0):
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        self._timeout = request_timeout_s
        self._cluster_rv: str | None = None

    # --- cluster part ------------------------------------------------------------------

    def load_cluster(self) -> ClusterState:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self._core.read_namespaced_config_map(
                STATE_CONFIGMAP, self.namespace,
                _preload_content=False, _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            if e.status != 404:
                raise
            self._cluster_rv = None
            return ClusterState()
        cm = json.loads(cast(bytes, resp.data) or b"{}")
        self._cluster_rv = (cm.get("metadata") or {}).get("resourceVersion")
        raw = (cm.get("data") or {}).get(STATE_KEY)
        if not raw:
            return ClusterState()
        try:
            return cluster_state_from_wire(json.loads(raw))
        except (StateError, json.JSONDecodeError) as e:
            # Never act on a state we cannot read: the operator treats this as fatal
            # for the cycle and alerts, rather than starting from an empty budget.
            raise StateError(f"ConfigMap {self.namespace}/{STATE_CONFIGMAP}: {e}") from e

    def save_cluster(self, cs: ClusterState) -> None:
        """Write with the resourceVersion we read; 409 propagates (re-read, re-decide)."""
        from kubernetes.client.exceptions import ApiException

        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": STATE_CONFIGMAP,
                "namespace": self.namespace,
                "labels": {"app.kubernetes.io/managed-by": "pacekeeper"},
            },
            "data": {STATE_KEY: json.dumps(cluster_state_to_wire(cs), sort_keys=True)},
        }
        if self._cluster_rv is None:
            try:
                resp = self._core.create_namespaced_config_map(
                    self.namespace,
                    cast(Any, body),  # the client takes plain dicts too
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
            except ApiException as e:
                if e.status == 409:
                    logger.warning("state configmap created concurrently", extra={})
                raise
        else:
            body["metadata"]["resourceVersion"] = self._cluster_rv
            resp = self._core.replace_namespaced_config_map(
                STATE_CONFIGMAP, self.namespace, cast(Any, body),
                _preload_content=False, _request_timeout=self._timeout,
            )  # fmt: skip
        out = json.loads(cast(bytes, resp.data) or b"{}")
        self._cluster_rv = (out.get("metadata") or {}).get("resourceVersion")

    # --- job part -----------------------------------------------------------------------

    @staticmethod
    def job_state_of(key: JobKey, obj: Mapping[str, Any]) -> JobState | None:
        raw = ((obj.get("status") or {}).get("controller") or {}).get("state")
        if not raw:
            return None
        return job_state_from_wire(key, raw)

    def save_job(
        self,
        namespace: str,
        name: str,
        controller: dict[str, Any],
        previous: Mapping[str, Any] | None = None,
    ) -> None:
        """Merge-patch only ``status.controller`` (the reporter owns the rest of status),
        turning ``previous`` into ``controller``: keys the new state dropped (the streak
        of a recovered rank) are deleted with null, or a merge patch would keep them and
        a restarted controller would resume a streak that had ended."""
        patch = {"status": {"controller": merge_patch(dict(previous or {}), controller)}}
        self._custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, patch,
            _content_type=MERGE_PATCH, _request_timeout=self._timeout,
        )  # fmt: skip
