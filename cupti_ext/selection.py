"""Pick the kernel-timing backend: the user's choice if given, else the best that works."""

from __future__ import annotations

import os

from .backend import BackendChoice, KernelTimingBackend
from .none_backend import NoneBackend

ENV_VAR = "PACEKEEPER_KERNEL_TIMING"
CHOICES = ("auto", "cupti", "events", "none")


def select_backend(requested: str | None = None) -> tuple[KernelTimingBackend, BackendChoice]:
    """Return a ready backend and the reason it was chosen.

    ``requested`` (or ``$PACEKEEPER_KERNEL_TIMING``) is one of ``auto|cupti|events|none``.
    """
    choice = (requested or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if choice not in CHOICES:
        raise ValueError(f"kernel timing backend {choice!r} is not one of {', '.join(CHOICES)}")
    if choice == "none":
        return NoneBackend(), BackendChoice("none", "requested")
    # GPU backends arrive with the CUPTI work; until then every other choice degrades.
    return NoneBackend(), BackendChoice("none", "no GPU backend available")
