"""The plain-Python scoring of small windows gives what the vectorised one gives, on
arbitrary payloads with NaNs, missing keys and ranks without kernels; and a report picks
each path by its size."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector import few_scores, payload
from pacekeeper.detector.payload import KeyIds, RankPayload, Scores
from pacekeeper.detector.reports import RankInfo

IDS = KeyIds()
SECTIONS = [f"s{i}" for i in range(4)]
KERNELS = [f"k{i}" for i in range(5)]
NAMES = {int(i): n for n, i in zip(SECTIONS + KERNELS, IDS.ids(SECTIONS + KERNELS), strict=True)}

TIME = st.one_of(
    st.floats(min_value=1e-3, max_value=1e9),
    st.sampled_from([math.nan, 0.0, -1.0, math.inf]),
)


@st.composite
def payloads(draw: st.DrawFn) -> list[RankPayload]:
    out = []
    ranks = draw(st.lists(st.integers(0, 9), min_size=0, max_size=5, unique=True))
    for r in ranks:
        secs = draw(st.lists(st.sampled_from(SECTIONS), unique=True, max_size=4))
        kers = draw(st.lists(st.sampled_from(KERNELS), unique=True, max_size=5))
        n_s, n_k = len(secs), len(kers)
        out.append(
            RankPayload(
                info=RankInfo(rank=r, node=f"n{r % 2}"),
                section_ids=IDS.ids(secs),
                section_median_ns=np.array(draw(st.lists(TIME, min_size=n_s, max_size=n_s))),
                section_individual=np.array(draw(st.lists(TIME, min_size=n_s, max_size=n_s))),
                kernel_ids=IDS.ids(kers),
                kernel_median_ns=np.array(draw(st.lists(TIME, min_size=n_k, max_size=n_k))),
                kernel_total_ns=np.array(draw(st.lists(TIME, min_size=n_k, max_size=n_k))),
                gpu_individual=draw(TIME),
            )
        )
    return out


def _close(a: dict[int, float], b: dict[int, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-12) for k in a)


def _same(fast: Scores, slow: Scores) -> None:
    assert _close(fast.gpu_relative, slow.gpu_relative)
    assert _close(fast.gpu_individual, slow.gpu_individual)
    for got, want in (
        (fast.section_relative, slow.section_relative),
        (fast.section_individual, slow.section_individual),
    ):
        assert list(got) == list(want)  # the same names, in the same order
        assert all(_close(got[k], want[k]) for k in want)
    assert fast.rank_to_node == slow.rank_to_node


@settings(max_examples=400, deadline=None)
@given(
    payloads(),
    st.booleans(),
    st.booleans(),
    st.one_of(st.none(), st.integers(0, 9)),
)
def test_plain_loops_score_as_the_vectorised_path(
    ps: list[RankPayload], relative: bool, individual: bool, only: int | None
) -> None:
    assert few_scores.is_few(ps)
    kw = {"relative": relative, "individual": individual, "only_rank": only}
    few = payload.score_payloads(ps, NAMES, **kw)
    _same(few, payload.score_payloads(ps, NAMES, **kw, path="vectorised"))


def test_a_large_window_takes_the_vectorised_path(monkeypatch) -> None:
    many = [f"k{i}" for i in range(few_scores.FEW_ENTRIES)]
    big = RankPayload(
        info=RankInfo(rank=0, node="n0"),
        section_ids=IDS.ids([]),
        section_median_ns=np.zeros(0),
        section_individual=np.zeros(0),
        kernel_ids=IDS.ids(many),
        kernel_median_ns=np.ones(len(many)),
        kernel_total_ns=np.ones(len(many)),
    )
    assert not few_scores.is_few([big])
    assert few_scores.is_few([RankPayload.empty(RankInfo(rank=0, node="n0"))])
    taken: list[str] = []
    monkeypatch.setattr(few_scores, "score_maps", lambda *a, **k: taken.append("few"))
    payload.score_payloads([big], {}, relative=True, individual=True)
    assert taken == []


def test_one_rank_against_itself_scores_one() -> None:
    # A job of one: every key's best is its own time, the GPU score 1.0.
    p = RankPayload(
        info=RankInfo(rank=0, node="n0"),
        section_ids=IDS.ids(["s0"]),
        section_median_ns=np.array([5.0]),
        section_individual=np.array([0.9]),
        kernel_ids=IDS.ids(["k0", "k1"]),
        kernel_median_ns=np.array([3.0, 4.0]),
        kernel_total_ns=np.array([30.0, 40.0]),
        gpu_individual=0.8,
    )
    s = payload.score_payloads([p], NAMES, relative=True, individual=True)
    assert s.gpu_relative == {0: 1.0}
    assert s.section_relative == {"s0": {0: 1.0}}
    assert s.gpu_individual == {0: 0.8}
    assert s.section_individual == {"s0": {0: 0.9}}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TIME, TIME, TIME), max_size=12))
def test_a_ranks_own_scores_in_plain_loops_match_scoring(entries) -> None:  # type: ignore[no-untyped-def]
    from pacekeeper.detector import scoring

    typical, baseline, total = (np.array([e[i] for e in entries]) for i in range(3))
    got = scoring.individual_scores(typical, baseline)  # plain loops: few keys
    mean = scoring.gpu_individual_score(typical, baseline, total)
    saved, scoring.FEW_KEYS = scoring.FEW_KEYS, -1  # numpy, whatever the size
    try:
        want = scoring.individual_scores(typical, baseline)
        ref = scoring.gpu_individual_score(typical, baseline, total)
    finally:
        scoring.FEW_KEYS = saved
    np.testing.assert_array_equal(np.array(got, dtype=np.float64), want)
    assert (math.isnan(mean) and math.isnan(ref)) or math.isclose(mean, ref, rel_tol=1e-12)
