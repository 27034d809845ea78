"""The compiled record path (cupti_ext/_native.c) gives what the numpy path gives.

Both paths run in every test: decoding, kernel keys and statistics are compared on
the same inputs, including the awkward ones (truncated buffers, unknown kinds,
incomplete kernels, key overflow, refused groups).
"""

from __future__ import annotations

import dataclasses
import shutil
from typing import Any

import numpy as np
import pytest
from buffers import LAYOUT, OURS, as_buffer, cut_and_shuffle, kernels, marker
from hypothesis import given, settings
from hypothesis import strategies as st
from native_paths import WINDOW_NAMES, both, fresh_native, window_figures

from pacekeeper.cupti_ext import native
from pacekeeper.cupti_ext.kernel_keys import KernelKeyTable
from pacekeeper.cupti_ext.kernel_stats import RingStats
from pacekeeper.cupti_ext.records import DecodeScratch, decode_buffer, decode_span, record_offsets
from pacekeeper.cupti_ext.window_builder import KernelWindowBuilder

__all__ = ["fresh_native"]  # the fixture, used by every test here


def memset(corr: int, value: int, nbytes: int = 244, stream: int = 7) -> bytes:
    m = np.zeros(1, dtype=LAYOUT.memset_dtype)
    m["kind"], m["correlation_id"], m["value"] = LAYOUT.memset_kind, corr, value
    m["bytes"], m["stream_id"] = nbytes, stream
    return m.tobytes()


def assert_same_decoded(a: Any, b: Any) -> None:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if dataclasses.is_dataclass(x):
            assert_same_decoded(x, y)
        elif isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f.name
            assert np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def test_the_compiled_path_is_built_wherever_a_c_compiler_is(monkeypatch) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the numpy path is used")
    monkeypatch.delenv(native.NATIVE_ENV, raising=False)
    native.reset()
    lib = native.library()
    assert lib is not None
    assert native.layout_array(LAYOUT, lib) is not None  # this cupti-python's layout


def test_the_environment_switch_turns_the_compiled_path_off(monkeypatch) -> None:
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    native.reset()
    assert native.library() is None


_PART = st.one_of(
    st.tuples(st.just("k"), st.integers(1, 40), st.integers(-5, 5000), st.integers(1, 1 << 20)),
    st.tuples(st.just("m"), st.integers(0, 1 << 32 - 1), st.sampled_from([244, 4096])),
    st.tuples(st.just("x"), st.integers(1, 1000), st.booleans()),
)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(_PART, max_size=30),
    tail=st.sampled_from(["", "cut", "unknown", "odd"]),
)
def test_decoding_agrees_on_any_mix_of_records(parts, tail) -> None:
    chunks: list[bytes] = []
    corr = 1
    for p in parts:
        if p[0] == "k":
            # dur_ns <= 0 makes an incomplete kernel (end not after start).
            chunks.append(kernels(list(range(corr, corr + p[1])), dur_ns=p[2], threads=p[3]))
            corr += p[1]
        elif p[0] == "m":
            chunks.append(memset(corr, p[1] & 0xFFFFFFFF, p[2]))
            corr += 1
        else:
            chunks.append(marker(p[1], 3, p[2], corr))
            corr += 1
    if tail == "cut":
        chunks.append(kernels([corr])[:100])  # a record running past the end
    elif tail == "unknown":
        chunks.append(np.array([9999, 0], np.int32).tobytes() + kernels([corr]))
    elif tail == "odd":
        chunks.append(b"\x01\x02")
    raw = as_buffer(*chunks) if chunks else np.zeros(0, np.uint8)
    compiled, numpy_path = both(lambda: decode_buffer(raw, LAYOUT))
    assert compiled[1:] == numpy_path[1:]  # records walked, whole
    assert compiled[2] == (tail == "")
    assert_same_decoded(compiled[0], numpy_path[0])


def test_kernel_keys_agree_batch_by_batch_through_growth_and_overflow() -> None:
    rng = np.random.default_rng(3)
    batches = [
        (
            rng.integers(1, 400, 3000).astype(np.uint64),
            (1 << rng.integers(0, 20, 3000)).astype(np.int64),
        )
        for _ in range(6)
    ]

    def run() -> tuple[list[list[int]], list[str], int]:
        table = KernelKeyTable(200, resolve_name=lambda p: f"_Z6kernelILi{p}EEvv")
        ids = [table.lookup(name, threads).tolist() for name, threads in batches]
        return ids, list(table.keys), table.overflowed

    compiled, numpy_path = both(run)
    assert compiled == numpy_path
    assert compiled[2] > 0  # the bound was reached


