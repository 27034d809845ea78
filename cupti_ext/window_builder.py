"""Decoded CUPTI buffers in, a ``KernelWindow`` out: the CUPTI backend's pure core.

No CUPTI, no clock, no threads: the backend feeds it decoded buffers (under its lock)
and asks for the window at report time; CPU tests feed it synthesized buffers.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import numpy.typing as npt

from . import native
from .attribution import _NEVER_ABOVE, MarkerBook, serial_of
from .backend import KernelStat, KernelWindow
from .kernel_keys import KernelKeyTable
from .kernel_stats import RingStats
from .marker_scan import MarkerScan
from .markers import MemsetMarkers
from .records import DecodedBuffer, KernelBatch

OTHER_SECTION = "<other>"
_KEY_STRIDE = 1 << 32
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_META_SECTION = 4
"""Column of an interval list's section id in ``pk_attribute_fold``'s list array."""


class KernelWindowBuilder:
    def __init__(
        self,
        external_kind: int,
        *,
        ring: int = 256,
        max_keys: int = 1024,
        max_section_groups: int = 8192,
        max_pending_records: int = 1 << 20,
        bucket_shapes: bool = True,
        comm_pattern: re.Pattern[str] | None = None,
        keys: KernelKeyTable | None = None,
        section_stats: bool = True,
    ) -> None:
        self.external_kind = external_kind
        self.keys = keys or KernelKeyTable(
            max_keys, bucket_shapes=bucket_shapes, comm_pattern=comm_pattern
        )
        self.book = MarkerBook()
        self._scan = MarkerScan()
        self._fold = _FoldScratch()
        self.memset_markers: MemsetMarkers | None = None
        """Set by the backend when its section markers are memsets (markers.py)."""
        self.gated = False
        """Set by the backend when kernel records are on inside traced entries alone and
        no section markers are made (``PACEKEEPER_KERNEL_ATTRIBUTION=gated``): every
        kernel record is then one of a traced entry's, and none waits for a marker."""
        self._global = RingStats(ring)
        self._launches = RingStats(ring)
        """Each key's launch threads (grid x block), every record as it arrives."""
        # Without section_stats, sections still decide which kernels count (those inside
        # a traced entry), but no per-section table is kept.
        self._per_section = (
            RingStats(ring, max_groups=max_section_groups) if section_stats else None
        )
        self._max_pending = max_pending_records
        self._pending: KernelBatch | None = None
        self._pending_kid: I64 = np.empty(0, np.int64)
        self.fences_seen = 0
        """Fence markers (serial 0) processed since creation."""
        self.received = 0
        self._records = self._comm = self._unattributed = self._comm_ns = 0
        self._dropped = self._incomplete = 0
        self._lost_before = 0

    @property
    def pending_records(self) -> int:
        return 0 if self._pending is None else len(self._pending.correlation_id)

    def add(self, dec: DecodedBuffer, records: int) -> None:
        """Fold one decoded buffer (``records`` records in all) into the window."""
        self.received += records
        lib = native.library()
        fences = None
        if lib is not None:
            fences = self._scan.add(lib, dec, self.external_kind, self.memset_markers, self.book)
        if fences is None:
            self._add_markers(dec)
        else:
            self.fences_seen += fences
        self._incomplete += dec.incomplete
        # Keys are looked up as records arrive (held ones keep theirs), so both paths
        # give key ids, and the overflow key, in the same order.
        kid = self.keys.lookup(dec.kernels.name_ptr, dec.kernels.threads)
        self._launches.add(kid, dec.kernels.threads.astype(np.float64))
        self._attribute_all(dec.kernels, kid)

    def _add_markers(self, dec: DecodedBuffer) -> None:
        """The buffer's markers into the book, marker by marker (the compiled pass,
        marker_scan.py, gives the same book)."""
        markers: list[tuple[int, int]] = []
        if len(dec.external_kind):
            ours = dec.external_kind == self.external_kind
            markers += zip(
                dec.external_id[ours].tolist(),
                dec.external_correlation_id[ours].tolist(),
                strict=True,
            )
        if self.memset_markers is not None and len(dec.memset_correlation_id):
            markers += self.memset_markers.select(
                dec.memset_correlation_id, dec.memset_value, dec.memset_bytes, dec.memset_stream
            )
        if markers:
            entries = [m for m in markers if serial_of(m[0])]  # serial 0: a fence
            self.fences_seen += len(markers) - len(entries)
            self.book.add_packed(entries)

    def settle(self, through: int) -> None:
        """A report's fence is in: entries up to serial ``through`` will show no more
        markers, so the kernels held for them are ruled on now (those of entries still
        open stay held, and count in a later window)."""
        if self.book.known_through < through:
            self.book.give_up(through)
        if self._pending is not None:
            self._attribute_all(None, None)

    def _attribute_all(self, k: KernelBatch | None, kid: I64 | None) -> None:
        """Rule on the held kernels, then on ``k``'s: each kernel is counted once, when
        it can be told inside or outside the entries; the others are held again. Held
        ones go first, on their own, so a buffer's arrays are not copied to join them."""
        if self.gated:
            if k is not None and kid is not None and len(k.correlation_id):
                self._fold_inside(k, kid)
            return
        held, held_kid = self._pending, self._pending_kid
        self._pending = None
        still: list[tuple[KernelBatch, I64]] = []
        for batch, ids in ((held, held_kid), (k, kid)):
            if batch is None or ids is None or len(batch.correlation_id) == 0:
                continue
            kept = self._attribute(batch, ids)
            if kept is not None:
                still.append(kept)
        if len(still) == 1:
            self._hold(*still[0])
        elif still:
            (a, a_kid), (b, b_kid) = still
            self._hold(concat_kernels(a, b), np.concatenate([a_kid, b_kid]))

    def _fold_inside(self, k: KernelBatch, kid: I64) -> None:
        """Count and fold every kernel of ``k`` as inside a traced entry (gated
        attribution: records were on for those alone); sections get no table."""
        lib = native.library()
        if lib is not None:
            self._add_native(lib, k, kid, all_inside=True)
        else:
            self._count_and_fold(k, kid, np.ones(len(kid), np.bool_))

    def _count_and_fold(
        self, k: KernelBatch, kid: I64, inside: npt.NDArray[np.bool_]
    ) -> tuple[F64, npt.NDArray[np.bool_]]:
        """Count ``k``'s kernels (timed, communication inside, outside) and fold the
        timed ones into the window's table; their durations and communication mask."""
        dur = k.duration_ns.astype(np.float64)
        comm = self.keys.is_comm(kid)
        timed_comm = inside & comm
        self._comm += int(np.count_nonzero(timed_comm))
        self._comm_ns += int(k.duration_ns[timed_comm].sum())
        self._unattributed += int(np.count_nonzero(~inside))
        use = inside & ~comm
        self._records += int(np.count_nonzero(use))
        self._global.add(kid, dur, use=use)
        return dur, comm

    def _attribute(self, k: KernelBatch, kid: I64) -> tuple[KernelBatch, I64] | None:
        """Count and fold ``k``'s kernels that can be ruled on; return the rest."""
        lib = native.library()
        if lib is not None:
            return self._add_native(lib, k, kid)
        asg = self.book.assign(k.correlation_id)
        waiting = None
        if asg.pending.any():
            waiting = (select(k, asg.pending), kid[asg.pending])
            keep = ~asg.pending
            resolved, inside, kid = select(k, keep), asg.any_section[keep], kid[keep]
            sections = {sid: mask[keep] for sid, mask in asg.sections.items()}
        else:
            resolved, sections, inside = k, asg.sections, asg.any_section
        dur, comm = self._count_and_fold(resolved, kid, inside)
        if self._per_section is not None:
            # By section id: where ``max_section_groups`` runs out, the groups of lower
            # section ids get the rows (the compiled path does the same).
            for sid, mask in sorted(sections.items()):
                m = mask & ~comm
                if m.any():
                    self._per_section.add(kid, dur, base=sid * _KEY_STRIDE, use=m)
        return waiting

    def _hold(self, held: KernelBatch, kid: I64) -> None:
        """Keep kernels that wait for a marker, the newest ``max_pending`` of them."""
        over = len(held.correlation_id) - self._max_pending
        if over > 0:
            self._dropped += over
            held, kid = select(held, np.arange(len(kid)) >= over), kid[over:]
        self._pending, self._pending_kid = held, kid

    def _add_native(
        self, lib: native.NativeLib, k: KernelBatch, kid: I64, *, all_inside: bool = False
    ) -> tuple[KernelBatch, I64] | None:
        """``_attribute``'s work in one compiled pass (``pk_attribute_fold``); the same
        results as the numpy path (tests/unit/cupti_ext/test_native.py). With
        ``all_inside`` (gated attribution) every kernel counts as inside a traced entry:
        no list is read, none is held, no section table is folded."""
        n = len(k.correlation_id)
        kid = np.ascontiguousarray(kid, np.int64)
        n_keys = len(self.keys.keys)
        per_section = None if all_inside else self._per_section
        refs = [] if all_inside else self.book.interval_refs()
        n_lists = len(refs)
        # A kernel defers at most once per table (global, and its sections with one).
        tables = 1 + (n_lists if per_section is not None else 0)
        scratch = self._fold
        scratch.ensure(n, n * tables, n_lists)
        meta = scratch.meta
        if n_lists:
            if per_section is None:
                meta[:n_lists] = [(a, b, m, 0, sid, 0) for sid, a, b, m in refs]
            else:
                meta[:n_lists] = [
                    (a, b, m, per_section.dense_map(sid * _KEY_STRIDE, n_keys)[1], sid, 0)
                    for sid, a, b, m in refs
                ]
        after, before = (_NEVER_ABOVE, 0) if all_inside else self.book.pending_bounds()
        corr = np.ascontiguousarray(k.correlation_id, np.uint32)
        dur = np.ascontiguousarray(k.duration_ns, np.int64)
        counts = scratch.counts
        lib.lib.pk_attribute_fold(
            native.ptr(corr),
            native.ptr(dur),
            native.ptr(kid),
            n,
            after,
            before,
            scratch.address_of(self.keys.comm_flags),
            scratch.meta_ptr,
            -1 if all_inside else n_lists,
            self._global.dense_map(0, n_keys)[1],
            scratch.address_of(self._global.address_array()),
            None if per_section is None else scratch.address_of(per_section.address_array()),
            self._global.ring,
            scratch.held_ptr,
            scratch.deferred_ptr,
            scratch.counts_ptr,
        )
        held, deferred = scratch.held, scratch.deferred
        n_held, records, comm, outside, refused, n_deferred, comm_ns = counts.tolist()
        self._records += records
        self._comm += comm
        self._comm_ns += comm_ns
        self._unattributed += outside
        if per_section is not None:
            per_section.refused += refused
        if n_deferred:
            # Keys without a row yet (new kernels, or new in a section): rows now, then
            # their samples, in launch order.
            which, index = deferred[:n_deferred, 0], deferred[:n_deferred, 1]
            table_of = (
                np.where(which < 0, -1, meta[np.maximum(which, 0), _META_SECTION])
                if n_lists
                else which  # no lists: every deferred kernel is the global table's (-1)
            )
            for sid in np.unique(table_of).tolist():  # section order, as the numpy path
                pick = index[table_of == sid]
                table = self._global if sid < 0 else per_section
                assert table is not None  # sections defer only where they have a table
                base = 0 if sid < 0 else sid * _KEY_STRIDE
                table.fold_new(lib, base, kid[pick], dur[pick].astype(np.float64))
        if n_held:
            return select(k, held[:n_held]), kid[held[:n_held]]
        return None

    def drop(self, records: int) -> None:
        """Count records lost before they reached us (full buffers, queues)."""
        self._dropped += records

    def take(self, section_names: list[str], extra_dropped: int = 0) -> KernelWindow:
        """The window since the last call; starts a new one."""
        keys = self.keys.keys
        kernels = {keys[k]: s for k, s in self._global.snapshot().items()}
        sections: dict[str, dict[str, KernelStat]] = {}
        per_section = self._per_section
        for group, stat in ({} if per_section is None else per_section.snapshot()).items():
            sid, kid = divmod(group, _KEY_STRIDE)
            name = section_names[sid] if sid < len(section_names) else OTHER_SECTION
            sections.setdefault(name, {})[keys[kid]] = stat
        lost = self.book.lost_markers + (
            0 if self.memset_markers is None else self.memset_markers.lost
        )
        window = KernelWindow(
            kernels=kernels,
            sections=sections,
            # Incomplete records (a forced flush handed over kernels still running)
            # are lost for good: counted, never silently.
            dropped_records=self._dropped
            + self._incomplete
            + extra_dropped
            + (0 if per_section is None else per_section.refused),
            records=self._records,
            comm_records=self._comm,
            comm_ns=float(self._comm_ns),
            unattributed_records=self._unattributed,
            held_records=self.pending_records,
            lost_markers=max(0, lost - self._lost_before),  # the memset ring may go
            launch_threads={keys[k]: m for k, m in self._launches.medians().items()},
        )
        self._launches.reset()
        self._lost_before = lost
        self._global.reset()
        if per_section is not None:
            per_section.reset()
        self.book.retire()
        self._records = self._comm = self._unattributed = self._comm_ns = 0
        self._dropped = self._incomplete = self.received = 0
        return window


