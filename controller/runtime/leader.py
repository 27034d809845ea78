"""Lease-based leader election (coordination.k8s.io/v1), so two replicas never act twice.

The decision "may I hold the lease now?" is pure (``claim``); the shell (``LeaseElector``)
reads and writes the Lease with optimistic concurrency: every write carries the
resourceVersion it read, so of two replicas racing for an expired lease exactly one wins
(the other gets 409 and stays a follower). A leader that cannot renew before its lease
runs out stops acting *before* another replica may take over: it gives up at
``renew_deadline_s`` < ``lease_duration_s``. Every Lease request carries a timeout, so a
round against a server that never answers ends, and so does a stop that waits for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str | None
    lease_duration_s: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int = 0
    resource_version: str | None = None

    def expired(self, now: datetime) -> bool:
        if self.holder is None or self.renew_time is None:
            return True
        return now >= self.renew_time + timedelta(seconds=self.lease_duration_s)


def claim(
    current: LeaseRecord | None, me: str, now: datetime, lease_duration_s: int
) -> LeaseRecord | None:
    """The record to write to hold the lease, or None when another holder's lease is live."""
    if current is None:
        return LeaseRecord(me, lease_duration_s, now, now, 0)
    if current.holder == me:
        return replace(current, renew_time=now, lease_duration_s=lease_duration_s)
    if not current.expired(now):
        return None
    return LeaseRecord(
        me, lease_duration_s, now, now, current.transitions + 1, current.resource_version
    )


def _parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _fmt_time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """Holds a Lease for one identity; calls back on gaining and losing leadership.

    ``api`` is a ``kubernetes.client.CoordinationV1Api``; give it a client without
    urllib3 retries, or one request may last several ``request_timeout_s``. Runs in its own
    daemon thread so the operator's event loop is never blocked by API latency.
    """

    def __init__(
        self,
        api: Any,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration_s: int = 15,
        renew_deadline_s: float = 10.0,
        retry_period_s: float = 2.0,
        request_timeout_s: float = 2.0,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if not 0 < retry_period_s < renew_deadline_s < lease_duration_s:
            raise ValueError(
                "leader election needs 0 < retryPeriod < renewDeadline < leaseDuration, got "
                f"{retry_period_s} / {renew_deadline_s} / {lease_duration_s}"
            )
        if not 0 < 2 * request_timeout_s < renew_deadline_s:
            # A round is a read and a write: it must end well before the renew deadline.
            raise ValueError(
                "leader election needs 0 < 2 * requestTimeout < renewDeadline, got "
                f"{request_timeout_s} / {renew_deadline_s}"
            )
        self._api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration_s = lease_duration_s
        self.renew_deadline_s = renew_deadline_s
        self.retry_period_s = retry_period_s
        self.request_timeout_s = request_timeout_s
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._clock = clock
        self._stop = threading.Event()
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lease-elector", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True) -> None:
        """Stop electing; give the lease back when held and ``release`` (the caller knows
        that nothing the lease guards is still running). Bounded by a round and a
        release, each two requests of at most ``request_timeout_s``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.request_timeout_s + self.retry_period_s)
        if not self._leading.is_set():
            return
        if release:
            self._release()
        self._leading.clear()
        logger.info("leadership given up", extra={"lease": self.name, "released": release})
        self._on_stopped()

    def try_acquire_or_renew(self, now: datetime | None = None) -> bool:
        """One round: read, decide, write. True when we hold the lease afterwards.
        ``now`` is the renewTime written (the clock's time when not given)."""
        from kubernetes.client.exceptions import ApiException

        now = now or self._clock()
        timeout = self.request_timeout_s
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=timeout
            )
        except ApiException as e:
            if e.status != 404:
                raise
            lease = None
        current = self._record(lease) if lease is not None else None
        wanted = claim(current, self.identity, now, self.lease_duration_s)
        if wanted is None:
            return False
        body = self._body(wanted)
        try:
            if lease is None:
                self._api.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
            else:
                self._api.replace_namespaced_lease(
                    self.name, self.namespace, body, _request_timeout=timeout
                )
        except ApiException as e:
            if e.status == 409:  # another replica wrote first: it holds the lease
                return False
            raise
        return True

    # --- internals ------------------------------------------------------------------

    def _run(self) -> None:
        last_renew: datetime | None = None
        while not self._stop.is_set():
            started = self._clock()
            try:
                held: bool | None = self.try_acquire_or_renew(started)
            except Exception:
                logger.warning("lease round failed", exc_info=True, extra={"lease": self.name})
                held = None  # unknown: keep leading until the renew deadline
            now = self._clock()
            if held:
                # The deadline counts from the renewTime written, not from the answer.
                last_renew = started
                self._set_leading(True)
            elif held is False or (
                last_renew is not None
                and (now - last_renew).total_seconds() >= self.renew_deadline_s
            ):
                # Someone else holds it, or we could not renew in time: stop acting
                # before the lease can expire for the others.
                self._set_leading(False)
            self._stop.wait(self.retry_period_s)

    def _set_leading(self, leading: bool) -> None:
        if leading and not self._leading.is_set():
            self._leading.set()
            if self._stop.is_set():
                return  # won while stopping: held only so that stop() gives it back
            logger.info("became leader", extra={"lease": self.name, "identity": self.identity})
            self._on_started()
        elif not leading and self._leading.is_set():
            self._leading.clear()
            logger.warning("lost leadership", extra={"lease": self.name})
            self._on_stopped()

    def _release(self) -> None:
        timeout = self.request_timeout_s
        try:
            lease = self._api.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=timeout
            )
            rec = self._record(lease)
            if rec.holder != self.identity:
                return
            # An expired-looking record lets a successor take over at once.
            released = replace(rec, holder=None, renew_time=None)
            self._api.replace_namespaced_lease(
                self.name, self.namespace, self._body(released), _request_timeout=timeout
            )
        except Exception:  # an API error, a timeout, a refused connection: it expires anyway
            logger.info("lease release skipped", exc_info=True, extra={"lease": self.name})
            return
        logger.info("lease released", extra={"lease": self.name})

    @staticmethod
    def _record(lease: Any) -> LeaseRecord:
        if isinstance(lease, dict):
            spec = lease.get("spec") or {}
            meta = lease.get("metadata") or {}
            get = spec.get
            rv = meta.get("resourceVersion")
            return LeaseRecord(
                holder=get("holderIdentity"),
                lease_duration_s=int(get("leaseDurationSeconds") or 15),
                acquire_time=_parse_time(get("acquireTime")),
                renew_time=_parse_time(get("renewTime")),
                transitions=int(get("leaseTransitions") or 0),
                resource_version=rv,
            )
        spec = lease.spec
        return LeaseRecord(
            holder=spec.holder_identity,
            lease_duration_s=int(spec.lease_duration_seconds or 15),
            acquire_time=_parse_time(spec.acquire_time),
            renew_time=_parse_time(spec.renew_time),
            transitions=int(spec.lease_transitions or 0),
            resource_version=lease.metadata.resource_version,
        )

    def _body(self, rec: LeaseRecord) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if rec.resource_version:
            meta["resourceVersion"] = rec.resource_version
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": rec.holder,
                "leaseDurationSeconds": rec.lease_duration_s,
                "acquireTime": _fmt_time(rec.acquire_time),
                "renewTime": _fmt_time(rec.renew_time),
                "leaseTransitions": rec.transitions,
            },
        }