def test_kernel_keys_agree_without_shape_buckets() -> None:
    name = np.array([5, 6, 5, 5, 9], np.uint64)
    threads = np.array([1, 1024, 4096, 0, 7], np.int64)

    def run() -> tuple[list[int], list[str]]:
        table = KernelKeyTable(bucket_shapes=False, resolve_name=lambda p: f"k{p}")
        return table.lookup(name, threads).tolist(), list(table.keys)

    compiled, numpy_path = both(run)
    assert compiled == numpy_path
    assert compiled[0] == [0, 1, 0, 0, 2]  # one key per name: launch sizes ignored


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 1000),
    ring=st.sampled_from([1, 4, 256]),
    max_groups=st.sampled_from([None, 3, 50]),
    masked=st.booleans(),
)
def test_statistics_agree_whatever_the_groups_masks_and_bounds(
    seed, ring, max_groups, masked
) -> None:
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(4):
        n = int(rng.integers(0, 600))
        groups = rng.integers(0, 40, n).astype(np.int64)
        dur = rng.integers(1, 10_000, n).astype(np.float64)
        use = rng.random(n) < 0.7 if masked else None
        base = int(rng.integers(0, 3)) << 32
        batches.append((groups, dur, base, use))

    # Windows end after some batches: rows and maps carry over resets.
    window_ends = {i for i in range(len(batches)) if rng.random() < 0.5} | {len(batches) - 1}

    def run() -> list[tuple[dict[int, Any], int]]:
        stats = RingStats(ring, max_groups=max_groups)
        windows = []
        for i, (groups, dur, base, use) in enumerate(batches):
            stats.add(groups, dur, base=base, use=use)
            if i in window_ends:
                windows.append((stats.snapshot(), stats.refused))
                stats.reset()
        return windows

    compiled_windows, numpy_windows = both(run)
    for (compiled, refused_c), (numpy_path, refused_n) in zip(
        compiled_windows, numpy_windows, strict=True
    ):
        assert refused_c == refused_n
        assert compiled.keys() == numpy_path.keys()
        for g, c in compiled.items():
            n = numpy_path[g]
            assert (c.num, c.median_ns, c.min_ns, c.max_ns) == (
                n.num,
                n.median_ns,
                n.min_ns,
                n.max_ns,
            )
            assert c.total_ns == n.total_ns  # integer nanoseconds: exact either way
            assert c.std_ns == pytest.approx(n.std_ns, rel=1e-9, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    ring=st.sampled_from([2, 3, 256]),
    max_section_groups=st.sampled_from([2, 8192]),
    max_pending=st.sampled_from([4, 1 << 20]),
    section_stats=st.booleans(),
    gated=st.booleans(),
)
def test_windows_agree_whatever_the_buffer_cuts_nesting_and_bounds(  # noqa: PLR0917
    seed, ring, max_section_groups, max_pending, section_stats, gated
) -> None:
    """The one-pass attribution and fold (pk_attribute_fold) against the numpy path,
    window by window: entries of three sections, some nested, kernels of four names
    (one a communication kernel) at two launch sizes, records cut into buffers at
    random and shuffled inside each (a marker may come after its kernels, an exit
    before its entry), windows taken at random points. Gated (records on inside traced
    entries alone), every kernel counts as inside and the markers are fences' alone."""
    rng = np.random.default_rng(seed)
    records: list[bytes] = []
    corr, serial = 10, 0
    for _ in range(int(rng.integers(1, 12))):
        stack = []
        for _ in range(int(rng.integers(1, 3))):  # an entry, maybe one nested in it
            serial += 1
            section = int(rng.integers(0, 3))
            stack.append((serial, section))
            records.append(marker(serial, section, False, corr))
            corr += 1
            for _ in range(int(rng.integers(0, 6))):
                records.append(
                    kernels(
                        [corr],
                        name_ptr=int(rng.integers(1, 5)),
                        dur_ns=int(rng.integers(1, 500)),
                        threads=int(rng.choice([256, 4096])),
                    )
                )
                corr += 1
        for s, section in reversed(stack):
            records.append(marker(s, section, True, corr))
            corr += 1
        if rng.random() < 0.3:  # a kernel outside every section
            records.append(kernels([corr], name_ptr=2))
            corr += 1
    buffers = cut_and_shuffle(rng, records, int(rng.integers(0, 5)))
    takes = {i for i in range(len(buffers)) if rng.random() < 0.3} | {len(buffers) - 1}
    compiled, numpy_path = both(
        lambda: _windows(
            buffers,
            takes,
            ring=ring,
            max_section_groups=max_section_groups,
            max_pending=max_pending,
            section_stats=section_stats,
            gated=gated,
        )
    )
    assert compiled == numpy_path


