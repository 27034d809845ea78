"""Start a small torch.distributed (gloo, CPU) world on this machine.

For the demo, the multi-process tests and the report benchmark: ``spawn_world`` runs
``fn(rank, world_size, *args)`` in ``world_size`` processes that already joined one
gloo group through a file store (no ports to race for).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from .gather import join_gloo_world, leave_world


def _entry(
    rank: int, world_size: int, store_file: str, fn: Callable[..., Any], args: tuple[Any, ...]
) -> None:
    # One CPU thread per rank: the ranks share a few cores with each other.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    join_gloo_world(rank, world_size, store_file)
    try:
        fn(rank, world_size, *args)
    finally:
        leave_world()


def spawn_world(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    start_method: str | None = None,
) -> None:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; raises if any fails.

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
            args=(world_size, store, fn, args),
            nprocs=world_size,
            join=True,
            start_method=start_method,
        )
