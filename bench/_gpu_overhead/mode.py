"""``Mode``: what a timing mode does around the paired A/B blocks (set-up and teardown
around its whole measurement, hooks at each block's start and end, the flush that
ends a block, the wrap of each timed step). The base runs both blocks plain (``aa``:
the method's own noise). Apart so the runner and every family of modes share it."""

from __future__ import annotations

from .workloads import Step


class Mode:
    """How a B block runs a step; setup/teardown around the mode's whole measurement."""

    name = "aa"

    def setup(self) -> None:
        pass

    def block_start(self) -> None:
        pass

    def block_end(self) -> None:
        pass

    def a_block_start(self) -> None:
        """Before an A block: most modes run A blocks plain."""

    def a_block_end(self) -> None:
        pass

    def flush(self) -> None:
        pass

    def warm(self, b_block: bool) -> None:
        """After a block's opening flush, before its clock starts."""

    def wrap(self, step: Step) -> Step:
        return step

    def teardown(self) -> None:
        pass
