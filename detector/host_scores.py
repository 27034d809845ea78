"""Scoring where the data is: a node leader scores its host's ranks, the root combines.

On the report tree (``tree_group``) a node leader holds its host's payloads. It
summarises them (``key_references.of_payloads``), the summaries merge up the tree into
the job's references and come back down, and the leader scores its host's ranks
against them (``score_host``). What goes up from there is ``HostScores``: columns of
scores (three GPU scores and two per section a rank), each rank's ``RankInfo`` and its
work signature's digest — not its kernels. Each leader on the way ``join``s its
children's parts into one (arrays concatenated in rank order), so the root receives a
few parts, not one per host, and ``HostScores.scores`` gives the NVRx mappings one rank
would have computed from every payload, with the mix groups ``work_mix`` would have
found (``rank_info``). No rank unpickles or scores another host's payloads.

Pure: payloads and parts in, parts and scores out. NaN in a column: no score.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from . import work_mix
from .key_references import References
from .payload import F64, RankPayload, Scores, score_payloads
from .reports import RankInfo
from .scoring import I64

GPU_COLUMNS = ("gpu_relative", "gpu_individual", "gpu_relative_median")


@dataclass(frozen=True, slots=True)
class HostScores:
    """Ranks scored against the job's references: one host's, or a subtree's joined."""

    ranks: I64
    gpu: F64
    """Ranks x ``GPU_COLUMNS``."""
    sections: tuple[str, ...]
    """The names of the sections these ranks ran (a NaN-filled report lists every one)."""
    section_scores: F64
    """2 (relative, individual) x ranks x ``sections``."""
    infos: tuple[RankInfo, ...]
    """Each rank's, in ``ranks``' order."""
    digests: dict[int, str] = field(default_factory=dict)
    """``work_mix.digests`` of its ranks without a layout."""

    @classmethod
    def empty(cls) -> HostScores:
        return cls(np.zeros(0, np.int64), np.zeros((0, 3)), (), np.zeros((2, 0, 0)), ())

    def scores(self) -> Scores:
        """NVRx's mappings (rank order; absent where NaN)."""
        ranks = self.ranks.tolist()

        def mapping(column: F64) -> dict[int, float]:
            ok = ~np.isnan(column)
            if bool(ok.all()):
                return dict(zip(ranks, column.tolist(), strict=True))
            return dict(zip(self.ranks[ok].tolist(), column[ok].tolist(), strict=True))

        def per_section(matrix: F64) -> dict[str, dict[int, float]]:
            out = {}
            for j, name in enumerate(self.sections):
                scored = mapping(matrix[:, j])
                if scored:
                    out[name] = scored
            return out

        rel, ind, med = (mapping(self.gpu[:, k]) for k in range(3))
        return Scores(
            rel,
            per_section(self.section_scores[0]),
            ind,
            per_section(self.section_scores[1]),
            {i.rank: i.node for i in self.infos},
            med,
        )

    def rank_info(self) -> dict[int, RankInfo]:
        """Every rank's ``RankInfo``, with its mix group where the ranks' work differs."""
        infos = {i.rank: i for i in self.infos}
        return work_mix.with_groups(infos, work_mix.groups_of(self.digests))


def score_host(
    payloads: Sequence[RankPayload],
    names: Mapping[int, str],
    refs: References,
    *,
    relative: bool,
    individual: bool,
) -> HostScores:
    """This host's ranks' scores against ``refs``, the job's references."""
    s = score_payloads(payloads, names, relative=relative, individual=individual, refs=refs)
    ps = sorted(payloads, key=lambda p: p.info.rank)
    ranks = [p.info.rank for p in ps]
    seen: dict[str, None] = {}
    for p in ps:
        for sid in p.section_ids.tolist():
            name = names.get(sid)
            if name is not None:
                seen[name] = None
    for per_section in (s.section_relative, s.section_individual):
        seen.update(dict.fromkeys(per_section))
    sections = tuple(seen)
    nan = math.nan
    gpu = np.array(
        [
            [m.get(r, nan) for m in (s.gpu_relative, s.gpu_individual, s.gpu_relative_median)]
            for r in ranks
        ],
        dtype=np.float64,
    ).reshape(len(ranks), 3)
    sec = np.full((2, len(ranks), len(sections)), np.nan)
    for k, per_section in enumerate((s.section_relative, s.section_individual)):
        for j, name in enumerate(sections):
            per_rank = per_section.get(name, {})
            for i, r in enumerate(ranks):
                v = per_rank.get(r)
                if v is not None:
                    sec[k, i, j] = v
    return HostScores(
        np.array(ranks, dtype=np.int64),
        gpu,
        sections,
        sec,
        tuple(p.info for p in ps),
        work_mix.digests(payloads),
    )


def join(parts: Sequence[HostScores]) -> HostScores:
    """One part from several (disjoint ranks), in rank order: what a leader passes up."""
    parts = [p for p in parts if p.ranks.size or p.sections]
    if not parts:
        return HostScores.empty()
    if len(parts) == 1:
        return parts[0]
    names = tuple(dict.fromkeys(n for p in parts for n in p.sections))
    col = {n: j for j, n in enumerate(names)}
    ranks = np.concatenate([p.ranks for p in parts])
    sec = np.full((2, ranks.size, len(names)), np.nan)
    at = 0
    for p in parts:
        n = p.ranks.size
        if n and p.sections:
            cols = [col[name] for name in p.sections]
            sec[:, at : at + n, cols] = p.section_scores
        at += n
    gpu = np.concatenate([p.gpu for p in parts])
    infos = [i for p in parts for i in p.infos]
    digests = {r: d for p in parts for r, d in p.digests.items()}
    order = np.argsort(ranks, kind="stable")
    if bool((order == np.arange(order.size)).all()):
        return HostScores(ranks, gpu, names, sec, tuple(infos), digests)
    return HostScores(
        ranks[order], gpu[order], names, sec[:, order], tuple(infos[i] for i in order), digests
    )
