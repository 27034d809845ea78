"""Pick the kernel-timing backend: the user's choice if given, else the best that works.

auto: ``cupti`` if cupti-python imports, a GPU is present and a CUPTI self-check passes;
else ``events`` if CUDA is available; else ``none``. A request that cannot be honoured
degrades the same way (logged as a warning with the reason) instead of failing the job.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from .backend import BackendChoice, KernelTimingBackend
from .none_backend import NoneBackend

logger = logging.getLogger(__name__)

ENV_VAR = "PACEKEEPER_KERNEL_TIMING"
CHOICES = ("auto", "cupti", "events", "none")


def cuda_available() -> bool:
    """True when torch sees a CUDA device (no CUDA call when torch or CUDA is absent)."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def make_cupti(**kwargs: Any) -> KernelTimingBackend:
    from .cupti_backend import CuptiBackend

    return CuptiBackend(**kwargs)


def make_events() -> KernelTimingBackend:
    from .events_backend import EventsBackend

    return EventsBackend()


def select_backend(
    requested: str | None = None, **cupti_options: Any
) -> tuple[KernelTimingBackend, BackendChoice]:
    """Return a ready backend and the reason it was chosen.

    ``requested`` (or ``$PACEKEEPER_KERNEL_TIMING``) is one of ``auto|cupti|events|none``;
    ``cupti_options`` go to ``CuptiBackend`` (e.g. ``sample_every``).
    """
    source = "argument" if requested else ("env" if os.environ.get(ENV_VAR) else "default")
    choice = (requested or os.environ.get(ENV_VAR) or "auto").strip().lower()
    if choice not in CHOICES:
        where = f"{ENV_VAR}={choice!r}" if source == "env" else f"kernel_timing={choice!r}"
        raise ValueError(f"{where} is not one of {', '.join(CHOICES)}")
    asked = f"requested by {source}"
    if choice in ("auto", "cupti"):
        # Settings are the user's input: a bad one fails initialize, naming the variable,
        # rather than being taken for a CUPTI failure (or passing unseen without a GPU).
        from .buffer_policy import buffer_policy_from_env
        from .cupti_env import (
            attribution_from_env,
            buffer_bytes_from_env,
            marker_modes_from_env,
            report_flush_forced_from_env,
            sample_every_from_env,
        )
        from .cupti_subscriber import subscriber_mode_from_env
        from .kernel_keys import comm_pattern_from_env

        if "sample_every" not in cupti_options:
            sample_every_from_env()
        if "buffer_size" not in cupti_options:
            buffer_bytes_from_env()
        marker_modes_from_env()
        report_flush_forced_from_env()
        attribution_from_env()
        subscriber_mode_from_env()
        buffer_policy_from_env()
        comm_pattern_from_env()
    if choice == "none":
        return NoneBackend(), BackendChoice("none", asked)
    if not cuda_available():
        reason = "no CUDA device"
        if choice != "auto":
            reason = f"{choice} {asked} but {reason}"
            logger.warning("kernel timing degraded", extra={"backend": "none", "reason": reason})
        return NoneBackend(), BackendChoice("none", reason)
    cupti_failure: str | None = None
    if choice in ("auto", "cupti"):
        from .cupti_env import CuptiUnavailable

        try:
            backend = make_cupti(**cupti_options)
            why = asked if choice == "cupti" else "CUDA device and working CUPTI"
            return backend, BackendChoice("cupti", why)
        except CuptiUnavailable as e:
            cupti_failure = str(e)
        except Exception as e:  # never let a CUPTI surprise stop the job
            cupti_failure = f"CUPTI self-check failed: {e!r}"
    try:
        events = make_events()
    except Exception as e:
        reason = f"CUDA events unavailable: {e!r}"
        logger.warning("kernel timing degraded", extra={"backend": "none", "reason": reason})
        return NoneBackend(), BackendChoice("none", reason)
    if cupti_failure is None:
        return events, BackendChoice("events", asked)
    reason = f"cupti unavailable: {cupti_failure}"
    if choice == "cupti":
        reason = f"cupti {asked} but unavailable: {cupti_failure}"
    logger.warning("kernel timing degraded", extra={"backend": "events", "reason": reason})
    return events, BackendChoice("events", reason)
