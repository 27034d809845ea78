"""Which Ray job a publisher belongs to, as Ray records it: the job's ``JobBadge`` actor.

The board cannot see who calls it, but Ray records which job created each actor: the
GCS actor table holds the creator's job id, and every ``ActorID`` embeds it. So a
publishing process creates a ``JobBadge`` (a tiny actor that is unnamed and not detached,
so it belongs to, lives and dies with its job) and hands the handle to
``ScoreBoard.register``. ``badge_job`` checks the handle against the GCS actor table,
which the job cannot write; the job key comes from there, never from the caller.

Only a badge counts: any actor of the job would not do, because another driver can get
the handle of any *named* actor through Ray's public API (``ray.get_actor``) and
present it as proof. An unnamed badge's handle exists only where the job passed it.

Ray APIs (Ray 2.60, no dashboard needed): ``ActorHandle._actor_id`` (an ``ActorID``;
``.job_id`` is the embedded ``JobID``) and ``ray._private.state.actors(actor_id_hex)``
(the GCS actor table: ``JobID``, ``State``, ``ActorClassName``, ``Name``, ``IsDetached``).
Ray is imported inside functions: ``pacekeeper.detector`` must import without it.
"""

from __future__ import annotations

from typing import Any

from .publish_tokens import PublishRefused

BADGE_CLASS = "JobBadge"


class JobBadge:
    """The actor class. It holds nothing: that Ray records it as the job's is the proof."""

    def ping(self) -> bool:
        return True


def create_badge(timeout_s: float) -> Any:
    """A new badge owned by this process (its job), created and running (``register``
    refuses a badge that is not yet alive). Needs ``ray.init`` first."""
    import ray

    actor_cls: Any = ray.remote(JobBadge)
    badge = actor_cls.options(num_cpus=0, max_restarts=0, lifetime="non_detached").remote()
    ray.get(badge.ping.remote(), timeout=timeout_s)
    return badge


def ray_job_key(job_id_hex: str) -> str:
    """The board's and the controller's key of a Ray job (``JobIdentity.key``'s form)."""
    return f"ray:{job_id_hex}"


def badge_job(handle: Any) -> tuple[str, str]:
    """(job key, badge actor id) of a badge handle, from the GCS actor table. Raises
    ``PublishRefused`` naming why when it is not a live badge, or Ray's records disagree."""
    from ray._private import state

    actor_id = getattr(handle, "_actor_id", None)
    if actor_id is None or not hasattr(actor_id, "job_id"):
        raise PublishRefused(
            f"register needs a {BADGE_CLASS} actor handle, got {type(handle).__name__}"
        )
    hex_id = str(actor_id.hex())
    info = state.actors(hex_id)
    if not info:
        raise PublishRefused(f"actor {hex_id} is not in Ray's actor table")
    embedded = str(actor_id.job_id.hex())
    problems = []
    if info.get("JobID") != embedded:
        problems.append(f"its id names job {embedded}, the GCS says {info.get('JobID')}")
    if info.get("ActorClassName") != BADGE_CLASS:
        problems.append(f"it is a {info.get('ActorClassName')!r}, not a {BADGE_CLASS}")
    if info.get("Name"):
        problems.append("it is a named actor (any driver can get its handle)")
    if info.get("IsDetached"):
        problems.append("it is detached (it does not live and die with its job)")
    if info.get("State") != "ALIVE":
        problems.append(f"it is {info.get('State')}, not ALIVE")
    if problems:
        raise PublishRefused(f"actor {hex_id} cannot register: " + "; ".join(problems))
    return ray_job_key(embedded), hex_id
