"""Work per launch (issue #38): a kernel launched bigger on one rank is read per unit of
work, against its peers and against the rank's own baseline; where every launch of a key
is the same size, every score is the same, bit for bit, as without thread counts."""

from __future__ import annotations

import copy
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector import scoring
from pacekeeper.detector.baselines import RecentBest
from pacekeeper.detector.payload import KeyIds, RankPayload, Scores, score_payloads
from pacekeeper.detector.reports import RankInfo

IDS = KeyIds()
KERNELS = [f"k{i}" for i in range(5)]
NAMES = {int(i): n for n, i in zip(KERNELS, IDS.ids(KERNELS), strict=True)}
TIME = st.one_of(
    st.floats(min_value=1e-3, max_value=1e9), st.sampled_from([math.nan, 0.0, -1.0, math.inf])
)
PATHS = ("few", "vectorised")


def _payload(rank: int, times: list[float], threads: list[float] | None = None) -> RankPayload:
    kers = KERNELS[: len(times)]
    z = np.zeros(0)
    return RankPayload(
        RankInfo(rank=rank, node="n0"), IDS.ids([]), z, z, IDS.ids(kers),
        np.array(times, np.float64),
        np.array([t * 10 for t in times], np.float64),
        gpu_individual=1.0,
        kernel_threads=None if threads is None else np.array(threads, np.float64),
    )  # fmt: skip


def _same_bits(a: Scores, b: Scores) -> None:
    assert a.gpu_relative == b.gpu_relative
    assert a.gpu_relative_median == b.gpu_relative_median
    assert a.gpu_individual == b.gpu_individual


@st.composite
def windows(draw: st.DrawFn) -> tuple[list[list[float]], list[float]]:
    ranks = draw(st.integers(1, 6))
    times = [draw(st.lists(TIME, min_size=5, max_size=5)) for _ in range(ranks)]
    per_key = draw(st.lists(st.sampled_from([1.0, 256.0, 4096.0, math.nan]), min_size=5,
                            max_size=5))  # fmt: skip
    return times, per_key


@settings(max_examples=200, deadline=None)
@given(windows())
def test_equal_threads_per_key_leave_every_score_bit_for_bit(
    w: tuple[list[list[float]], list[float]],
) -> None:
    times, per_key = w
    for path in PATHS:
        plain = [_payload(r, t) for r, t in enumerate(times)]
        threaded = [_payload(r, t, per_key) for r, t in enumerate(times)]
        want = score_payloads(plain, NAMES, relative=True, individual=True, path=path)
        got = score_payloads(threaded, NAMES, relative=True, individual=True, path=path)
        _same_bits(got, want)


@settings(max_examples=200, deadline=None)
@given(windows(), st.lists(st.sampled_from([1.0, 1.2, 2.0, math.nan]), min_size=30,
                           max_size=30))  # fmt: skip
def test_the_two_paths_agree_when_launches_differ(
    w: tuple[list[list[float]], list[float]], scale: list[float]
) -> None:
    times, per_key = w
    ps = [
        _payload(r, t, [n * scale[5 * r + i] for i, n in enumerate(per_key)])
        for r, t in enumerate(times)
    ]
    few = score_payloads(ps, NAMES, relative=True, individual=True, path="few")
    vec = score_payloads(ps, NAMES, relative=True, individual=True, path="vectorised")
    for a, b in ((few.gpu_relative, vec.gpu_relative),
                 (few.gpu_relative_median, vec.gpu_relative_median)):  # fmt: skip
        assert a.keys() == b.keys()
        assert all(math.isclose(a[k], b[k], rel_tol=1e-12) for k in a)


@pytest.mark.parametrize("path", PATHS)
def test_a_rank_launching_20pct_bigger_and_taking_20pct_longer_scores_as_its_peers(
    path: str,
) -> None:
    base = [100.0, 50.0, 30.0]
    peers = [_payload(r, base, [1024.0] * 3) for r in range(4)]
    skewed = _payload(4, [120.0, 60.0, 30.0], [1228.8, 1228.8, 1024.0])
    s = score_payloads([*peers, skewed], NAMES, relative=True, individual=False, path=path)
    assert s.gpu_relative_median[4] == pytest.approx(s.gpu_relative_median[0], rel=1e-12)
    # Without thread counts the same rank reads 1/1.2 on its grown kernels; the mean is
    # a time (what the step pays, which the host side reads) with them or without.
    off = _payload(4, [120.0, 60.0, 30.0])
    t = score_payloads([*peers, off], NAMES, relative=True, individual=False, path=path)
    assert t.gpu_relative[4] < 0.9 and t.gpu_relative_median[4] < 0.9
    assert s.gpu_relative[4] == t.gpu_relative[4]


@pytest.mark.parametrize("path", PATHS)
def test_a_slow_gpu_with_equal_launches_still_scores_lower(path: str) -> None:
    peers = [_payload(r, [100.0, 50.0], [1024.0, 1024.0]) for r in range(4)]
    slow = _payload(4, [120.0, 60.0], [1024.0, 1024.0])
    s = score_payloads([*peers, slow], NAMES, relative=True, individual=False, path=path)
    assert s.gpu_relative[4] == pytest.approx(1 / 1.2)
    assert s.gpu_relative_median[4] == pytest.approx(1 / 1.2)
    # A slow GPU whose launch also grew: read per unit of work it is still slow.
    slow_big = _payload(4, [144.0, 72.0], [1228.8, 1228.8])
    s = score_payloads([*peers, slow_big], NAMES, relative=True, individual=False, path=path)
    assert s.gpu_relative_median[4] == pytest.approx(1 / 1.2)


