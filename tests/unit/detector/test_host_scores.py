"""Scoring on node leaders (issue 42): hosts' references merged in any order and nesting
are the job's, and each host scored against them gives, once combined, exactly the
scores and mix groups one rank computes from every payload — on arbitrary payloads with
NaNs, keys only one rank ran, ranks without kernels and launches of differing sizes."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector import host_scores, key_references, work_mix
from pacekeeper.detector.host_scores import HostScores
from pacekeeper.detector.key_references import References
from pacekeeper.detector.payload import KeyIds, RankPayload, Scores, score_payloads
from pacekeeper.detector.reports import RankInfo

IDS = KeyIds()
SECTIONS = [f"s{i}" for i in range(4)]
KERNELS = [f"k{i}" for i in range(6)]
NAMES = {int(i): n for n, i in zip(SECTIONS + KERNELS, IDS.ids(SECTIONS + KERNELS), strict=True)}

TIME = st.one_of(
    st.floats(min_value=1e-3, max_value=1e9),
    st.sampled_from([math.nan, 0.0, -1.0, math.inf]),
)
THREADS = st.one_of(st.sampled_from([128.0, 256.0, 1024.0, 4096.0]), st.just(math.nan))


@st.composite
def job(draw: st.DrawFn) -> list[RankPayload]:
    out = []
    n = draw(st.integers(1, 12))
    for r in range(n):
        secs = draw(st.lists(st.sampled_from(SECTIONS), unique=True, max_size=4))
        kers = draw(st.lists(st.sampled_from(KERNELS), unique=True, max_size=6))
        n_s, n_k = len(secs), len(kers)
        threads = draw(st.one_of(st.none(), st.lists(THREADS, min_size=n_k, max_size=n_k)))
        out.append(
            RankPayload(
                info=RankInfo(rank=r, node=f"n{r // 3}"),
                section_ids=IDS.ids(secs),
                section_median_ns=np.array(draw(st.lists(TIME, min_size=n_s, max_size=n_s))),
                section_individual=np.array(draw(st.lists(TIME, min_size=n_s, max_size=n_s))),
                kernel_ids=IDS.ids(kers),
                kernel_median_ns=np.array(draw(st.lists(TIME, min_size=n_k, max_size=n_k))),
                kernel_total_ns=np.array(draw(st.lists(TIME, min_size=n_k, max_size=n_k))),
                gpu_individual=draw(TIME),
                kernel_threads=None if threads is None else np.array(threads),
            )
        )
    return out


def _hosts(payloads: list[RankPayload], cuts: list[int]) -> list[list[RankPayload]]:
    bounds = sorted({c % (len(payloads) + 1) for c in cuts} | {0, len(payloads)})
    return [payloads[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _merged_in_a_random_tree(parts: list[References], seed: int) -> References:
    rng = random.Random(seed)
    parts = list(parts)
    while len(parts) > 1:
        rng.shuffle(parts)
        k = rng.randint(2, len(parts))
        parts = [key_references.merge(parts[:k]), *parts[k:]]
    return parts[0]


def _joined_in_a_random_tree(parts: list[HostScores], seed: int) -> HostScores:
    rng = random.Random(seed + 1)
    parts = list(parts)
    while len(parts) > 1:
        rng.shuffle(parts)  # a leader's children arrive in any order
        k = rng.randint(2, len(parts))
        parts = [host_scores.join(parts[:k]), *parts[k:]]
    return host_scores.join(parts)


def _same_references(a: References, b: References) -> None:
    for name in References.__slots__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype.kind == y.dtype.kind, name
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert x == y, name


def _nan_free(s: Scores) -> tuple:
    # Scores leave NaN out of their mappings, so plain equality is exact equality.
    return (
        s.gpu_relative,
        s.section_relative,
        s.gpu_individual,
        s.section_individual,
        s.rank_to_node,
        s.gpu_relative_median,
    )


@settings(max_examples=300, deadline=None)
@given(job(), st.lists(st.integers(0, 12), max_size=5), st.integers(0, 10**6), st.booleans())
def test_hosts_scored_against_merged_references_are_the_jobs_scores(
    payloads: list[RankPayload], cuts: list[int], seed: int, individual: bool
) -> None:
    hosts = _hosts(payloads, cuts)
    refs = _merged_in_a_random_tree([key_references.of_payloads(h) for h in hosts], seed)
    _same_references(refs, key_references.of_payloads(payloads))
    parts = [
        host_scores.score_host(h, NAMES, refs, relative=True, individual=individual) for h in hosts
    ]
    got = _joined_in_a_random_tree(parts, seed)
    want = score_payloads(payloads, NAMES, relative=True, individual=individual, path="vectorised")
    assert _nan_free(got.scores()) == _nan_free(want)
    assert got.ranks.tolist() == [p.info.rank for p in payloads]  # rank order, every rank
    assert got.rank_info() == work_mix.with_mix_groups(
        {p.info.rank: p.info for p in payloads}, payloads
    )


def test_a_kernel_only_one_host_ran_is_unscored_only_while_others_report_kernels() -> None:
    def rank(r: int, kernels: list[str], t: float) -> RankPayload:
        k = len(kernels)
        return RankPayload(
            RankInfo(rank=r, node=f"n{r}"),
            IDS.ids([]),
            np.zeros(0),
            np.zeros(0),
            IDS.ids(kernels),
            np.full(k, t),
            np.full(k, 1.0),
        )

    alone, other = rank(0, ["k0", "k1"], 2.0), rank(1, ["k1"], 1.0)
    refs = key_references.merge(
        [key_references.of_payloads([alone]), key_references.of_payloads([other])]
    )
    assert refs.reporting == 2 and refs.kernel_min_support == 2
    part = host_scores.score_host([alone], NAMES, refs, relative=True, individual=False)
    # k0 (one rank) drops out; k1 scores 1.0 / 2.0 against the other host's best.
    assert part.scores().gpu_relative == {0: 0.5}
    # The same host alone in its job: both kernels count, each its own best.
    own = key_references.of_payloads([alone])
    assert own.kernel_min_support == 1
    alone_part = host_scores.score_host([alone], NAMES, own, relative=True, individual=False)
    assert alone_part.scores().gpu_relative == {0: 1.0}


def test_a_bigger_launch_is_read_against_the_smallest_launch_on_any_host() -> None:
    def rank(r: int, t: float, threads: float) -> RankPayload:
        return RankPayload(
            RankInfo(rank=r, node=f"n{r}"),
            IDS.ids([]),
            np.zeros(0),
            np.zeros(0),
            IDS.ids(["k0"]),
            np.array([t]),
            np.array([1.0]),
            kernel_threads=np.array([threads]),
        )

    small, big = rank(0, 1.0, 128.0), rank(1, 2.0, 256.0)
    refs = key_references.merge([key_references.of_payloads([p]) for p in (small, big)])
    np.testing.assert_array_equal(refs.kernel_launch, [128.0])
    # Alone on its host, the big launch has no smaller one beside it: only the job's
    # reference reads it per unit of work (2x the threads in 2x the time: 1.0).
    part = host_scores.score_host([big], NAMES, refs, relative=True, individual=False)
    assert part.scores().gpu_relative_median == {1: pytest.approx(1.0)}
    assert part.scores().gpu_relative == {1: 0.5}  # the mean stays a time


def test_references_keep_counts_capped_and_no_key_without_a_valid_time() -> None:
    ps = [
        RankPayload(
            RankInfo(rank=r, node="n0"),
            IDS.ids(["s0"]),
            np.array([math.nan if r == 0 else 3.0 + r]),
            np.ones(1),
            IDS.ids(["k0"]),
            np.array([1.0 + r]),
            np.ones(1),
        )
        for r in range(5)
    ]
    refs = key_references.of_payloads(ps)
    assert refs.reporting == key_references.SUPPORT_CAP
    assert refs.kernel_support.tolist() == [key_references.SUPPORT_CAP]
    assert refs.section_best.tolist() == [4.0]  # rank 0's NaN is no reference
    nan_only = key_references.of_payloads(ps[:1])
    assert nan_only.section_keys.size == 0
    assert math.isnan(float(nan_only.section_best_for(IDS.ids(["s0"]))[0]))
    _same_references(key_references.merge([]), References.empty())
