"""Where the core's ``State`` lives between reconciles, so a restart loses and repeats nothing.

Everything the controller reads back lives where training jobs cannot write: ConfigMaps
in the state namespace (the chart's ``state.namespace``, ``--state-namespace``; the
controller's own namespace when none is given), which only its ServiceAccount may write
and which holds nothing else, its policy least of all (docs/security.md).
``state_migration`` moves an older release's maps there once.

- The cluster part (our marks, rate-limit stamps, breaker) lives in one ConfigMap,
  ``pacekeeper-state``.
- The memory of hardware (every GPU's history across jobs) lives in shards,
  ``pacekeeper-hardware-NNN`` (``hardware_store``).
- A job's part (streaks, history, ladders) and its decision records live in one
  ConfigMap per job, ``pacekeeper-job-<hash of the job key>``.
- Both are written whole (PUT) with the resourceVersion they were read at: a stale writer
  gets 409 and re-reads instead of overwriting a newer state, and no merge patch can
  prune what was stored (the real API server drops ``null`` even inside arrays).
- The StragglerReport's ``status.controller`` is a display copy for ``kubectl``: the
  decisions and the verdict, never read back. Releases before this one kept the job's
  state there; ``load_job`` takes it over once, for reports that existed before this
  version first ran (a report created later cannot seed the controller's state).

The operator writes state *before* it acts: a crash between the two leaves a decided
but unapplied mark, which the core re-issues after its confirm grace; the reverse order
could act twice.

With ``reuse_reads`` (the operator's setting) the store keeps what it last read or wrote
of each ConfigMap, with its resourceVersion, and answers the next load from that copy: a
controller that holds the Lease is the only writer of these ConfigMaps, so its own last
write is the latest version. A copy that someone else changed all the same (a human,
a replica that lost the Lease) is found out by the next write, which carries the version
and gets 409 (404 when deleted); every copy the attempt used is then dropped and the
reconcile reads again and decides again. Every act is preceded by such a write. The
cluster copy is also read again once it is ``cluster_max_age_s`` old, so a change that
is ours to notice but not to write (a breaker closed by hand) is seen within seconds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from pacekeeper.controller.core.decisions import Decision
from pacekeeper.controller.core.ids import JobKey
from pacekeeper.controller.core.state import ClusterState, JobState, State, StateError
from pacekeeper.controller.runtime.hardware_store import HardwareStore
from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION, merge_patch

logger = logging.getLogger(__name__)

STATE_CONFIGMAP = "pacekeeper-state"
STATE_KEY = "state.json"
DECISIONS_KEY = "decisions.json"
REPORT_UID_KEY = "reportUid"
"""The uid of the job's StragglerReport that this controller created (or repaired and
took over): the record ``report_birth`` trusts, where no job can write. The report's own
``pacekeeper.dev/created-by`` annotation is for people; its creator could forge it."""
SINCE_KEY = "jobStateSince"
"""When this version first ran against the cluster: reports created before it may hand
their ``status.controller.state`` over; none created after may."""
JOB_STATE_PREFIX = "pacekeeper-job-"
MANAGED_BY = {"app.kubernetes.io/managed-by": "pacekeeper"}
JOB_STATE_LABEL = "pacekeeper.dev/state"
JOB_ANNOTATION = "pacekeeper.dev/job"
CONTROLLER_ANNOTATION = "pacekeeper.dev/controller-namespace"
"""On every state ConfigMap: the namespace of the controller that keeps it (its Lease and
policy), so ``pacekeeper status`` finds the state namespace from the controller's."""
DECISIONS_KEPT = 20
"""Decision records kept per job (newest last); older ones live in logs."""

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


def job_state_name(key: JobKey) -> str:
    """The job's state ConfigMap: a hash, since ``namespace/name`` is not a valid name and
    the two together can be longer than one."""
    return JOB_STATE_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:24]


DISPLAY_REFRESH_S = 300.0
"""How old the display's ``observedAt`` may get before a reconcile whose decisions say
nothing new rewrites it. A status PATCH of a 256-rank report costs kube-apiserver about
as much CPU as the reporter's own (~38 ms on 1.20: the server decodes, validates and
encodes the whole object), so writing ``observedSequence`` at every report doubled the
server's load for a number nobody acts on."""
_OBSERVED = ("observedSequence", "observedAt")


