"""Who taught the memory of hardware what, and what that may cause for whom.

A job writes its own scores, so what it teaches the memory (a GPU's speed factor, a slow
record) is its tenant's word: the namespace and ServiceAccount its pods run as, read
from the API (``JobView.namespace`` and ``service_account``), never from a report. What
one tenant teaches may make the controller more careful toward another, never readier
to disrupt it, unless independent tenants (of different namespaces) agree or a check the
controller owns (the probe, ``confirm: probe``) confirms:

- a factor calibrates its teacher's jobs, and another tenant's only once a tenant of
  another namespace found the GPU at that speed (``hardware_memory.factor_for``);
- a slow record lets a job's ladder skip the rank restart (straight to the node) only
  when it is the job's own tenant's, or records of two namespaces agree, or the node step
  waits for the probe; otherwise it is evidence only (``slow_elsewhere``).

Separate from ``hardware_memory`` (what a window teaches) because this is who may be
believed, the question every reader of the memory asks.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from pacekeeper.controller.core.hardware_memory import NAMESPACE_CHARS, HardwareMemory, job_label
from pacekeeper.controller.core.observations import JobView

_ID_CHARS = 11
"""66 bits of the (namespace, ServiceAccount) hash: finding another ServiceAccount name
with a tenant's tag takes ~2^66 hashes, out of reach even on the GPUs being watched."""


def _hash(text: str, chars: int) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()[:chars]


def tenant_tag(namespace: str, service_account: str) -> str:
    """A short, stable tag of a tenant, as the memory keeps it (13 characters): its
    namespace's share first, so that independence is read off the tag alone."""
    return _hash(namespace, NAMESPACE_CHARS) + _hash(f"{namespace}\0{service_account}", _ID_CHARS)


def tenant_of(view: JobView) -> str:
    """The tag of the job's tenant. Without a ServiceAccount (Ray, the simulator), the
    namespace alone; without a namespace either, the one tenant of a runner that has no
    API to ask (its Ray cluster or process is the boundary)."""
    return tenant_tag(view.namespace or "", view.service_account or "")


@dataclass(frozen=True, slots=True)
class Elsewhere:
    """GPUs remembered slow in other jobs, by whether the job may act on it."""

    trusted: dict[str, list[str]] = field(default_factory=dict)
    """uuid -> jobs: the job's own tenant's, or two namespaces agree, or probed."""
    untrusted: dict[str, list[str]] = field(default_factory=dict)
    """uuid -> jobs: another tenant's word alone; evidence, no escalation."""


def slow_elsewhere(
    memory: HardwareMemory,
    node: str,
    uuids: Iterable[str],
    job: str,
    tenant: str,
    *,
    probed: bool = False,
) -> Elsewhere:
    """Of ``uuids`` on ``node``, those remembered slow in another job than ``job``
    (of ``tenant``). ``probed``: a node step waits for the controller's own probe, so
    any record may send the ladder there."""
    label = job_label(job)
    out = Elsewhere()
    for u in uuids:
        g = memory.gpu(node, u)
        if g is None:
            continue
        slow = [s for s in g.services if s.slow and s.job != label]
        if not slow:
            continue
        namespaces = {s.tenant[:NAMESPACE_CHARS] for s in slow if s.tenant}
        own = any(s.tenant == tenant for s in slow)
        trusted = own or probed or len(namespaces) >= 2
        (out.trusted if trusted else out.untrusted)[u] = sorted({s.job for s in slow})
    return out
