"""How long this rank waits in the job's collectives: the culprit is the rank the others wait for.

In a synchronous job every rank's step takes as long as the slowest rank's: the ranks
that got there first wait inside the collective. A section around code that
communicates therefore times the culprit as the *fastest* rank (it never waits) and
its victims as slow. The detector counts the time each rank spends blocked in
collectives and takes it out of the section's time, so sections score the work a rank
did, wherever the user put them; the rank's share of the window spent waiting travels
in the ScoreReport (``waitShare``).

Where the waits come from:

* ``install()`` wraps the blocking ``torch.distributed`` calls the job makes (all-reduce,
  all-gather, reduce-scatter, broadcast, barrier, all-to-all, send/recv, ...): their
  wall time on the calling thread is the wait (plus the transfer itself, the same on
  every rank). A call with ``async_op=True`` returns at once; its wait is timed where
  the job calls the returned ``Work``'s ``wait()`` (``install`` times that method for
  every ``Work``, so FSDP's and the job's own async collectives count too). With NCCL
  the call and ``wait()`` return once the kernel is queued: the GPU side is the NCCL
  kernels' time (``KernelWindow.comm_ns``, which the GPU score leaves out), and the
  rank's ``waitShare`` is the larger of the two (``local_payload``). A ``Future``'s
  ``wait()`` (``work.get_future().wait()``) is not timed.
* ``watch_ddp(model)`` registers a DDP communication hook (plain all-reduce and mean,
  what DDP does by default) that marks when the rank's last bucket of gradients is
  ready: its own compute is done, and from then to the exit of the section around the
  backward it waits for its peers. A backward in no section is not counted. DDP's
  reducer calls the process group from C++, past any Python wrapper, so this is how a
  DDP ``backward`` localises its culprit. The detector calls it for the DDP models it
  finds (``topology_discovery``); a hook the job registers afterwards runs inside ours.

Nested calls (``all_gather_object`` runs ``all_gather``) count once; the detector's own
collectives (its report group: ``own_gloo``) never go through these wrappers.
``WAIT_NS[0]`` is the running total of this process, read by every section entry and
exit (one list index: the hot path stays without calls).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator
from time import perf_counter_ns
from typing import Any

logger = logging.getLogger(__name__)

WAIT_NS = [0]
"""Nanoseconds this process has spent blocked in the job's collectives (monotonic)."""
DDP_READY_NS = [0]
"""When a DDP backward's last bucket of gradients was ready (0: none pending). The next
section exit on the training thread counts the time since then as wait: timed there,
the wait includes the thread's wake-up after the reduction, which a timestamp on the
communication thread would leave in the section's work (several ms on a busy host)."""

BLOCKING = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "barrier",
    "all_to_all",
    "all_to_all_single",
    "reduce",
    "gather",
    "scatter",
    "send",
    "recv",
    "all_gather_object",
    "gather_object",
    "broadcast_object_list",
    "scatter_object_list",
    "all_reduce_coalesced",
    "monitored_barrier",
)
"""``torch.distributed`` functions timed by ``install`` (those the running torch has)."""

_WRAPPED = "__pacekeeper_wait_timed__"
_WORK_WAIT = "wait"
_add_lock = threading.Lock()


def waited(ns: int) -> None:
    """Count ``ns`` of waiting (a DDP hook's callback runs on the communication thread:
    the update is locked, the sections' reads are not)."""
    with _add_lock:
        WAIT_NS[0] += ns


_depth = threading.local()
_lock = threading.Lock()
_installed: dict[str, Callable[..., Any]] = {}


