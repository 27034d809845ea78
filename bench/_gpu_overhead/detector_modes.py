"""The detector modes: a detector's ``detection_section`` around each step, ours with
its settings per mode (interval 1 or defaults, driver markers, smaller buffers,
records counted not decoded, against the floor in the same process) and NVRx's. Apart
from the bare modes because these run a whole detector, whose private parts they reach
into to set a block up as a running job would have it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from .cupti_calls import cupti_flush, cupti_flush_forced
from .mode import Mode
from .workloads import Step


class SectionMode(Mode):
    """A detector's ``detection_section('step', profile_cuda=True)`` around each step
    (ours and NVRx's share the API, so they are timed the same way)."""

    det: Any

    def wrap(self, step: Step) -> Step:
        section = self.det.detection_section

        def wrapped() -> None:
            with section("step", profile_cuda=True):
                step()

        return wrapped

    flush = staticmethod(cupti_flush)


class Ours(SectionMode):
    def __init__(
        self,
        name: str,
        sample_every: int | None,
        marker: str = "auto",
        decode: bool = True,
        buffer_kib: int | None = None,
        *,
        forced_flush: bool = False,
        quiet_fence: bool = True,
        attribution: str | None = None,
    ) -> None:
        self.name = name
        self.sample_every = sample_every
        self.marker = marker
        self.decode = decode
        self.buffer_kib = buffer_kib
        self.forced_flush = forced_flush
        self.quiet_fence = quiet_fence
        self.attribution = attribution

    def setup(self) -> None:
        from pacekeeper.cupti_ext.cupti_backend import CuptiBackend
        from pacekeeper.detector import Detector

        # A class setting, not a user's: the same detector with and without the
        # report's quiet fence, side by side in one run.
        CuptiBackend.quiet_fence = self.quiet_fence

        os.environ["PACEKEEPER_KERNEL_MARKER"] = self.marker
        os.environ["PACEKEEPER_REPORT_FLUSH"] = "forced" if self.forced_flush else "plain"
        if self.attribution is None:  # the detector's default (gated)
            os.environ.pop("PACEKEEPER_KERNEL_ATTRIBUTION", None)
        else:
            os.environ["PACEKEEPER_KERNEL_ATTRIBUTION"] = self.attribution
        if self.buffer_kib is not None:
            os.environ["PACEKEEPER_CUPTI_BUFFER_KIB"] = str(self.buffer_kib)
        else:
            os.environ.pop("PACEKEEPER_CUPTI_BUFFER_KIB", None)
        if self.sample_every is not None:
            os.environ["PACEKEEPER_KERNEL_SAMPLE_EVERY"] = str(self.sample_every)
        else:
            os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
        self.det = Detector
        if self.sample_every is None:
            Detector.initialize(report_time_interval=3600, kernel_timing="cupti")
        else:
            Detector.initialize(
                report_time_interval=3600, profiling_interval=1, kernel_timing="cupti"
            )
        assert Detector.kernel_timing_backend() == "cupti", Detector.kernel_timing_backend()
        self.records_seen = 0
        if not self.decode:
            raw = Detector._backend._raw
            assert raw is not None, "raw buffers unavailable"
            size = 16  # the smallest record: a rough count is all this mode needs

            def count(view: Any) -> None:
                self.records_seen += len(view) // size

            raw._on_bytes = count

    flush = staticmethod(cupti_flush_forced)
    warm_a = False
    """Whether A blocks trace too, and so get the same warm-up as B blocks."""

    def warm(self, b_block: bool) -> None:
        # The first marker after a forced flush takes 1-1.5 ms (runs H-K): a job pays
        # that once per report, but the bench flushes around every block. One fence
        # marker before the clock starts pays it where a block does not count it.
        if b_block or self.warm_a:
            from pacekeeper.cupti_ext.attribution import encode_external_id

            backend = self.det._backend
            backend._emit(encode_external_id(0, 0, False), backend._marker)

    def block_start(self) -> None:
        # At interval 1 a running job has records on when an entry starts (kept on from
        # the last one; switched on once per report window): switch them on here, out
        # of the timed region, as A blocks of the *_vs_bare modes do for the floor.
        backend = self.det._backend
        if backend._keep_on and backend.sample_every == 1:
            backend._gate(True)

    def block_end(self) -> None:
        # A B block ends the traced phase: records off, so the next block is plain.
        self.det._backend._ungate()

    def teardown(self) -> None:
        # One window for the whole run: a report per block would add a fence and a
        # forced flush NVRx's blocks do not pay (the report's cost is timed apart).
        if self.decode:
            self.records_seen += self.det._backend.collect().records
        self.det.shutdown()
        os.environ.pop("PACEKEEPER_KERNEL_SAMPLE_EVERY", None)
        os.environ.pop("PACEKEEPER_KERNEL_MARKER", None)
        os.environ.pop("PACEKEEPER_CUPTI_BUFFER_KIB", None)
        os.environ.pop("PACEKEEPER_KERNEL_ATTRIBUTION", None)


class OursVsBare(Ours):
    """ours_i1 against the floor in the same process: A blocks trace every kernel
    through the backend's own buffer callbacks with records only counted (bare_raw),
    B blocks run the detector. The difference is what we add above bare tracing."""

    warm_a = True

    def __init__(self) -> None:
        super().__init__("ours_i1_vs_bare", 1)

    def setup(self) -> None:
        super().setup()
        from pacekeeper.detector import Detector

        self.raw = Detector._backend._raw
        assert self.raw is not None, "raw buffers unavailable"
        self.ours = self.raw._on_bytes
        from cupti import cupti

        self.c = cupti
        self.count = 0
        size = int(cupti.activity_kernel10_dtype.itemsize)

        def count(view: Any) -> None:
            self.count += len(view) // size

        self.counter: Callable[[Any], None] = count

    def a_block_start(self) -> None:
        self.raw._on_bytes = self.counter
        self.c.activity_enable(self.c.ActivityKind.CONCURRENT_KERNEL)

    def a_block_end(self) -> None:
        # The block's forced flush (timed) has handed its records to the counter.
        self.c.activity_disable(self.c.ActivityKind.CONCURRENT_KERNEL)
        self.raw._on_bytes = self.ours


class OursSwitchedVsBare(OursVsBare):
    """ours_i1_vs_bare with kernel records switched on and off around every entry (the
    backend keeps them on between consecutive traced entries by default)."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "ours_switched_vs_bare"

    def setup(self) -> None:
        super().setup()
        self.det._backend._keep_on = False


class Nvrx(SectionMode):
    name = "nvrx"

    def setup(self) -> None:
        from nvidia_resiliency_ext.attribution import straggler

        self.det = straggler.Detector
        self.det.initialize(report_time_interval=3600, profiling_interval=1)

    def teardown(self) -> None:
        self.det.shutdown()