class _FoldScratch:
    """``pk_attribute_fold``'s output and list arrays, reused from one buffer to the
    next, with their addresses (read once per growth, not per buffer)."""

    def __init__(self) -> None:
        self.counts = np.zeros(native.ATTRIBUTE_COUNTS, np.int64)
        self.counts_ptr = native.ptr(self.counts)
        self.held = self.deferred = self.meta = np.empty(0, np.int64)
        self.held_ptr = self.deferred_ptr = self.meta_ptr = 0
        self._known: dict[int, tuple[npt.NDArray[Any], int]] = {}

    def ensure(self, held: int, deferred: int, lists: int) -> None:
        if held > len(self.held):
            self.held = np.empty(max(held, 2 * len(self.held), 64), np.int64)
            self.held_ptr = native.ptr(self.held)
        if deferred > len(self.deferred):
            self.deferred = np.empty((max(deferred, 2 * len(self.deferred), 64), 2), np.int64)
            self.deferred_ptr = native.ptr(self.deferred)
        if lists > len(self.meta):
            self.meta = np.empty((max(lists, 2 * len(self.meta), 8), native.LIST_FIELDS), np.int64)
            self.meta_ptr = native.ptr(self.meta)

    def address_of(self, array: npt.NDArray[Any]) -> int:
        """An array's address, remembered while the array lives (arrays that the
        tables replace when they grow are looked up afresh)."""
        known = self._known.get(id(array))
        if known is None or known[0] is not array:
            if len(self._known) > 16:
                self._known.clear()
            known = self._known[id(array)] = (array, native.ptr(array))
        return known[1]


def select(k: KernelBatch, mask: np.ndarray) -> KernelBatch:
    return KernelBatch(
        correlation_id=k.correlation_id[mask],
        duration_ns=k.duration_ns[mask],
        name_ptr=k.name_ptr[mask],
        threads=k.threads[mask],
    )


def concat_kernels(a: KernelBatch, b: KernelBatch) -> KernelBatch:
    return KernelBatch(
        correlation_id=np.concatenate([a.correlation_id, b.correlation_id]),
        duration_ns=np.concatenate([a.duration_ns, b.duration_ns]),
        name_ptr=np.concatenate([a.name_ptr, b.name_ptr]),
        threads=np.concatenate([a.threads, b.threads]),
    )