def controller_status(
    records: Sequence[Mapping[str, Any]],
    observed_sequence: int | None,
    observed_at: datetime | None = None,
) -> dict[str, Any]:
    """The ``status.controller`` display block: the newest decision records (``records``,
    from the controller's own store, newest last), the newest one's verdict, and the
    report sequence seen (when). A function of what the controller keeps alone, so the
    block in a stale copy of the object can cost an extra write but never put an older
    verdict back. Never read back."""
    out: dict[str, Any] = {"decisions": list(records)}
    if observed_sequence is not None:
        out["observedSequence"] = observed_sequence
        if observed_at is not None:
            out["observedAt"] = observed_at.isoformat()
    if records:
        last = records[-1]
        out["lastDecision"] = {
            "verdict": last.get("verdict"),
            "action": last.get("action"),
            "reason": last.get("reason"),
            "decidedAt": last.get("decidedAt"),
        }
    return out


def display_outdated(block: Mapping[str, Any], shown: Mapping[str, Any], now: datetime) -> bool:
    """Whether ``block`` must replace the display ``shown``: its decisions or verdict
    differ, or only what it observed does and the shown ``observedAt`` is missing or
    ``DISPLAY_REFRESH_S`` old."""
    new, old = as_stored(dict(block)), as_stored(dict(shown))
    if {k: v for k, v in new.items() if k not in _OBSERVED} != {
        k: v for k, v in old.items() if k not in _OBSERVED
    }:
        return True
    if new.get("observedSequence") == old.get("observedSequence"):
        return False
    seen = _parse_time(old.get("observedAt"))
    return seen is None or (now - seen).total_seconds() >= DISPLAY_REFRESH_S