@pytest.mark.parametrize("path", PATHS)
def test_a_launch_whose_time_does_not_grow_reads_faster_and_moves_no_peer(path: str) -> None:
    # A grid under the SM count: twice the threads, the same time.
    peers = [_payload(r, [100.0, 50.0], [64.0, 64.0]) for r in range(4)]
    peers[1] = _payload(1, [110.0, 55.0], [64.0, 64.0])
    big = _payload(4, [105.0, 50.0], [128.0, 64.0])
    raw = score_payloads([*peers, _payload(4, [105.0, 50.0])], NAMES, relative=True,
                         individual=False, path=path)  # fmt: skip
    s = score_payloads([*peers, big], NAMES, relative=True, individual=False, path=path)
    med, raw_med = s.gpu_relative_median, raw.gpu_relative_median
    assert med[4] >= raw_med[4]
    assert med[4] <= 1.0
    assert {r: med[r] for r in range(4)} == {r: raw_med[r] for r in range(4)}


def test_entry_scores_against_a_plain_loop_with_nans() -> None:
    rng = np.random.default_rng(7)
    cols = rng.integers(0, 6, 200)
    times = rng.uniform(1, 2, 200)
    times[rng.random(200) < 0.1] = np.nan
    threads = rng.choice([64.0, 128.0, 256.0, np.nan], 200)
    scores = rng.uniform(0.5, 1.0, 200)
    scores[rng.random(200) < 0.1] = np.nan
    got = scoring.per_work_entry_scores(cols, scores, times, threads, 6)
    want = scoring.plain_per_work_scores(cols.tolist(), scores.tolist(), times.tolist(),
                                         threads.tolist())  # fmt: skip
    np.testing.assert_array_equal(got, np.array(want))
    lo = {c: min(n for c2, n, t in zip(cols, threads, times, strict=True)
                 if c2 == c and n > 0 and t > 0) for c in set(cols.tolist())}  # fmt: skip
    for c, t, n, s, g in zip(cols, times, threads, scores, got, strict=True):
        if t > 0 and n > lo[c] and math.isfinite(s):
            assert g == min(1.0, s * (n / lo[c]))
        else:
            assert g == s or (math.isnan(g) and math.isnan(s))
    assert scoring.per_work_entry_scores(cols, scores, times, None, 6) is scores


def test_a_payload_pickled_without_threads_unpickles_with_none() -> None:
    p = _payload(0, [1.0, 2.0], [64.0, 64.0])
    state = p.__getstate__()  # type: ignore[attr-defined]
    old = object.__new__(RankPayload)
    old.__setstate__(state[:-1])
    assert old.kernel_threads is None and old.names == p.names
    np.testing.assert_array_equal(old.kernel_median_ns, p.kernel_median_ns)
    back = pickle.loads(pickle.dumps(p))
    np.testing.assert_array_equal(back.kernel_threads, p.kernel_threads)
    assert copy.copy(old).kernel_threads is None


def test_baselines_remember_the_launch_of_their_window_and_record_the_same_times() -> None:
    keys = [f"k{i}" for i in range(30)]  # past FEW_KEYS: the vectorised update
    for n_keys in (3, 30):
        a, b = RecentBest(windows=8), RecentBest(windows=8)
        rng = np.random.default_rng(n_keys)
        for _ in range(12):
            t = rng.uniform(90, 110, n_keys)
            thr = rng.choice([64.0, 128.0], n_keys)
            base_a = a.update_many(keys[:n_keys], t)
            base_b, launch = b.update_launches(keys[:n_keys], t, thr)
            np.testing.assert_array_equal(base_a, base_b)
            for i, k in enumerate(keys[:n_keys]):
                row = b._rows[k]
                at = np.flatnonzero(b._hist[row] == base_b[i])
                assert launch[i] in b._threads[row, at]


def test_individual_scores_read_a_bigger_launch_per_unit_of_work() -> None:
    t = np.array([120.0, 50.0, 30.0])
    base = np.array([100.0, 50.0, 30.0])
    tot = np.array([1200.0, 500.0, 300.0])
    same = np.array([64.0, 64.0, 64.0])
    fn = scoring.gpu_individual_median
    assert fn(t, base, tot, same, same) == fn(t, base, tot)  # equal: bit for bit
    grown = fn(t, base, tot, np.array([76.8, 64.0, 64.0]), same)
    assert grown == pytest.approx(1.0)
    assert fn(t, base, tot) < 0.95
    # Many kernels (the vectorised branch): the same rule, the fast score too.
    t40, b40, tot40 = np.full(40, 120.0), np.full(40, 100.0), np.full(40, 10.0)
    thr40 = np.full(40, 64.0)
    for fn in (scoring.gpu_individual_median, scoring.gpu_individual_fast):
        assert fn(t40, b40, tot40, thr40, thr40) == fn(t40, b40, tot40)
        assert fn(t40, b40, tot40, thr40 * 1.2, thr40) == pytest.approx(1.0)
    # The mean stays a time: NVRx's score is never rescaled.
    assert scoring.gpu_individual_score(t40, b40, tot40) == pytest.approx(1 / 1.2)
