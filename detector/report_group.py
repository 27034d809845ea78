"""Which process group a report's collectives run on, and what a failed one costs.

NVRx runs its collectives on the job's default group: a rank that skips one report
leaves the others blocked until that group's timeout (30 minutes with gloo's default),
and a timed-out NCCL collective takes the whole process down. Here the detector makes a
group of its own over the job group's ranks (one gloo group, or a tree of small ones
above 16 ranks: ``report_path``, ``tree_group``):

* **when**: lazily, inside the first collective of a report on each rank (the interval
  agreement of ``generate_report_if_interval_elapsed`` or the gather of
  ``generate_report``), once the job's default group exists. Every rank makes that call,
  at the same point of the job, so the new group is created by all members in the same
  order relative to the job's own ``new_group`` calls. It is kept for the next run and
  made anew only when the default group changes;
* **backend**: gloo (CPU objects; never on the job's NCCL streams) unless
  ``report_backend`` names another; ``"job"`` runs on the job's group as NVRx does;
* **timeout**: ``report_timeout_s`` (default 60 s, ``$PACEKEEPER_REPORT_TIMEOUT_S``) per
  collective. A report whose collective fails or times out returns None (the guard logs
  and counts it) and the group is abandoned: a gloo timeout closes the group's
  connections, so every rank's next collective on it fails at once, and every rank stops
  using it. Later reports that need other ranks return None, counted as
  ``report.gather``, until ``shutdown()`` and ``initialize()``; reports without a
  collective (``gather_on_rank0=False`` with individual scores only) go on.

The job's group is described afresh at every report (``current``), so a detector
initialised before ``init_process_group`` reports with the real ranks once they exist.
This module holds no torch import; ``gather`` makes the calls.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from . import collectives, env, gather
from .run_config import REPORT_ON_JOB_GROUP

logger = logging.getLogger(__name__)

T = TypeVar("T")

_MAX_KEPT = 8
# Healthy groups kept across runs: (default group, ranks, backend, timeout) -> group.
# A shutdown()/initialize() cycle then creates no second group (and no more sockets).
_kept: list[tuple[Any, tuple[int, ...], str | None, float, Any]] = []


class ReportGroupBroken(RuntimeError):
    """An earlier collective of the detector failed; its group is no longer used."""


def _find(world: Any, ranks: tuple[int, ...], backend: str | None, timeout_s: float) -> Any:
    for w, r, b, t, group in _kept:
        if w is world and r == ranks and b == backend and t == timeout_s:
            return group
    return None


def _keep(
    world: Any, ranks: tuple[int, ...], backend: str | None, timeout_s: float, group: Any
) -> None:
    _kept[:] = [k for k in _kept if k[0] is world][-(_MAX_KEPT - 1) :]
    _kept.append((world, ranks, backend, timeout_s, group))


def _forget(group: Any) -> None:
    _kept[:] = [k for k in _kept if k[4] is not group]


@atexit.register
def _close_kept() -> None:
    # Before the interpreter tears down: a gloo group still alive then is destroyed with
    # its threads running, and the process aborts ("terminate called without an active
    # exception") instead of exiting.
    while _kept:
        gather.close_report_group(_kept.pop()[4])


_worlds: list[Any] = [None, 0]
# [the last default group seen, how many distinct ones this process has seen]
_made: Counter[tuple[int, tuple[int, ...]]] = Counter()


def _key_prefix(world: Any, ranks: tuple[int, ...]) -> str:
    """Where the detector's group keeps its keys in the job's store: the same on every
    member (each sees the same restart, the same default groups and makes the same
    groups in turn) and new for each restart, default group and group made."""
    if _worlds[0] is not world:
        _worlds[:] = [world, _worlds[1] + 1]
    made = (_worlds[1], ranks)
    _made[made] += 1
    attempt = env.elastic_restart_count()
    digest = hashlib.sha1("_".join(map(str, ranks)).encode(), usedforsecurity=False)
    return (
        f"pacekeeper/report-group/r{'-' if attempt is None else attempt}/w{_worlds[1]}/"
        f"{digest.hexdigest()[:12]}/{_made[made]}/"
    )


class ReportGroup:
    """The job's group as it is now, and the detector's own group to run collectives on."""

    def __init__(self, job_group: Any, *, backend: str | None, timeout_s: float) -> None:
        self.job_group = job_group
        """The group given to ``initialize`` (None: WORLD)."""
        self.backend = backend
        self.timeout_s = timeout_s
        self._world: Any = None
        self._own: Any = None
        self._own_info: gather.GroupInfo | None = None
        self.broken = False
        self._described: tuple[Any, gather.GroupInfo] | None = None

    def describe(self) -> gather.GroupInfo:
        """The job group's ranks and sizes now. Read afresh whenever the default group is
        a new object (the first report after ``init_process_group``, a restart in the
        same process): a process group's ranks never change while it lives, and reading
        them was ~7% of a small report on a busy GPU host."""
        world = gather.default_group()
        described = self._described
        if described is not None and described[0] is world and world is not None:
            return described[1]
        info = gather.describe_group(self.job_group)
        self._described = (world, info)
        return info

    def collective(
        self, fn: Callable[[T, gather.GroupInfo, Any], Any], obj: T, info: gather.GroupInfo
    ) -> Any:
        """``fn(obj, info, group)`` on the group reports run on; ``info`` is the job
        group's description from ``describe``. A failure abandons the detector's group."""
        if info.alone:
            return fn(obj, info, self.job_group)
        if self.backend == REPORT_ON_JOB_GROUP:
            with collectives.not_counted():
                return fn(obj, info, self.job_group)
        own_info, own = self._own_group(info)
        try:
            with collectives.not_counted():
                return fn(obj, own_info, own)
        except Exception:
            self._abandon(own)
            raise

    def _own_group(self, info: gather.GroupInfo) -> tuple[gather.GroupInfo, Any]:
        world = gather.default_group()
        if world is not self._world:
            # A new default group (the first report after init_process_group, or after a
            # restart in the same process): the old own group belonged to the old one.
            self._world, self._own, self._own_info, self.broken = world, None, None, False
        if self.broken:
            raise ReportGroupBroken(
                "the detector's process group was abandoned after a failed collective; "
                "call Detector.shutdown() and initialize() on every rank to start again"
            )
        if self._own is None or self._own_info is None:
            ranks = info.global_ranks
            group = _find(world, ranks, self.backend, self.timeout_s)
            if group is None:
                try:
                    group = gather.new_report_group(
                        ranks, self.backend, self.timeout_s, _key_prefix(world, ranks)
                    )
                except Exception:
                    self.broken = True
                    raise
                _keep(world, ranks, self.backend, self.timeout_s, group)
            self._own, self._own_info = group, gather.describe_group(group)
        return self._own_info, self._own

    def _abandon(self, group: Any) -> None:
        if not self.broken:
            logger.error(
                "detector report collective failed; its process group is abandoned and "
                "reports that need other ranks return None until shutdown/initialize",
                extra={"timeout_s": self.timeout_s},
            )
        self.broken = True
        _forget(group)
        gather.close_report_group(group)
