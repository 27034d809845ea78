"""Every kernel launched in a traced section is counted once, whatever order CUPTI
hands its buffers over in: attributed, or held for markers still to come, never ruled
outside a section because its markers are late (issue 19: on the H200, pinned to one
core with an NCCL group, 61% of a window's kernels were ruled outside that way)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from buffers import LAYOUT, OURS, as_buffer, cut_and_shuffle, kernels, marker
from fake_cupti import step

from pacekeeper.cupti_ext.cupti_backend import CuptiBackend
from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
from pacekeeper.cupti_ext.records import decode_span, record_offsets
from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

STEP_KERNELS = 20
STEPS = 40


@pytest.mark.parametrize("flush_every", [0, 7])
def test_kernels_handed_over_before_their_markers_are_held_not_ruled_outside(
    backend, fake, names, flush_every
):
    # Kernel records come in buffers of their own, before the markers' (and CUPTI
    # hands a full buffer over every few steps, its markers only later).
    fake.markers_late = True
    for _ in range(3):
        for i in range(STEPS):
            step(backend, fake, "step", names["gemm"], STEP_KERNELS)
            if flush_every and i % flush_every == flush_every - 1:
                fake.activity_flush_all(0)
        w = backend.collect()
        assert (w.records, w.unattributed_records) == (STEPS * STEP_KERNELS, 0)
        assert (w.held_records, w.dropped_records, w.lost_markers) == (0, 0, 0)


def test_a_report_inside_a_section_holds_its_kernels_for_the_next_window(backend, fake, names):
    fake.markers_late = True
    backend.start("step")
    for _ in range(5):
        fake.launch(names["gemm"])
    first = backend.collect()
    assert (first.records, first.held_records, first.unattributed_records) == (0, 5, 0)
    backend.stop("step")
    second = backend.collect()
    assert (second.records, second.held_records, second.unattributed_records) == (5, 0, 0)


def test_kernels_between_sections_are_counted_outside_once_the_markers_are_in(backend, fake, names):
    fake.markers_late = True
    step(backend, fake, "step", names["gemm"], 3)
    for _ in range(4):
        fake.launch(names["relu"])  # records kept on at interval 1: traced, outside
    fake.activity_flush_all(0)
    step(backend, fake, "step", names["gemm"], 3)
    w = backend.collect()
    assert (w.records, w.unattributed_records, w.held_records) == (6, 4, 0)


def test_markers_that_never_come_are_given_up_at_the_report_and_warned_of(
    backend, fake, names, marker, caplog
):
    caplog.set_level(logging.WARNING)
    fake.markers_late = True
    step(backend, fake, "step", names["gemm"], 3)
    fake.activity_flush_all(0)  # the kernels; the markers are still in CUPTI's hands
    fake.records = []  # and are lost there
    step(backend, fake, "step", names["gemm"], 2)
    w = backend.collect()
    assert (w.records, w.unattributed_records, w.held_records) == (2, 3, 0)
    assert w.lost_markers == 1  # the first entry's: its kernels count outside
    assert "kernels lost" in caplog.text
    step(backend, fake, "step", names["gemm"], 2)
    assert backend.collect().records == 2  # nothing held for the lost entry


def test_incomplete_kernel_records_count_as_dropped(backend, fake, names, caplog):
    caplog.set_level(logging.WARNING)
    backend.start("step")
    fake.launch(names["gemm"])
    fake.launch(names["gemm"], dur_ns=-1000)  # still running when a flush was forced
    backend.stop("step")
    w = backend.collect()
    assert (w.records, w.dropped_records) == (1, 1)
    assert "kernel records dropped" in caplog.text


def _entries(rng: np.random.Generator, n: int) -> tuple[list[list[bytes]], int, int]:
    """Records of ``n`` entries (some nested) cut into buffers and handed over in any
    order; (buffers, entries marked, kernels inside entries)."""
    records: list[bytes] = []
    corr, serial, inside = 10, 0, 0
    for _ in range(n):
        stack = []
        for _ in range(int(rng.integers(1, 3))):
            serial += 1
            stack.append(serial)
            records.append(marker(serial, serial % 3, False, corr))
            corr += 1
            for _ in range(int(rng.integers(0, 6))):
                records.append(kernels([corr], name_ptr=1))
                corr += 1
                inside += 1
        for s in reversed(stack):
            records.append(marker(s, s % 3, True, corr))
            corr += 1
        if rng.random() < 0.3:
            records.append(kernels([corr], name_ptr=2))
            corr += 1
    buffers = cut_and_shuffle(rng, records, int(rng.integers(1, 8)))
    rng.shuffle(buffers)  # type: ignore[arg-type]  # and handed over in any order
    return buffers, serial, inside


@pytest.mark.parametrize("seed", range(40))
def test_every_kernel_inside_an_entry_is_attributed_whatever_the_buffer_order(seed):
    rng = np.random.default_rng(seed)
    buffers, marked, inside = _entries(rng, int(rng.integers(1, 15)))
    b = KernelWindowBuilder(OURS, keys=KernelKeyTable(resolve_name=lambda p: f"_Z{p}kv"))
    b.book.sent = lambda: marked
    for part in buffers:
        if part:
            raw = as_buffer(*part)
            offsets, _ = record_offsets(raw, LAYOUT)
            b.add(decode_span(raw, offsets, LAYOUT), len(offsets))
    b.settle(marked)
    w = b.take(["a", "b", "c"])
    assert (w.records, w.held_records, w.lost_markers) == (inside, 0, 0)


def test_a_backend_tells_its_window_builder_how_many_entries_it_marked(backend, fake, names):
    assert isinstance(backend, CuptiBackend)
    step(backend, fake, "step", names["gemm"], 1)
    step(backend, fake, "step", names["gemm"], 1)
    assert backend._builder.book.sent is not None
    assert backend._builder.book.sent() == 2
