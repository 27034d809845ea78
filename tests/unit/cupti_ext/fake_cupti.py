"""CUPTI's activity API as cupti-python exposes it, simulated for a machine without a GPU.

Only the behaviour the backend relies on: one process-wide correlation counter; kernel
records only while CONCURRENT_KERNEL is enabled; driver-API records for callback ids
enabled alone (``per_api_alone``) or passed by the filter while the DRIVER kind is on,
each with an EXTERNAL_CORRELATION record per kind whose id stack is not empty; buffers
handed to the registered callbacks on flush (raw bytes through ctypes callbacks, or
cupti-python's record objects). Records use cupti-python's real dtypes.
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections import Counter
from typing import Any, ClassVar

import numpy as np
from buffers import LAYOUT
from cupti import cupti as real


class _Record:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class FakeCupti:
    ActivityKind = real.ActivityKind
    ExternalCorrelationKind = real.ExternalCorrelationKind
    driver_api_trace_cbid = real.driver_api_trace_cbid
    activity_kernel10_dtype = real.activity_kernel10_dtype
    activity_external_correlation_dtype = real.activity_external_correlation_dtype
    activity_api_dtype = real.activity_api_dtype
    activity_memset4_dtype = real.activity_memset4_dtype
    ActivityAttribute = real.ActivityAttribute

    def __init__(self) -> None:
        self.enabled: set[int] = set()
        self.buffer_sizes: list[int] = []
        """Size of each buffer the raw callbacks handed CUPTI."""
        # CUPTI's per-API filter (cuptiActivityEnableDriverApi); unset ids count as on
        # for the DRIVER kind and as off on their own.
        self.api_flags: dict[int, bool] = {}
        # Whether a per-API flag alone makes records. On the H200 it does only if set
        # before the CUDA context exists; False models a detector started after it.
        self.per_api_alone = True
        self.kind_filter: dict[int, bool] = {}
        self.stacks: dict[int, list[int]] = {}
        self.corr = 0
        self.records: list[bytes] = []
        self.raw: tuple[Any, Any] | None = None
        self.objects: tuple[Any, Any] | None = None
        self.dropped = 0
        self.calls: Counter[str] = Counter()
        self.finalized = 0
        self.kernels_launched = 0
        self.api_records: Counter[int] = Counter()
        self.stream_ids: dict[int, int] = {}
        self.has_context = True
        """Whether a CUDA context is current (memset markers need one)."""
        self.buffers_per_flush = 1
        self.deliver_after_s: float | None = None
        """Hand flushed buffers over on another thread this much later (None: at once,
        in the flushing thread)."""
        self.plain_flush_delivers = True
        """False: a flush that is not forced hands nothing over (a CUPTI that keeps its
        buffers until they are full, or until forced)."""
        self.flush_flags: list[int] = []
        self.attributes: dict[int, int] = {}
        """cuptiActivitySetAttribute's settings (one-byte values), by attribute."""
        self.late_attributes = 0
        """Attributes set after buffer callbacks were registered or a kind enabled
        (CUPTI: undefined behaviour)."""
        self.dirty_buffers = 0
        """Buffers handed to CUPTI not zeroed though it was told they would be."""
        self.markers_by_thread_s: float | None = None
        """Hand the other records over this much later on another thread, in a buffer
        asked for there (the flush hands over the kernels at once): a CUPTI that, after
        a flush, holds no buffer of ours and still has records to give."""
        self._held: list[tuple[int, int]] = []
        """Buffers CUPTI asked the raw callbacks for and holds (address, size)."""
        self.markers_late = False
        """Kernel records in buffers of their own, handed over before the others
        (markers): a flush that is not forced hands over the kernels alone and keeps
        the rest for the next flush; a forced one hands the kernels over first. As
        CUPTI may, with records of several kinds or streams in different buffers."""

    # --- the API surface the backend calls ------------------------------------------
    def get_timestamp(self) -> int:
        return 0

    def activity_enable(self, kind: int) -> None:
        self.calls["enable"] += 1
        self.calls[f"enable {int(kind)}"] += 1
        self.enabled.add(int(kind))

    def activity_disable(self, kind: int) -> None:
        self.calls["disable"] += 1
        self.calls[f"disable {int(kind)}"] += 1
        self.enabled.discard(int(kind))

    def activity_enable_driver_api(self, cbid: int, enable: int) -> None:
        # Seen on the H200: a flag set while the DRIVER kind is off does not filter it.
        driver_on = int(real.ActivityKind.DRIVER) in self.enabled
        (self.kind_filter if driver_on else self.api_flags)[int(cbid)] = bool(enable)

    def traces(self, cbid: int) -> bool:
        if int(real.ActivityKind.DRIVER) in self.enabled:
            return self.kind_filter.get(cbid, True)
        return self.per_api_alone and self.api_flags.get(cbid, False)

    @property
    def driver_apis(self) -> set[int]:
        """The driver API ids that would make a record now."""
        cbids = real.driver_api_trace_cbid
        return {int(m) for m in cbids if 0 < int(m) < int(cbids.SIZE) and self.traces(int(m))}

    def activity_push_external_correlation_id(self, kind: int, ext_id: int) -> None:
        self.stacks.setdefault(int(kind), []).append(ext_id)

    def activity_pop_external_correlation_id(self, kind: int) -> int:
        return self.stacks[int(kind)].pop()

    def activity_set_attribute(self, attr: int, size_addr: int, value_addr: int) -> None:
        size = ctypes.c_size_t.from_address(size_addr).value
        if size != 1:
            raise ValueError(f"attribute {int(attr)}: value size {size}, not 1")
        if self.raw is not None or self.objects is not None or self.enabled:
            self.late_attributes += 1
        self.attributes[int(attr)] = ctypes.c_uint8.from_address(value_addr).value

    def activity_register_callbacks(self, requested: Any, completed: Any) -> None:
        self.objects, self.raw = (requested, completed), None

    def register_raw(self, requested: Any, completed: Any) -> int:
        self.raw, self.objects = (requested, completed), None
        self._held = []  # the old callbacks' buffers are theirs
        return 0

    def _put(self, record: bytes) -> None:
        self.records.append(record)
        self._hold()

    def _hold(self) -> None:
        """As CUPTI does: a buffer is asked for when a record needs one, and held (the
        callbacks' owner sees it in use) until a flush hands it back."""
        if self.raw is not None and not self._held:
            self._held.append(self._request())

    def _request(self) -> tuple[int, int]:
        assert self.raw is not None
        buf, size, maxr = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        self.raw[0](ctypes.byref(buf), ctypes.byref(size), ctypes.byref(maxr))
        self.buffer_sizes.append(size.value)
        assert buf.value is not None
        if self.attributes.get(int(real.ActivityAttribute.ATTR_ZEROED_OUT_BUFFER)):
            if ctypes.string_at(buf.value, size.value).count(0) != size.value:
                self.dirty_buffers += 1
        else:  # CUPTI zeroes the buffer itself
            ctypes.memset(buf.value, 0, size.value)
        return buf.value, size.value

    def activity_flush_all(self, flag: int) -> None:
        self.flush_flags.append(flag)
        if not self.records or (not flag and not self.plain_flush_delivers):
            return
        records, self.records = self.records, []
        if self.markers_by_thread_s is not None:
            kernels = [r for r in records if _kind(r) == LAYOUT.kernel_kind]
            others = b"".join(r for r in records if _kind(r) != LAYOUT.kernel_kind)
            if kernels:
                self._hand_over(kernels)
            if others:
                # Asked for and handed over on CUPTI's thread, after the flush returned.
                threading.Timer(self.markers_by_thread_s, self._deliver, (others,)).start()
            return
        if self.markers_late:
            kernels = [r for r in records if _kind(r) == LAYOUT.kernel_kind]
            others = [r for r in records if _kind(r) != LAYOUT.kernel_kind]
            if not flag:
                self.records = others  # for the next flush
                others = []
            for part in (kernels, others):
                if part:
                    self._hand_over(part)
            if self.records:
                self._hold()
            return
        self._hand_over(records)

    def _hand_over(self, records: list[bytes]) -> None:
        # As on the H200, a flush may hand over several partial buffers.
        k = max(1, min(self.buffers_per_flush, len(records)))
        cut = [len(records) * i // k for i in range(k + 1)]
        for data in (b"".join(records[a:b]) for a, b in itertools.pairwise(cut)):
            # The buffer is chosen now, in the flushing thread: CUPTI holds it (asked
            # for earlier, or now for a further part) until it reaches the callback.
            buffer = None
            if self.raw is not None:
                buffer = self._held.pop() if self._held else self._request()
            if self.deliver_after_s is not None:
                # As CUPTI may: the buffer reaches the callback on its own thread, later.
                threading.Timer(self.deliver_after_s, self._deliver, (data, buffer)).start()
            else:
                self._deliver(data, buffer)

    def _deliver(self, data: bytes, buffer: tuple[int, int] | None = None) -> None:
        if self.raw is not None:
            done = self.raw[1]
            buf, size = buffer if buffer is not None else self._request()
            assert size >= len(data)
            ctypes.memmove(buf, data, len(data))
            done(None, 0, buf, size, len(data))
        elif self.objects is not None:
            block = ctypes.create_string_buffer(data, len(data))
            base = ctypes.addressof(block)
            offsets = _offsets(data)
            self.objects[1]([_Record(base + o) for o in offsets])
        else:
            self.dropped += len(_offsets(data))

    def activity_get_num_dropped_records(self, ctx: int, stream: int, addr: int) -> None:
        ctypes.c_size_t.from_address(addr).value = self.dropped
        self.dropped = 0

    def finalize(self) -> None:
        self.finalized += 1
        self.enabled.clear()
        self.api_flags.clear()
        self.kind_filter.clear()
        self.raw = self.objects = None

    # --- what the GPU and the driver would do -------------------------------------------
    def driver_call(self, cbid: int) -> None:
        self.corr += 1
        if not self.traces(cbid):
            return
        self.api_records[cbid] += 1
        a = np.zeros(1, dtype=LAYOUT.api_dtype)
        a["kind"], a["cbid"], a["correlation_id"] = LAYOUT.driver_kind, cbid, self.corr
        self._put(a.tobytes())
        if LAYOUT.external_kind in self.enabled:
            for kind, stack in self.stacks.items():
                if stack:
                    e = np.zeros(1, dtype=LAYOUT.external_dtype)
                    e["kind"], e["external_kind"] = LAYOUT.external_kind, kind
                    e["external_id"], e["correlation_id"] = stack[-1], self.corr
                    self._put(e.tobytes())

    def get_stream_id_ex(self, context: int, stream: int, per_thread: int) -> int:
        return self.stream_ids.setdefault(stream, 100 + len(self.stream_ids))

    def memset(self, stream: int, value: int, nbytes: int) -> None:
        """An async memset: a MEMSET record while that kind is on."""
        self.corr += 1
        if LAYOUT.memset_kind not in self.enabled:
            return
        m = np.zeros(1, dtype=LAYOUT.memset_dtype)
        m["kind"], m["correlation_id"], m["value"] = LAYOUT.memset_kind, self.corr, value
        m["bytes"], m["stream_id"] = nbytes, self.get_stream_id_ex(0, stream, 0)
        m["start"], m["end"] = 1000, 1100
        self._put(m.tobytes())

    def launch(self, name_ptr: int, dur_ns: int = 1000, threads: int = 512) -> None:
        self.kernels_launched += 1
        # The launch is a driver call too: traced if the DRIVER kind is on unfiltered.
        self.driver_call(int(real.driver_api_trace_cbid.cuLaunchKernel))
        if LAYOUT.kernel_kind not in self.enabled:
            return
        k = np.zeros(1, dtype=LAYOUT.kernel_dtype)
        k["kind"], k["correlation_id"], k["name"] = LAYOUT.kernel_kind, self.corr, name_ptr
        k["start"], k["end"] = 1000, 1000 + dur_ns
        k["grid_x"], k["grid_y"], k["grid_z"] = threads // 128, 1, 1
        k["block_x"], k["block_y"], k["block_z"] = 128, 1, 1
        self._put(k.tobytes())


def _kind(record: bytes) -> int:
    return int(np.frombuffer(record[:4], np.int32)[0])


def _offsets(data: bytes) -> list[int]:
    sizes = {
        LAYOUT.kernel_kind: LAYOUT.kernel_dtype.itemsize,
        LAYOUT.external_kind: LAYOUT.external_dtype.itemsize,
        LAYOUT.driver_kind: LAYOUT.api_dtype.itemsize,
        LAYOUT.memset_kind: LAYOUT.memset_dtype.itemsize,
    }
    out, o = [], 0
    while o < len(data):
        out.append(o)
        o += sizes[int(np.frombuffer(data[o : o + 4], np.int32)[0])]
    return out


class FakeLibcuda:
    """The driver entry points the backend uses as section markers."""

    def __init__(self, cupti: FakeCupti, traced: tuple[str, ...] = ("cuDriverGetVersion",)):
        self._cupti = cupti
        self._traced = traced
        self.called: Counter[str] = Counter()
        self.failing_memsets: set[int] = set()
        """Which cuMemsetD32Async calls (counted from 1) return an error."""

    _OUT_VALUES: ClassVar[dict[str, int]] = {
        "cuStreamCreate": 0x5700,
        "cuMemAlloc_v2": 0x7F0000001000,
    }

    def __getattr__(self, name: str) -> Any:
        cupti, cbid = self._cupti, int(getattr(real.driver_api_trace_cbid, name))
        traced = name in self._traced
        called = self.called
        out_values = dict(self._OUT_VALUES, cuCtxGetCurrent=0xC7 if cupti.has_context else 0)
        if name == "cuMemsetD32Async":

            class Memset:
                argtypes: Any = None
                restype: Any = None

                def __call__(self, buffer: int, value: int, words: int, stream: int) -> int:
                    called[name] += 1
                    if called[name] in failing:
                        return 1  # CUDA_ERROR_INVALID_VALUE
                    cupti.memset(stream, value, words * 4)
                    return 0

            failing = self.failing_memsets
            return Memset()

        class Entry:
            argtypes: Any = None
            restype: Any = None

            def __call__(self, *args: Any) -> int:
                called[name] += 1
                if name in out_values:  # the call's output parameter, passed by reference
                    args[0]._obj.value = out_values[name]
                if traced:
                    cupti.driver_call(cbid)
                else:
                    cupti.corr += 1
                return 0

        return Entry()


# --- driving a backend over the simulated CUPTI ------------------------------------------


def step(b: Any, fake: FakeCupti, section: str, ptr: int, n: int) -> None:
    """One section entry of ``b`` launching ``n`` kernels named by ``ptr``."""
    b.start(section)
    for _ in range(n):
        fake.launch(ptr)
    b.stop(section)


def short(stats: Any) -> dict[str, int]:
    return {k.split("~")[0]: s.num for k, s in stats.items()}


def per_section(window: Any) -> dict[str, dict[str, int]]:
    return {s: short(k) for s, k in window.sections.items()}


class FakeLibcupti:
    """The per-subscriber Activity API (CUPTI 13.4's ``*_v2`` calls) over a FakeCupti,
    called as ctypes calls them: handles as ``c_void_p``, results through ``byref``.
    ``grant`` False: ``cuptiSubscribe_v2`` refuses several subscribers (error 39), as
    CUPTI does while a single-subscriber session holds it. Calls are counted by name."""

    def __init__(self, cupti: FakeCupti) -> None:
        self._cupti = cupti
        self.grant = True
        self.subscribed: set[int] = set()
        self.calls: Counter[str] = Counter()
        self._next = 100

    def _live(self, handle: Any) -> bool:
        return getattr(handle, "value", handle) in self.subscribed

    def cuptiSubscribe_v2(self, handle: Any, _cb: Any, _data: Any, params: Any) -> int:  # noqa: N802 - CUPTI's C names
        self.calls["subscribe"] += 1
        if not self.grant:
            return 39  # CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
        self._next += 1
        handle._obj.value = self._next
        self.subscribed.add(self._next)
        return 0

    def cuptiUnsubscribe(self, handle: Any) -> int:  # noqa: N802 - CUPTI's C names
        self.calls["unsubscribe"] += 1
        self.subscribed.discard(handle.value)
        return 0

    def cuptiActivityGetAttribute_v2(self, handle: Any, _attr: int, _size: Any, value: Any) -> int:  # noqa: N802 - CUPTI's C names
        value._obj.value = 1 if self._live(handle) else 0
        return 0

    def cuptiActivityRegisterCallbacks_v2(self, handle: Any, requested: Any, completed: Any) -> int:  # noqa: N802 - CUPTI's C names
        self.calls["register"] += 1
        if not self._live(handle):
            return 1
        return self._cupti.register_raw(
            lambda b, s, m: requested(b, s, m, None),
            lambda _ctx, _stream, buf, size, valid: completed(buf, size, valid, None),
        )

    def cuptiActivityEnable_v2(self, handle: Any, kind: int, _config: Any) -> int:  # noqa: N802 - CUPTI's C names
        self.calls["enable"] += 1
        self._cupti.activity_enable(kind)
        return 0 if self._live(handle) else 1

    def cuptiActivityDisable_v2(self, handle: Any, kind: int, _config: Any) -> int:  # noqa: N802 - CUPTI's C names
        self.calls["disable"] += 1
        self._cupti.activity_disable(kind)
        return 0 if self._live(handle) else 1

    def cuptiActivityPushExternalCorrelationId_v2(self, _h: Any, kind: int, ext_id: Any) -> int:  # noqa: N802 - CUPTI's C names
        self._cupti.activity_push_external_correlation_id(kind, ext_id.value)
        return 0

    def cuptiActivityPopExternalCorrelationId_v2(self, _h: Any, kind: int, last: Any) -> int:  # noqa: N802 - CUPTI's C names
        last._obj.value = self._cupti.activity_pop_external_correlation_id(kind)
        return 0

    def cuptiActivityGetNumDroppedRecords_v2(  # noqa: N802
        self, _h: Any, _ctx: Any, _stream: Any, address: Any
    ) -> int:
        self.calls["dropped"] += 1
        self._cupti.activity_get_num_dropped_records(0, 0, address.value)
        return 0

    def cuptiActivityEnableDriverApi_v2(self, _h: Any, cbid: Any, enable: Any) -> int:  # noqa: N802 - CUPTI's C names
        self._cupti.activity_enable_driver_api(cbid.value, enable.value)
        return 0
