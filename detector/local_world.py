"""Start a small torch.distributed (gloo, CPU) world on this machine.

For the demo, the multi-process tests and the report benchmark: ``spawn_world`` runs
``fn(rank, world_size, *args)`` in ``world_size`` processes that already joined one
gloo group through a file store (no ports to race for). With ``join=False`` the ranks
join themselves (``fn(rank, world_size, store_file, *args)`` calls
``gather.join_gloo_world``), so code can run before ``init_process_group``, as NVRx's
example starts its detector.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from .gather import join_gloo_world, leave_world


def _entry(  # noqa: PLR0917 - torch's spawn passes arguments positionally
    rank: int,
    world_size: int,
    store_file: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    join: bool = True,
) -> None:
    # One CPU thread per rank: the ranks share a few cores with each other.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if join:
        join_gloo_world(rank, world_size, store_file)
    try:
        if join:
            fn(rank, world_size, *args)
        else:
            fn(rank, world_size, store_file, *args)
    finally:
        leave_world()


def spawn_world(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    start_method: str | None = None,
    join: bool = True,
) -> None:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; raises if any fails.

    ``join=False``: ``fn(rank, world_size, store_file, *args)`` joins the world itself.

    ``start_method`` defaults to ``fork`` where available (no torch re-import per rank:
    several seconds saved on small machines), else ``spawn``; ``fn`` must be importable
    by name for ``spawn``.
    """
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import start_processes

    if start_method is None:
        import torch

        # Forking after CUDA is initialised breaks CUDA in the children.
        can_fork = "fork" in mp.get_all_start_methods() and not torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
        start_method = "fork" if can_fork else "spawn"
    with tempfile.TemporaryDirectory(prefix="pacekeeper-world-") as tmp:
        store = os.path.join(tmp, "store")
        start_processes(  # type: ignore[no-untyped-call]
            _entry,
            args=(world_size, store, fn, args, join),
            nprocs=world_size,
            join=True,
            start_method=start_method,
        )
