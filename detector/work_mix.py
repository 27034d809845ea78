"""Peer groups when the job gives none: ranks that run the same sections and spend their
GPU time in the same kernels do the same work.

A pipeline's last stage runs the LM head and the loss; its first, the embedding: their
kernel mixes differ from the middle stages', and a stage with more work is not a slow
GPU. On the reporting rank, for ranks whose ``RankInfo`` has no ``group`` or ``coords``
(``Detector.set_topology`` was not called), each rank's signature is the set of its
sections and of the kernels that take at least ``SIGNIFICANT_SHARE`` of its kernel time
(a rare kernel — a checkpoint, a NaN check on one rank — does not split a group). When
the ranks fall into more than one signature, each signature of at least two ranks
becomes a group ``mix-<hash>``; a rank alone with its signature keeps none (compared with
the whole job, as before). One signature for everyone: no group at all.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .payload import RankPayload
    from .reports import RankInfo

SIGNIFICANT_SHARE = 0.05


def signature(p: RankPayload) -> frozenset[tuple[str, int]]:
    sections = {("s", int(i)) for i in p.section_ids.tolist()}
    total = float(p.kernel_total_ns.sum()) if p.kernel_total_ns.size else 0.0
    kernels = {
        ("k", int(i))
        for i, t in zip(p.kernel_ids.tolist(), p.kernel_total_ns.tolist(), strict=True)
        if total > 0 and t >= SIGNIFICANT_SHARE * total
    }
    return frozenset(sections | kernels)


def digests(payloads: Sequence[RankPayload]) -> dict[int, str]:
    """rank -> its signature's digest, for the ranks without a layout: what a node leader
    sends up in place of the payload (``host_scores``); ranks with equal digests do the
    same work."""
    by_sig: dict[frozenset[tuple[str, int]], list[int]] = defaultdict(list)
    for p in payloads:
        if p.info.group is None and not p.info.coords:
            by_sig[signature(p)].append(p.info.rank)
    out: dict[int, str] = {}
    for sig, ranks in by_sig.items():
        digest = hashlib.sha1(repr(sorted(sig)).encode(), usedforsecurity=False).hexdigest()
        for r in ranks:
            out[r] = digest
    return out


def groups_of(digests_by_rank: Mapping[int, str]) -> dict[int, str]:
    """rank -> ``mix-<digest>`` from the ranks' signature digests, when their work differs:
    every digest shared by at least two ranks is a group; one digest for all: none."""
    by_digest: dict[str, list[int]] = defaultdict(list)
    for r, d in digests_by_rank.items():
        by_digest[d].append(r)
    if len(by_digest) < 2:
        return {}
    return {r: f"mix-{d[:10]}" for d, ranks in by_digest.items() if len(ranks) >= 2 for r in ranks}


def mix_groups(payloads: Sequence[RankPayload]) -> dict[int, str]:
    """rank -> ``mix-<hash>`` for the ranks without a layout, when their work differs."""
    return groups_of(digests(payloads))


def with_mix_groups(
    infos: Mapping[int, RankInfo], payloads: Sequence[RankPayload]
) -> dict[int, RankInfo]:
    return with_groups(infos, mix_groups(payloads))


def with_groups(infos: Mapping[int, RankInfo], groups: Mapping[int, str]) -> dict[int, RankInfo]:
    """``infos`` with each rank of ``groups`` given its mix group."""
    return {r: replace(i, group=groups[r]) if r in groups else i for r, i in infos.items()}
