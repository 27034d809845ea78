"""The bare modes: CUPTI kernel tracing with records only counted, no detector: the
floor our cost is measured above (``bare_raw``, ``bare_cupti``), and what switching
records on and off and the memset markers cost at the CUPTI and driver level
(``bare_toggle``, ``bare_toggle_memset_kind``, ``bare_markers``, ``toggle_vs_bare``).
Apart from the detector modes because none of these touch the detector."""

from __future__ import annotations

from typing import Any

from .cupti_calls import cupti_flush_forced, free_memset, release_cupti
from .mode import Mode
from .workloads import Step


class BareTracing(Mode):
    """CUPTI kernel tracing on for whole B blocks, records only counted: the floor."""

    c: Any

    def block_start(self) -> None:
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def block_end(self) -> None:
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)

    flush = staticmethod(cupti_flush_forced)

    def teardown(self) -> None:
        release_cupti(self.c)


class BareRaw(BareTracing):
    name = "bare_raw"

    def setup(self) -> None:
        from cupti import cupti

        from pacekeeper.cupti_ext.cupti_backend import (
            BUFFER_BYTES,
            RawBuffers,
            register_callbacks_function,
        )

        self.c = cupti
        cupti.get_timestamp()
        self.count = 0
        size = int(cupti.activity_kernel10_dtype.itemsize)

        def on_bytes(raw: Any) -> None:
            self.count += len(raw) // size

        register_fn = register_callbacks_function()
        assert register_fn is not None, "cupti-python exposes no cuptiActivityRegisterCallbacks"
        self.raw = RawBuffers(register_fn, BUFFER_BYTES, on_bytes)
        self.raw.register()


class BareToggle(BareRaw):
    """The floor, but kernel records switched on and off around every step, as a
    section does: what the switching itself costs."""

    name = "bare_toggle"

    def block_start(self) -> None:
        pass

    def block_end(self) -> None:
        pass

    def wrap(self, step: Step) -> Step:
        c, kind = self.c, self.c.ActivityKind.CONCURRENT_KERNEL

        def toggled() -> None:
            c.activity_enable(kind)
            step()
            c.activity_disable(kind)

        return toggled


class BareMarkers(BareToggle):
    """bare_toggle plus what our memset markers add at the CUPTI and driver level,
    without the detector: the MEMSET kind switched with the kernel kind, and (with
    ``memsets``) a marker memset on a private stream at each step's start and end."""

    def __init__(self, name: str, memsets: bool) -> None:
        self.name = name
        self.memsets = memsets

    def setup(self) -> None:
        super().setup()
        import ctypes

        from pacekeeper.cupti_ext.cupti_backend import _memset_resources
        from pacekeeper.cupti_ext.markers import MARKER_WORDS

        self.res = _memset_resources(ctypes.CDLL("libcuda.so.1"))
        self.words = MARKER_WORDS

    def wrap(self, step: Step) -> Step:
        c, res, words, memsets = self.c, self.res, self.words, self.memsets
        kinds = (c.ActivityKind.CONCURRENT_KERNEL, c.ActivityKind.MEMSET)

        def marked() -> None:
            for k in kinds:
                c.activity_enable(k)
            if memsets:
                res.fn(res.buffer, 1, words, res.stream)
            step()
            if memsets:
                res.fn(res.buffer, 2, words, res.stream)
            for k in kinds:
                c.activity_disable(k)

        return marked

    def teardown(self) -> None:
        super().teardown()
        self.c.activity_disable(self.c.ActivityKind.MEMSET)
        free_memset(self.res)


class BareCupti(BareTracing):
    name = "bare_cupti"

    def setup(self) -> None:
        from cupti import cupti

        self.c = cupti
        self.count = 0

        def requested() -> tuple[int, int]:
            return 1 << 20, 0

        def completed(acts: Any) -> None:
            self.count += len(acts)

        cupti.activity_register_callbacks(requested, completed)


class ToggleVsBare(BareToggle):
    """A blocks: kernel records on for the whole block (bare_raw); B blocks: switched on
    and off around every step (bare_toggle). What switching costs, paired."""

    name = "toggle_vs_bare"

    def a_block_start(self) -> None:
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def a_block_end(self) -> None:
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)