def as_stored(value: Any) -> Any:
    """``value`` as a merge patch leaves it on the server: the real API server drops
    every ``null``, inside arrays too. A display block is compared in this form with the
    object's, or each record's ``"action": null`` would make every reconcile rewrite it."""
    if isinstance(value, dict):
        return {k: as_stored(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [as_stored(v) for v in value]
    return value


@dataclass(slots=True)
class JobRecord:
    """What the controller keeps of one job, as read from its ConfigMap."""

    key: JobKey
    state: JobState | None = None
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """Decision records, newest last (at most ``DECISIONS_KEPT``)."""
    resource_version: str | None = None
    """None: no ConfigMap yet (the next save creates it)."""
    migrated: bool = False
    """The state was taken over from an old release's ``status.controller``."""
    report_uid: str | None = None
    """The uid of the report the controller created or took over (``REPORT_UID_KEY``)."""

    def with_decisions(self, decisions: Sequence[Decision]) -> list[dict[str, Any]]:
        return (self.decisions + [d.to_dict() for d in decisions])[-DECISIONS_KEPT:]


CLUSTER_MAX_AGE_S = 5.0
"""With ``reuse_reads``: the cluster copy is read again once it is this old."""


class StateStore:
    """The two kinds of state ConfigMap. Cluster methods are called by one thread at a
    time (the reconciler's cluster lock); job methods for one job at a time."""

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        controller_namespace: str | None = None,
        request_timeout_s: float = 10.0,
        reuse_reads: bool = False,
        cluster_max_age_s: float = CLUSTER_MAX_AGE_S,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self.namespace = namespace
        """The state namespace: where every ConfigMap of this store lives."""
        self.controller_namespace = controller_namespace
        """Written on each ConfigMap (``CONTROLLER_ANNOTATION``); None: not written."""
        self._timeout = request_timeout_s
        self._cluster_rv: str | None = None
        self.job_state_since: datetime | None = None
        """Read with the cluster state; None until this version wrote it once."""
        self.reuse_reads = reuse_reads
        self._cluster_max_age_s = cluster_max_age_s
        self._monotonic = monotonic
        self._cluster_copy: tuple[ClusterState, float] | None = None
        """The cluster state as last read or written, and when (``monotonic``)."""
        self._jobs: dict[JobKey, JobRecord] = {}
        """Each job's record as last read or written (``reuse_reads``)."""
        self._jobs_lock = threading.Lock()
        self.hardware = HardwareStore(
            self._get_map, self._write_map, reuse_reads=reuse_reads, monotonic=monotonic
        )
        """The memory of hardware's shards (loaded and saved under the cluster lock)."""

    def forget(self, key: JobKey | None = None) -> None:
        """Drop the cluster copy, the memory's and ``key``'s (a write found them stale):
        read again."""
        self._cluster_copy = None
        self.hardware.forget()
        if key is not None:
            with self._jobs_lock:
                self._jobs.pop(key, None)

    # --- cluster part ------------------------------------------------------------------

    def load_cluster(self) -> ClusterState:
        if self.reuse_reads and self._cluster_copy is not None:
            state, at = self._cluster_copy
            if self._monotonic() - at < self._cluster_max_age_s:
                return state
        state = self._read_cluster()
        if self.reuse_reads:
            self._cluster_copy = (state, self._monotonic())
        return state

    def _get_cluster_map(self) -> dict[str, Any] | None:
        """The cluster ConfigMap as the server holds it now; None when there is none."""
        return self._get_map(STATE_CONFIGMAP)

    def _get_map(self, name: str) -> dict[str, Any] | None:
        """One of our ConfigMaps as the server holds it now; None when there is none."""
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self._core.read_namespaced_config_map(
                name, self.namespace, _preload_content=False, _request_timeout=self._timeout,
            )  # fmt: skip
        except ApiException as e:
            if e.status != 404:
                raise
            return None
        cm: dict[str, Any] = json.loads(cast(bytes, resp.data) or b"{}")
        return cm

    def _write_map(
        self,
        name: str,
        resource_version: str | None,
        data: Mapping[str, str],
        labels: Mapping[str, str],
    ) -> str | None:
        return self._write(name, resource_version, data, labels={**MANAGED_BY, **labels})

    def _read_since(self) -> datetime | None:
        """``jobStateSince`` as the cluster ConfigMap holds it now (no copy touched)."""
        since = ((self._get_cluster_map() or {}).get("data") or {}).get(SINCE_KEY)
        return _parse_time(since) if since else None

    def _read_cluster(self) -> ClusterState:
        cm = self._get_cluster_map()
        if cm is None:
            self._cluster_rv = None
            self.job_state_since = None
            return ClusterState()
        self._cluster_rv = (cm.get("metadata") or {}).get("resourceVersion")
        since = (cm.get("data") or {}).get(SINCE_KEY)
        self.job_state_since = _parse_time(since) if since else None
        raw = (cm.get("data") or {}).get(STATE_KEY)
        if not raw:
            return ClusterState()
        try:
            return cluster_state_from_wire(json.loads(raw))
        except (StateError, json.JSONDecodeError) as e:
            # Never act on a state we cannot read: the operator treats this as fatal
            # for the cycle and alerts, rather than starting from an empty budget.
            raise StateError(f"ConfigMap {self.namespace}/{STATE_CONFIGMAP}: {e}") from e

    def save_cluster(self, cs: ClusterState, now: datetime | None = None) -> None:
        """Write with the resourceVersion we read; 409 propagates (re-read, re-decide).
        The first write of this version stamps ``jobStateSince`` (``now``)."""
        if self.job_state_since is None:
            self.job_state_since = now or datetime.now(UTC)
        data = {
            STATE_KEY: json.dumps(cluster_state_to_wire(cs), sort_keys=True),
            SINCE_KEY: self.job_state_since.isoformat(),
        }
        try:
            self._cluster_rv = self._write(
                STATE_CONFIGMAP, self._cluster_rv, data, labels=dict(MANAGED_BY)
            )
        except Exception:
            self._cluster_copy = None
            raise
        if self.reuse_reads:
            self._cluster_copy = (cs, self._monotonic())

    def _write(
        self,
        name: str,
        resource_version: str | None,
        data: Mapping[str, str],
        *,
        labels: Mapping[str, str],
        annotations: Mapping[str, str] | None = None,
    ) -> str | None:
        """Create (no resourceVersion) or replace one of our ConfigMaps; the new version."""
        from kubernetes.client.exceptions import ApiException

        metadata: dict[str, Any] = {"name": name, "namespace": self.namespace, "labels": labels}
        annotations = dict(annotations or {})
        if self.controller_namespace is not None:
            annotations[CONTROLLER_ANNOTATION] = self.controller_namespace
        if annotations:
            metadata["annotations"] = annotations
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": metadata,
            "data": dict(data),
        }
        if resource_version is None:
            try:
                resp = self._core.create_namespaced_config_map(
                    self.namespace,
                    cast(Any, body),  # the client takes plain dicts too
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
            except ApiException as e:
                if e.status == 409:
                    logger.warning("state configmap created concurrently", extra={"cm": name})
                raise
        else:
            metadata["resourceVersion"] = resource_version
            resp = self._core.replace_namespaced_config_map(
                name, self.namespace, cast(Any, body),
                _preload_content=False, _request_timeout=self._timeout,
            )  # fmt: skip
        out = json.loads(cast(bytes, resp.data) or b"{}")
        rv = (out.get("metadata") or {}).get("resourceVersion")
        return None if rv is None else str(rv)

    # --- job part -----------------------------------------------------------------------

    def load_job(self, key: JobKey, report_object: Mapping[str, Any] | None) -> JobRecord:
        """The job's state and records; an old release's ``status.controller.state`` is
        taken over when no ConfigMap exists yet and the report predates this version."""
        if self.reuse_reads:
            with self._jobs_lock:
                kept = self._jobs.get(key)
            if kept is not None:
                return kept
        record = self._read_job(key, report_object)
        if self.reuse_reads and record.resource_version is not None:
            with self._jobs_lock:
                self._jobs[key] = record
        return record

    def _read_job(self, key: JobKey, report_object: Mapping[str, Any] | None) -> JobRecord:
        from kubernetes.client.exceptions import ApiException

        name = job_state_name(key)
        try:
            resp = self._core.read_namespaced_config_map(
                name, self.namespace, _preload_content=False, _request_timeout=self._timeout
            )
        except ApiException as e:
            if e.status != 404:
                raise
            return self._migrated(key, report_object)
        cm = json.loads(cast(bytes, resp.data) or b"{}")
        data = cm.get("data") or {}
        rv = (cm.get("metadata") or {}).get("resourceVersion")
        try:
            raw = data.get(STATE_KEY)
            state = job_state_from_wire(key, json.loads(raw)) if raw else None
            records = json.loads(data.get(DECISIONS_KEY) or "[]")
        except (StateError, json.JSONDecodeError) as e:
            raise StateError(f"ConfigMap {self.namespace}/{name} ({key}): {e}") from e
        uid = data.get(REPORT_UID_KEY) or None
        return JobRecord(key, state, list(records), None if rv is None else str(rv),
                         report_uid=uid)  # fmt: skip

    def _migrated(self, key: JobKey, obj: Mapping[str, Any] | None) -> JobRecord:
        legacy = (((obj or {}).get("status") or {}).get("controller") or {}).get("state")
        created = _parse_time(((obj or {}).get("metadata") or {}).get("creationTimestamp"))
        if not legacy or created is None:
            return JobRecord(key)
        # Read now, not from the cluster copy, which another reconcile may be loading or
        # writing meanwhile (this path runs once per job of an old release).
        since = self._read_since()
        if since is None or created >= since:
            return JobRecord(key)
        try:
            state = job_state_from_wire(key, legacy)
        except StateError as e:
            # An old record we cannot read is not worth refusing the job over: start anew.
            logger.warning("old job state not taken over", extra={"job": key, "error": str(e)})
            return JobRecord(key)
        logger.info("job state taken over from status.controller", extra={"job": key})
        return JobRecord(key, state, migrated=True)

    def save_job(
        self, record: JobRecord, state: JobState | None, records: Sequence[Mapping[str, Any]]
    ) -> JobRecord:
        """Write the job's ConfigMap with the version it was read at (409 propagates)."""
        data = {DECISIONS_KEY: json.dumps(list(records), sort_keys=True)}
        if record.report_uid is not None:
            data[REPORT_UID_KEY] = record.report_uid
        if state is not None:
            data[STATE_KEY] = json.dumps(job_state_to_wire(record.key, state), sort_keys=True)
        try:
            rv = self._write(
                job_state_name(record.key), record.resource_version, data,
                labels={**MANAGED_BY, JOB_STATE_LABEL: "job"},
                annotations={JOB_ANNOTATION: record.key},
            )  # fmt: skip
        except Exception:
            self.forget(record.key)
            raise
        saved = JobRecord(record.key, state, [dict(r) for r in records], rv,
                          report_uid=record.report_uid)  # fmt: skip
        if self.reuse_reads and rv is not None:
            with self._jobs_lock:
                self._jobs[record.key] = saved
        return saved

    def delete_job(self, key: JobKey) -> None:
        """The job's report is gone: so is what we kept of it (404 is done)."""
        from kubernetes.client.exceptions import ApiException

        with self._jobs_lock:
            self._jobs.pop(key, None)
        try:
            self._core.delete_namespaced_config_map(
                job_state_name(key), self.namespace, _request_timeout=self._timeout
            )
        except ApiException as e:
            if e.status != 404:
                raise

    def mirror_status(
        self,
        namespace: str,
        name: str,
        controller: dict[str, Any],
        previous: Mapping[str, Any] | None = None,
        shown: Mapping[str, Any] | None = None,
    ) -> None:
        """Merge-patch the display copy in ``status.controller`` and the top-level keys in
        ``shown`` (``conditions``, ``verdict``): the reporter owns the rest of status.
        Keys the display no longer has (an old release's ``state``) are deleted with
        null."""
        patch = {
            "status": {
                "controller": merge_patch(dict(previous or {}), controller),
                **(shown or {}),
            }
        }
        resp: Any = self._custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, patch,
            _content_type=MERGE_PATCH, _request_timeout=self._timeout, _preload_content=False,
        )  # fmt: skip
        # The answer is the whole object, report included: read (the connection goes back
        # to the pool), not parsed.
        resp.data  # noqa: B018


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
