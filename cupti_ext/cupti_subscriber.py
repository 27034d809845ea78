"""CUPTI shared with other tools: the backend as one subscriber of CUPTI's per-subscriber
Activity API (``cuptiSubscribe_v2`` asking to allow several; CUPTI 13.4 and later here).

Each subscriber of that API has its own buffer callbacks, kinds and external-id stacks,
so another such client traces beside us and both get every kernel (two subscribers on
the H200, driver 580, CUPTI 13.4.92 and 13.5.25: 11 of 11 kernels each;
docs/performance.md, runs 15-16). A client of the older single-subscriber API gets
nothing beside a subscriber, even one with its kinds off, and everything once it has
unsubscribed (torch 2.11's profiler, same runs): the backend unsubscribes when a torch
profiler prepares and subscribes again after it (cupti_backend.py).

``SharedCupti`` stands in for cupti-python's module: the Activity calls the backend makes
(kinds on and off, external ids, dropped records, the driver-API marker) go to the
subscriber's versions, through ctypes on the very libcupti cupti-python loaded
(cupti-python 13.4 binds none of them); everything else, the flush among it (CUPTI
flushes every subscriber's buffers at once), is cupti-python's. Which API is used is
``PACEKEEPER_CUPTI_SUBSCRIBER``: ``auto`` (shared where the library and the driver grant
it), ``shared`` (or CUPTI is refused), ``single`` (the single-subscriber API, as before).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections.abc import Callable
from typing import Any

from .cupti_buffers import RawBuffers, register_callbacks_function
from .cupti_env import CuptiUnavailable, cupti_function_address

logger = logging.getLogger(__name__)

SUBSCRIBER_ENV = "PACEKEEPER_CUPTI_SUBSCRIBER"
SUBSCRIBER_MODES = ("auto", "shared", "single")
_ATTR_MULTIPLE_SUBSCRIBER_STATE = 12
"""``CUPTI_ACTIVITY_ATTR_MULTIPLE_SUBSCRIBER_STATE`` (cupti_activity.h, 13.4): 1 when
several subscribers are allowed."""
_NEEDED = (
    "cuptiSubscribe_v2",
    "cuptiUnsubscribe",
    "cuptiActivityRegisterCallbacks_v2",
    "cuptiActivityEnable_v2",
    "cuptiActivityDisable_v2",
    "cuptiActivityPushExternalCorrelationId_v2",
    "cuptiActivityPopExternalCorrelationId_v2",
    "cuptiActivityGetNumDroppedRecords_v2",
    "cuptiActivityEnableDriverApi_v2",
    "cuptiActivityGetAttribute_v2",
)

_Callback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
_NO_CALLBACK = _Callback(lambda *_: None)
"""The subscriber's API callback: none is enabled, but the call wants one."""


class SubscriberParams(ctypes.Structure):
    # CUpti_SubscriberParams (cupti_callbacks.h, 13.2 and later).
    _fields_ = (
        ("struct_size", ctypes.c_size_t),
        ("subscriber_name", ctypes.c_char_p),
        ("old_subscriber_name", ctypes.c_char_p),
        ("old_subscriber_size", ctypes.c_size_t),
        ("allow_multiple_subscribers", ctypes.c_uint8),
    )


def subscriber_mode_from_env(environ: dict[str, str] | None = None) -> str:
    """``PACEKEEPER_CUPTI_SUBSCRIBER``: ``auto`` (unset), ``shared`` or ``single``."""
    raw = (os.environ if environ is None else environ).get(SUBSCRIBER_ENV, "").strip().lower()
    if raw == "":
        return "auto"
    if raw not in SUBSCRIBER_MODES:
        raise ValueError(f"{SUBSCRIBER_ENV}={raw!r} is not one of {', '.join(SUBSCRIBER_MODES)}")
    return raw


def loaded_libcupti() -> Any:
    """The libcupti cupti-python loaded, opened by its path (the same handle), so our
    calls reach the CUPTI cupti-python's do; by soname where the path cannot be read."""
    addr = cupti_function_address("cuptiGetVersion")
    if addr:

        class _DlInfo(ctypes.Structure):
            _fields_ = (
                ("fname", ctypes.c_char_p),
                ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p),
            )

        info = _DlInfo()
        libc = ctypes.CDLL(None)
        if libc.dladdr(ctypes.c_void_p(addr), ctypes.byref(info)) and info.fname:
            return ctypes.CDLL(info.fname.decode())
    return ctypes.CDLL("libcupti.so.13")