def _timed(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        depth = getattr(_depth, "n", 0)
        if depth or kwargs.get("async_op"):  # an async call's wait is its Work's wait()
            return fn(*args, **kwargs)
        _depth.n = 1
        t0 = perf_counter_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            waited(perf_counter_ns() - t0)
            _depth.n = 0

    setattr(timed, _WRAPPED, fn)
    return timed


@contextlib.contextmanager
def not_counted() -> Iterator[None]:
    """The detector's own collectives on a registered group (``report_backend`` other
    than gloo): they go through the wrapped functions but are no wait of the job's."""
    depth = getattr(_depth, "n", 0)
    _depth.n = depth + 1
    try:
        yield
    finally:
        _depth.n = depth


def install() -> list[str]:
    """Wrap the blocking collectives of ``torch.distributed`` (once per process; the
    module's functions are replaced, so code that calls ``dist.all_reduce`` is timed).
    Returns the names wrapped. Code that imported a function by name before this call
    (``from torch.distributed import all_reduce``) keeps the unwrapped one."""
    import torch.distributed as dist

    with _lock:
        for name in BLOCKING:
            fn = getattr(dist, name, None)
            if fn is None or hasattr(fn, _WRAPPED):
                continue
            _installed[name] = fn
            setattr(dist, name, _timed(fn))
        work = getattr(dist, "Work", None)
        wait = getattr(work, _WORK_WAIT, None)
        if wait is not None and not hasattr(wait, _WRAPPED):
            try:  # a pybind class: its methods can be replaced from Python
                setattr(work, _WORK_WAIT, _timed(wait))
                _installed["Work.wait"] = wait
            except (AttributeError, TypeError) as exc:
                logger.warning("async collectives' waits are not timed", extra={"error": repr(exc)})
        return sorted(_installed)


def installed() -> bool:
    return bool(_installed)


def uninstall() -> None:
    """Put the original functions back (tests; a detector shutdown keeps them timed)."""
    import torch.distributed as dist

    with _lock:
        for name, fn in _installed.items():
            owner, attr = (dist.Work, _WORK_WAIT) if name == "Work.wait" else (dist, name)
            if hasattr(getattr(owner, attr, None), _WRAPPED):
                setattr(owner, attr, fn)
        _installed.clear()


_WATCHED = "__pacekeeper_ddp_watched__"


class _HookState:
    """What the detector's DDP hook needs: the group to reduce over, and the job's own
    hook when the job registers one after ours (DDP keeps one hook only: ours stays and
    calls the job's)."""

    __slots__ = ("group", "user", "user_state")

    def __init__(self, group: Any) -> None:
        self.group = group
        self.user: Callable[[Any, Any], Any] | None = None
        self.user_state: Any = None


def watch_ddp(model: Any, process_group: Any = None) -> bool:
    """Time the wait at the end of each DDP backward: register a communication hook
    that all-reduces and averages every bucket, as DDP's default does, and marks when
    the last bucket is ready (``DDP_READY_NS``). A hook the job registers later on
    ``model`` runs inside ours (its ``register_comm_hook`` is taken over on the
    instance). True when ``model`` is watched (also when it was already); False (logged)
    when it already has a hook of its own: DDP takes one hook only, and the job's is kept."""
    if getattr(model, _WATCHED, False):
        return True
    state = _HookState(process_group)
    try:
        model.register_comm_hook(state, _ddp_mean_hook)
    except RuntimeError as exc:  # DDP allows one hook: "...can only be called once"
        logger.warning(
            "DDP model already has a communication hook; its backward wait is not timed",
            extra={"error": str(exc)[:200]},
        )
        return False
    # Plain attributes on the instance (nn.Module keeps non-tensor values in __dict__).
    object.__setattr__(model, _WATCHED, True)
    object.__setattr__(model, "register_comm_hook", functools.partial(_adopt, model, state))
    return True


def _adopt(model: Any, state: _HookState, user_state: Any, hook: Any) -> None:
    """The job's ``register_comm_hook`` on a watched model: its hook runs inside ours."""
    if state.user is not None:
        raise RuntimeError("register_comm_hook can only be called once")  # DDP's own rule
    model._check_comm_hook(hook)
    state.user, state.user_state = hook, user_state


def _ddp_mean_hook(state: Any, bucket: Any) -> Any:
    import torch.distributed as dist

    if bucket.is_last():
        # This rank's own backward compute is done: from here to the end of the section
        # that holds the backward, it waits for its peers (``SectionHandle.__exit__``).
        DDP_READY_NS[0] = perf_counter_ns()
    if state.user is not None:
        return state.user(state.user_state, bucket)
    group = state.group if state.group is not None else dist.group.WORLD
    size = dist.get_world_size(group)
    buffer = bucket.buffer()
    # The raw process-group call, past our wrappers: this is DDP's own traffic.
    work = getattr(dist.all_reduce, _WRAPPED, dist.all_reduce)(buffer, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0].div_(size))


# DDP checks a hook's annotations against its own classes (GradBucket, Future[Tensor]);
# this module's are strings (postponed evaluation), so they go: none is checked then.
for _name in ("bucket", "return"):
    _ddp_mean_hook.__annotations__.pop(_name, None)