def _windows(
    buffers: list[list[bytes]],
    takes: set[int],
    *,
    ring: int = 256,
    max_section_groups: int = 8192,
    max_pending: int = 1 << 20,
    section_stats: bool = True,
    gated: bool = False,
) -> list[dict[str, Any]]:
    """Feed the buffers to a window builder; a window after each buffer in ``takes``."""
    b = KernelWindowBuilder(
        OURS,
        ring=ring,
        max_section_groups=max_section_groups,
        max_pending_records=max_pending,
        keys=KernelKeyTable(resolve_name=WINDOW_NAMES.__getitem__),
        section_stats=section_stats,
    )
    b.gated = gated
    windows = []
    for i, part in enumerate(buffers):
        if part:
            raw = as_buffer(*part)
            offsets, whole = record_offsets(raw, LAYOUT)
            assert whole
            b.add(decode_span(raw, offsets, LAYOUT), len(offsets))
        if i in takes:
            windows.append(window_figures(b.take(["a", "b", "c"])))
    return windows


def test_a_kernel_in_two_entries_of_one_section_across_a_report_counts_once_either_way():
    # Entry 2 (section 0) nests in entry 1 (section 0); entry 2 closes before a report,
    # entry 1 after it, and a kernel of both arrives after the report: it is inside
    # the retiring and the current list of the same section.
    buffers = [
        [marker(1, 0, False, 10), marker(2, 0, False, 11), marker(2, 0, True, 13)],
        [kernels([12], name_ptr=1), marker(1, 0, True, 14)],
    ]
    compiled, numpy_path = both(lambda: _windows(buffers, {0, 1}))
    assert compiled == numpy_path
    assert compiled[1]["sections"] == {"a": {"gemm~bd2a23/t9": (1, 50.0, 50.0, 50.0, 50.0)}}


def test_a_record_layout_the_c_code_does_not_read_falls_back_to_numpy(caplog) -> None:
    lib = native.library()
    if lib is None:
        pytest.skip("the compiled record path is not built here")
    fields = dict(LAYOUT.kernel_dtype.fields)
    fields["name"] = (np.dtype(np.int32), fields["name"][1])  # a future struct change
    changed = np.dtype(
        {
            "names": list(fields),
            "formats": [f[0] for f in fields.values()],
            "offsets": [f[1] for f in fields.values()],
            "itemsize": LAYOUT.kernel_dtype.itemsize,
        }
    )
    other = dataclasses.replace(LAYOUT, kernel_dtype=changed)
    assert native.layout_array(other, lib) is None
    assert "record layout is not the compiled path's" in caplog.text
    raw = as_buffer(kernels([1, 2]))
    decoded, records, whole = decode_buffer(raw, other)  # the numpy path, from dtypes
    assert records == 2 and whole and len(decoded.kernels.correlation_id) == 2


def test_a_reused_scratch_decodes_each_buffer_as_a_fresh_one_would() -> None:
    if native.library() is None:
        pytest.skip("the compiled record path is not built here")
    scratch = DecodeScratch()
    small = as_buffer(kernels([1, 2], name_ptr=5), memset(3, 9))
    large = as_buffer(*(kernels(list(range(i * 50, i * 50 + 50)), dur_ns=i + 1) for i in range(40)))
    for raw in (small, large, small):  # grows, then reuses the larger arrays
        reused = decode_buffer(raw, LAYOUT, scratch)
        assert reused[1:] == decode_buffer(raw, LAYOUT)[1:]
        assert_same_decoded(reused[0], decode_buffer(raw, LAYOUT)[0])
        for a in (reused[0].kernels.duration_ns, reused[0].memset_bytes):
            assert a.ctypes.data % 8 == 0  # every array 8-byte aligned in the block


def test_an_arrays_address_is_its_first_elements_whatever_the_array() -> None:
    a = np.arange(16, dtype=np.int64)
    read_only = np.frombuffer(b"abcdefgh", np.uint8)
    for x in (a, a[3:], a[:0], read_only, a.view(np.uint8)[8:]):
        assert native.ptr(x) == x.ctypes.data


_STAT_BATCHES = st.lists(
    st.lists(st.tuples(st.integers(0, 30), st.floats(1, 1e6)), max_size=60),
    min_size=1,
    max_size=4,
)


@settings(max_examples=80, deadline=None)
@given(_STAT_BATCHES, st.integers(1, 8))
def test_the_compiled_snapshot_reads_a_table_as_numpy_does(batches, ring) -> None:  # type: ignore[no-untyped-def]
    # The same table read both ways, so equal to the last bit: up to 31 groups (both
    # sides of the numpy path's FEW_GROUPS), rings that wrap, rows of past windows.
    lib = native.library()
    assert lib is not None, "the compiled record path is not built"
    stats = RingStats(ring)
    for batch in batches:
        stats.reset()
        stats.add(np.array([b[0] for b in batch], np.int64), np.array([b[1] for b in batch]))
        assert stats._snapshot_native(lib) == stats._snapshot_numpy()
