"""Gloo worlds on either of the detector's report paths (issue 42), and their results.

``spawn(mode, fn, world_size, *args)`` runs ``spawn_world`` with the report path's
environment set for the ranks only (they inherit it; the test process gets its own back
after), then checks on every rank that the detector made its report group on that path
(``tree_group.made``), so a tree case fails if the variables are ignored or a change
makes the detector fall back to the flat group.

* ``flat``: the default (``auto``, no ``LOCAL_WORLD_SIZE``): one flat group at these
  sizes (16 ranks or fewer), as every job of that size runs;
* ``tree``: ``PACEKEEPER_REPORT_PATH=tree``, hosts of ``PER_NODE`` ranks, fan-out
  ``FANOUT``: 4 ranks are 2 hosts (node groups and one leader group), 8 are 4 hosts in
  a tree of two leader levels.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from pacekeeper.detector import report_path, tree_group
from pacekeeper.detector.local_world import spawn_world

MODES = ("flat", "tree")
PER_NODE = 2
FANOUT = 2
_VARIABLES = (report_path.REPORT_PATH, report_path.LOCAL_WORLD_SIZE, report_path.REPORT_FANOUT)


def environment(mode: str, per_node: int = PER_NODE, fanout: int = FANOUT) -> dict[str, str]:
    """The report path's variables for ``mode`` (``flat``: none, the default)."""
    if mode == "flat":
        return {}
    return dict(zip(_VARIABLES, (mode, str(per_node), str(fanout)), strict=True))


@contextmanager
def variables(values: dict[str, str]) -> Iterator[None]:
    """``values`` set, and the report path's other variables unset, for the block."""
    saved = {name: os.environ.get(name) for name in (*_VARIABLES, *values)}
    for name in _VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _recorded(fn: Callable[..., Any], record_dir: str, rank: int, *args: Any) -> None:
    tree_group.made.clear()  # a forked rank starts with the test process's counts
    fn(rank, *args)
    with open(os.path.join(record_dir, f"paths{rank}.pkl"), "wb") as f:
        pickle.dump(dict(tree_group.made), f)


def spawn(
    mode: str,
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    join: bool = True,
    per_node: int = PER_NODE,
    fanout: int = FANOUT,
) -> None:
    """``spawn_world(fn, world_size, *args)`` on the ``mode`` report path (a tree: hosts
    of ``per_node``, fan-out ``fanout``); raises AssertionError naming the rank whose
    detector made a group on another path, or none."""
    with tempfile.TemporaryDirectory(prefix="pacekeeper-paths-") as record_dir:
        with variables(environment(mode, per_node, fanout)):
            spawn_world(partial(_recorded, fn, record_dir), world_size, *args, join=join)
        made = results(Path(record_dir), world_size, "paths")
    for rank, counts in enumerate(made):
        assert counts and set(counts) == {mode}, (
            f"rank {rank}: the detector made report groups {counts or 'none'}, "
            f"expected the {mode} path"
        )


def results(out: Path, world_size: int, stem: str = "rank") -> list[dict[str, Any]]:
    """Each rank's pickled result, in rank order (``gloo_worlds.save``)."""
    return [pickle.loads((out / f"{stem}{r}.pkl").read_bytes()) for r in range(world_size)]
