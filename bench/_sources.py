"""Run a bench's code under test from another checkout (e.g. a ``git worktree`` of the
commit before a change): a folder whose ``pacekeeper`` package is that checkout's."""

from __future__ import annotations

from pathlib import Path

PARTS = ("controller", "detector", "cupti_ext")


def pacekeeper_path(src: Path, tmp: Path) -> str:
    """A PYTHONPATH entry, made under ``tmp``, where ``pacekeeper`` is the checkout ``src``."""
    links = tmp / "pacekeeper"
    links.mkdir(parents=True)
    for part in PARTS:
        (links / part).symlink_to(src.resolve() / part)
    return str(tmp)