class SharedCupti:
    """cupti-python's module, its Activity calls made for one CUPTI subscriber.

    ``subscribe`` makes the subscriber (``CuptiUnavailable`` with the reason where the
    library lacks the API or refuses several subscribers); until then, and after
    ``unsubscribe``, calls go to cupti-python's own (the single-subscriber API)."""

    def __init__(self, c: Any, lib: Any) -> None:
        self._c = c
        self._lib = lib
        self.handle: int | None = None
        self._hv = ctypes.c_void_p(None)  # the handle as ctypes takes it (hot path)
        self._last_id = ctypes.c_uint64(0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._c, name)

    @property
    def subscribed(self) -> bool:
        return self.handle is not None

    def subscribe(self, name: bytes = b"pacekeeper") -> None:
        lib = self._lib
        missing = [f for f in _NEEDED if not hasattr(lib, f)]
        if missing:
            raise CuptiUnavailable(f"this CUPTI has no per-subscriber API ({missing[0]})")
        old = ctypes.create_string_buffer(64)  # CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN
        # The size CUPTI's macro gives: up to the last field, no tail padding.
        size = SubscriberParams.allow_multiple_subscribers.offset + 1
        params = SubscriberParams(size, name, None, len(old), 1)
        params.old_subscriber_name = ctypes.cast(old, ctypes.c_char_p)
        handle = ctypes.c_void_p()
        rc = lib.cuptiSubscribe_v2(ctypes.byref(handle), _NO_CALLBACK, None, ctypes.byref(params))
        if rc != 0 or not handle.value:
            other = old.value.decode(errors="replace")
            raise CuptiUnavailable(
                f"cuptiSubscribe_v2 refused several subscribers ({rc}"
                + (f", held by {other!r})" if other else ")")
            )
        state = ctypes.c_uint8(255)
        value_size = ctypes.c_size_t(1)
        lib.cuptiActivityGetAttribute_v2(
            handle,
            _ATTR_MULTIPLE_SUBSCRIBER_STATE,
            ctypes.byref(value_size),
            ctypes.byref(state),
        )
        if state.value != 1:
            lib.cuptiUnsubscribe(handle)
            raise CuptiUnavailable(f"CUPTI allows one subscriber here (state {state.value})")
        self.handle = int(handle.value)
        self._hv = ctypes.c_void_p(self.handle)

    def unsubscribe(self) -> None:
        handle, self.handle = self.handle, None
        self._hv = ctypes.c_void_p(None)
        if handle is not None:
            self._check(self._lib.cuptiUnsubscribe(ctypes.c_void_p(handle)), "cuptiUnsubscribe")

    def register_callbacks(self, requested: Any, completed: Any) -> int:
        """``cuptiActivityRegisterCallbacks_v2`` for this subscriber (v2 callback types)."""
        return int(self._lib.cuptiActivityRegisterCallbacks_v2(self._h(), requested, completed))

    # --- the Activity calls the backend makes, per subscriber ---------------------------

    def activity_enable(self, kind: Any) -> None:
        if self.handle is None:
            self._c.activity_enable(kind)
            return
        self._check(self._lib.cuptiActivityEnable_v2(self._h(), int(kind), None), "enable")

    def activity_disable(self, kind: Any) -> None:
        if self.handle is None:
            self._c.activity_disable(kind)
            return
        self._check(self._lib.cuptiActivityDisable_v2(self._h(), int(kind), None), "disable")

    def activity_push_external_correlation_id(self, kind: int, external_id: int) -> None:
        if self.handle is None:
            self._c.activity_push_external_correlation_id(kind, external_id)
            return
        rc = self._lib.cuptiActivityPushExternalCorrelationId_v2(
            self._h(), int(kind), ctypes.c_uint64(external_id)
        )
        self._check(rc, "push external id")

    def activity_pop_external_correlation_id(self, kind: int) -> None:
        if self.handle is None:
            self._c.activity_pop_external_correlation_id(kind)
            return
        rc = self._lib.cuptiActivityPopExternalCorrelationId_v2(
            self._h(), int(kind), ctypes.byref(self._last_id)
        )
        self._check(rc, "pop external id")

    def activity_get_num_dropped_records(self, context: int, stream: int, address: int) -> None:
        if self.handle is None:
            self._c.activity_get_num_dropped_records(context, stream, address)
            return
        rc = self._lib.cuptiActivityGetNumDroppedRecords_v2(
            self._h(), ctypes.c_void_p(context or None), ctypes.c_uint32(stream),
            ctypes.c_void_p(address),
        )  # fmt: skip
        self._check(rc, "dropped records")

    def activity_enable_driver_api(self, cbid: int, enable: int) -> None:
        if self.handle is None:
            self._c.activity_enable_driver_api(cbid, enable)
            return
        rc = self._lib.cuptiActivityEnableDriverApi_v2(
            self._h(), ctypes.c_uint32(cbid), ctypes.c_uint8(enable)
        )
        self._check(rc, "driver API marker")

    def _h(self) -> ctypes.c_void_p:
        return self._hv

    @staticmethod
    def _check(rc: int, what: str) -> None:
        if rc != 0:
            raise RuntimeError(f"CUPTI per-subscriber {what} returned {rc}")


