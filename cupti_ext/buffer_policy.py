"""How CUPTI keeps its activity buffers for us: one buffer for every thread or one per
launching thread, and who zeroes a buffer before CUPTI writes into it.

A report flushes every buffer CUPTI holds, and each costs the flush a fixed part
whatever it holds. A training step launches from two threads at least (the forward on
the training thread, the backward on autograd's device thread), so CUPTI's default of
per-thread buffers makes every report flush two, each as full as a thread left it. One
buffer for all threads is the default here, at the price CUPTI gives for its own:
threads launching at the same moment share one buffer's lock (a forward and autograd's
backward launch one after the other). Zeroing is CUPTI's by default, on the launching
thread, a whole buffer at a time; zeroed by us, it is the bytes CUPTI wrote, after we
read them, on the thread that handled the buffer. The figures that chose the defaults
are in docs/kernel-timing.md ("Buffer policy"). Apart from the session because
these are attributes CUPTI takes once, before the buffer callbacks are registered and
any kind is enabled, and the environment names them.
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

THREAD_BUFFERS_ENV = "PACEKEEPER_CUPTI_THREAD_BUFFERS"
"""``one`` (one buffer for all threads) or ``per-thread`` (CUPTI's own default)."""
ZERO_ENV = "PACEKEEPER_CUPTI_ZERO"
"""``ours`` (we zero what CUPTI wrote, after handling it) or ``cupti`` (CUPTI's own
default: it zeroes each new buffer whole on the thread that needs it)."""
THREAD_BUFFERS = ("one", "per-thread")
ZEROING = ("ours", "cupti")

# CUpti_ActivityAttribute values (cupti_activity.h), where cupti-python's enum lacks them.
_ATTR_ZEROED_OUT = 5
_ATTR_PER_THREAD = 9


@dataclass(frozen=True)
class BufferPolicy:
    per_thread: bool = False
    """CUPTI's per-thread activity buffers (its default) rather than one for all."""
    we_zero: bool = True
    """We hand CUPTI zeroed buffers (and zero what it wrote once handled)."""

    def describe(self) -> dict[str, str]:
        return {
            "thread_buffers": "per-thread" if self.per_thread else "one",
            "zero": "ours" if self.we_zero else "cupti",
        }


def _choice(environ: dict[str, str] | os._Environ[str], name: str, allowed: tuple[str, ...]) -> str:
    raw = environ.get(name, "").strip().lower()
    if raw == "":
        return allowed[0]
    if raw not in allowed:
        raise ValueError(f"{name}={raw!r} is not one of {', '.join(allowed)}")
    return raw


def buffer_policy_from_env(environ: dict[str, str] | None = None) -> BufferPolicy:
    """The policy the environment sets (each variable unset: the first of its choices)."""
    env = os.environ if environ is None else environ
    return BufferPolicy(
        per_thread=_choice(env, THREAD_BUFFERS_ENV, THREAD_BUFFERS) == "per-thread",
        we_zero=_choice(env, ZERO_ENV, ZEROING) == "ours",
    )


def _attribute(c: Any, name: str, fallback: int) -> int:
    enum = getattr(c, "ActivityAttribute", None)
    return int(getattr(enum, name, fallback)) if enum is not None else fallback


def apply_buffer_policy(c: Any, policy: BufferPolicy) -> BufferPolicy:
    """Set ``policy``'s attributes through ``c`` (cupti-python's module, or what stands
    for it); return the policy CUPTI runs with, CUPTI's defaults where an attribute is
    refused or cannot be set through ``c`` (a subscriber of the shared API: its
    attributes are per subscriber, and CUPTI's defaults suit it)."""
    setter = getattr(c, "activity_set_attribute", None)
    if setter is None:
        return BufferPolicy(per_thread=True, we_zero=False)

    def set_u8(name: str, fallback: int, value: int) -> bool:
        size, byte = ctypes.c_size_t(1), ctypes.c_uint8(value)
        try:
            setter(_attribute(c, name, fallback), ctypes.addressof(size), ctypes.addressof(byte))
            return True
        except Exception as e:  # an older CUPTI without the attribute: its default stays
            logger.info("CUPTI attribute not set", extra={"attribute": name, "error": repr(e)})
            return False

    per_thread = True
    if not policy.per_thread:
        per_thread = not set_u8("ATTR_PER_THREAD_BUFFER", _ATTR_PER_THREAD, 0)
    we_zero = policy.we_zero and set_u8("ATTR_ZEROED_OUT_BUFFER", _ATTR_ZEROED_OUT, 1)
    return BufferPolicy(per_thread=per_thread, we_zero=we_zero)


__all__ = [
    "THREAD_BUFFERS",
    "THREAD_BUFFERS_ENV",
    "ZEROING",
    "ZERO_ENV",
    "BufferPolicy",
    "apply_buffer_policy",
    "buffer_policy_from_env",
]
