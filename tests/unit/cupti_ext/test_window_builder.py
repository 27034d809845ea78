"""The CUPTI backend's core: decoded buffers in, one bounded KernelWindow out."""

from __future__ import annotations

from buffers import LAYOUT, OURS, as_buffer, kernels, marker

from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
from pacekeeper.cupti_ext.records import decode_span, record_offsets
from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

NAMES = {1: "_Z4gemmv", 2: "_Z4reluv", 3: "ncclDevKernel_AllReduce_Sum_f32"}


def builder(**kw) -> KernelWindowBuilder:
    return KernelWindowBuilder(OURS, keys=KernelKeyTable(resolve_name=NAMES.__getitem__), **kw)


def feed(b: KernelWindowBuilder, *parts: bytes) -> None:
    raw = as_buffer(*parts)
    offsets, whole = record_offsets(raw, LAYOUT)
    assert whole
    b.add(decode_span(raw, offsets, LAYOUT), len(offsets))


def names(window_part) -> dict[str, int]:
    return {k.split("~")[0]: s.num for k, s in window_part.items()}


def test_two_interleaved_sections_get_their_own_kernels_and_outsiders_are_left_out():
    b = builder()
    feed(
        b,
        marker(1, 0, False, 10),
        kernels([11, 12], name_ptr=1),
        marker(1, 0, True, 13),
        kernels([14], name_ptr=2),  # launched between sections
        marker(2, 1, False, 20),
        kernels([21, 22, 23], name_ptr=2),
        marker(2, 1, True, 24),
    )
    w = b.take(["forward", "backward"])
    assert names(w.sections["forward"]) == {"gemm": 2}
    assert names(w.sections["backward"]) == {"relu": 3}
    assert names(w.kernels) == {"gemm": 2, "relu": 3}
    assert w.records == 5 and w.unattributed_records == 1


def test_communication_kernels_are_counted_but_left_out_of_every_statistic():
    b = builder()
    feed(
        b,
        marker(1, 0, False, 10),
        kernels([11], 1),
        kernels([12], 3, dur_ns=700),
        marker(1, 0, True, 13),
        kernels([14], 3, dur_ns=9_000),  # outside every section: neither counted nor timed
    )
    w = b.take(["step"])
    assert names(w.kernels) == {"gemm": 1}
    assert names(w.sections["step"]) == {"gemm": 1}
    assert w.comm_records == 1
    # Their time is the GPU side of the wait for peers (waitShare).
    assert w.comm_ns == 700
    assert b.take(["step"]).comm_ns == 0  # a window's sum starts again


def test_kernels_arriving_before_their_exit_marker_are_held_then_counted_once():
    b = builder()
    feed(b, marker(1, 0, False, 10), kernels([11, 12], 1))
    assert b.pending_records == 2
    feed(b, marker(1, 0, True, 13))
    w = b.take(["step"])
    assert w.records == 2 and names(w.kernels) == {"gemm": 2}


def test_late_kernel_records_count_in_the_next_window():
    b = builder()
    feed(b, marker(1, 0, False, 10), kernels([11], 1), marker(1, 0, True, 13))
    first = b.take(["step"])
    feed(b, kernels([12], 1))  # completed after the report's flush
    second = b.take(["step"])
    assert first.records == 1 and second.records == 1


def test_held_kernels_beyond_the_bound_are_dropped_and_reported():
    b = builder(max_pending_records=3)
    feed(b, marker(1, 0, False, 10), kernels(list(range(11, 16)), 1))
    assert b.pending_records == 3
    w = b.take(["step"])
    assert w.dropped_records == 2


def test_fence_markers_are_counted_and_never_become_sections():
    b = builder()
    feed(b, marker(0, 0, False, 5), kernels([6], 1))
    assert b.fences_seen == 1
    w = b.take(["step"])
    assert w.sections == {} and w.unattributed_records == 1


def test_other_tools_external_ids_are_ignored():
    b = builder()
    other = OURS - 1
    feed(b, marker(1, 0, False, 10, kind=other), kernels([11], 1), marker(1, 0, True, 12, other))
    w = b.take(["step"])
    assert w.records == 0 and w.unattributed_records == 1


def test_a_window_is_empty_after_it_was_taken():
    b = builder()
    feed(b, marker(1, 0, False, 10), kernels([11], 1), marker(1, 0, True, 13))
    b.take(["step"])
    w = b.take(["step"])
    assert w.kernels == {} and w.records == 0 and w.dropped_records == 0


def test_without_section_statistics_sections_still_decide_what_counts():
    def run(section_stats: bool):
        b = KernelWindowBuilder(
            OURS,
            keys=KernelKeyTable(resolve_name=NAMES.__getitem__),
            section_stats=section_stats,
        )
        feed(
            b,
            marker(1, 0, False, 10),
            kernels([11, 12], name_ptr=1),
            marker(1, 0, True, 13),
            kernels([14], name_ptr=2),  # outside every entry
            marker(2, 1, False, 20),
            kernels([21], name_ptr=2),
            kernels([22], name_ptr=3),
            marker(2, 1, True, 24),
        )
        return b.take(["forward", "backward"])

    full, lean = run(True), run(False)
    assert lean.sections == {} and set(full.sections) == {"forward", "backward"}
    assert lean.kernels == full.kernels and names(lean.kernels) == {"gemm": 2, "relu": 1}
    assert (lean.records, lean.comm_records, lean.unattributed_records) == (3, 1, 1)