class CuptiAccess:
    """Which CUPTI API a backend holds, and the raw buffers registered through it: a
    subscriber of the shared API where granted (``mode`` ``auto`` or ``shared``), else
    the single-subscriber one (``single``, or where the shared one is refused).

    ``lib``: the libcupti to make the subscriber's calls on (None: the one cupti-python
    loaded, ``loaded_libcupti``; False: none, so never shared)."""

    def __init__(
        self,
        module: Any,
        *,
        mode: str,
        lib: Any,
        buffer_size: int,
        on_bytes: Callable[[Any], None],
        register_fn: Callable[[], Any] = register_callbacks_function,
    ) -> None:
        if mode not in SUBSCRIBER_MODES:
            raise ValueError(f"subscriber={mode!r} is not one of {', '.join(SUBSCRIBER_MODES)}")
        self.module = module
        self.mode = mode
        self.shared: SharedCupti | None = None
        self._lib = lib
        self._buffer_size = buffer_size
        self._on_bytes = on_bytes
        self._register_fn = register_fn
        """``cuptiActivityRegisterCallbacks`` of the single API, looked up when needed."""

    @property
    def c(self) -> Any:
        """What the backend calls CUPTI through: the subscriber, or cupti-python."""
        return self.module if self.shared is None else self.shared

    @property
    def sharing(self) -> str:
        return "shared" if self.shared is not None and self.shared.subscribed else "single"

    def subscribe(self) -> None:
        """Subscribe where the mode and the library allow (``CuptiUnavailable`` where
        ``shared`` was asked for and is refused)."""
        if self.mode == "single":
            return
        try:
            lib = loaded_libcupti() if self._lib is None else self._lib
            if not lib:
                raise CuptiUnavailable("no libcupti of the per-subscriber API to call")
            shared = SharedCupti(self.module, lib)
            shared.subscribe()
        except (CuptiUnavailable, OSError, AttributeError) as e:
            if self.mode == "shared":
                raise CuptiUnavailable(f"shared CUPTI asked for ({SUBSCRIBER_ENV}): {e}") from e
            logger.debug("CUPTI not shared", extra={"reason": str(e)})
            return
        self.shared = shared

    def open(self, start: Callable[[], None], *, subscribe: bool) -> None:
        """Subscribe (where ``subscribe``: raw buffers are possible), then ``start`` the
        session; where no marker comes through the shared CUPTI (``auto``), the single
        API and ``start`` again."""
        if subscribe:
            self.subscribe()
        try:
            start()
        except CuptiUnavailable as e:
            if self.shared is None or self.mode == "shared":
                raise
            logger.info("shared CUPTI unusable here; one subscriber", extra={"reason": str(e)})
            self.single()
            start()

    def raw_buffers(self, wanted: bool) -> RawBuffers | None:
        """Raw buffer callbacks for the API held (None: cupti-python's record objects,
        which come through the single API alone)."""
        if self.shared is not None:
            return RawBuffers(
                self.shared.register_callbacks,
                self._buffer_size,
                self._on_bytes,
                per_subscriber=True,
            )
        register_fn = self._register_fn() if wanted else None
        if register_fn is None:
            if wanted:
                logger.info("raw CUPTI buffers unavailable; using cupti-python's record objects")
            return None
        return RawBuffers(register_fn, self._buffer_size, self._on_bytes)

    def single(self) -> None:
        """Leave the shared API for good (its self-check failed, or it is refused)."""
        shared, self.shared = self.shared, None
        if shared is not None and shared.subscribed:
            try:
                shared.unsubscribe()
            except RuntimeError as e:  # at shutdown too: never raised into the job
                logger.debug("CUPTI unsubscribe failed", extra={"error": repr(e)})

    def leave(self, kinds: tuple[Any, ...]) -> None:
        """Step aside for a single-subscriber profiler (torch's): it gets nothing while a
        subscriber exists, even one with its kinds off (H200, run 16). Our kinds are
        ours alone here, so switching them off first cuts no one's trace."""
        shared = self.shared
        if shared is None or not shared.subscribed:
            return
        for kind in kinds:
            with contextlib.suppress(Exception):
                shared.activity_disable(kind)
        shared.unsubscribe()

    def rejoin(self) -> bool:
        """After a profiler: subscribe again. False where CUPTI now refuses several
        subscribers (a single-subscriber session may leave it so): the single API from
        then on, whose raw buffers the caller registers (``raw_buffers``)."""
        shared = self.shared
        if shared is None or shared.subscribed:
            return True
        try:
            shared.subscribe()
            return True
        except CuptiUnavailable as e:
            logger.info("shared CUPTI not granted again; one subscriber", extra={"reason": str(e)})
        self.shared = None
        return False


__all__ = [
    "SUBSCRIBER_ENV",
    "SUBSCRIBER_MODES",
    "CuptiAccess",
    "SharedCupti",
    "SubscriberParams",
    "loaded_libcupti",
    "subscriber_mode_from_env",
]
