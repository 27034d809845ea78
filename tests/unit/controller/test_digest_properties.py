"""``digest`` (array work over the ranks) agrees with a plain reading of each rank in
turn: the same below, unknown and insufficient ranks, per-node counts and minimums, and
the same worst rank (the first of the lowest, in report order)."""

from __future__ import annotations

from datetime import timedelta

from controller_builders import T0, policy_doc
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.controller.core import peers
from pacekeeper.controller.core.attribution import _SAMPLES, digest, score_getter
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

KINDS = ("gpuRelative", "gpuIndividual", "sectionRelative", "worst")
score = st.one_of(st.none(), st.sampled_from([0.3, 0.5, 0.79, 0.8, 0.95, 1.0]))


@st.composite
def reports(draw: st.DrawFn) -> ScoreReport:
    n = draw(st.integers(1, 40))
    # Nodes need not come together: a rank may share a node with one far from it.
    nodes = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    rows = [
        RankScores(
            rank=r,
            node=f"n{nodes[r]}",
            pod=draw(st.sampled_from([None, f"p{r}"])),
            gpu_relative=draw(score),
            gpu_individual=draw(score),
            section_relative={k: v for k in ("step", "fwd") if (v := draw(score)) is not None},
            section_individual={"step": 1.0},
            section_samples=draw(st.integers(0, 12)),
            kernel_samples=draw(st.integers(0, 12)),
        )
        for r in range(n)
    ]
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="j"),
        sequence=1,
        generated_at=T0 + timedelta(seconds=60),
        window_s=60.0,
        ranks=rows,
    )


def _plain(report: ScoreReport, policy):  # type: ignore[no-untyped-def]
    """Rank by rank, as the loop before the array form read them."""
    judged = peers.judge(report, policy, score_getter(policy.score)).scores()
    fields = _SAMPLES[policy.score.kind]
    act, least = policy.thresholds.act, policy.persistence.min_samples
    below, unknown, insufficient, nodes = {}, [], [], {}
    worst: tuple[float, int] | None = None
    for r, s in zip(report.ranks, judged, strict=True):
        nd = nodes.setdefault(r.node, {"ranks": 0, "measured": 0, "below": [], "min": None})
        nd["ranks"] += 1
        if s is None:
            unknown.append(r.rank)
        elif least and sum(getattr(r, f) for f in fields) < least:
            insufficient.append(r.rank)
        else:
            nd["measured"] += 1
            nd["min"] = s if nd["min"] is None else min(nd["min"], s)
            if worst is None or s < worst[0]:
                worst = (s, r.rank)
            if s < act:
                below[r.rank] = s
                nd["below"].append(r.rank)
    return below, unknown, insufficient, nodes, worst


@settings(max_examples=150, deadline=None)
@given(report=reports(), kind=st.sampled_from(KINDS), min_samples=st.sampled_from([0, 5]))
def test_digest_agrees_with_a_plain_reading_rank_by_rank(
    report: ScoreReport, kind: str, min_samples: int
) -> None:
    sel = {"kind": kind, **({"section": "step"} if kind == "sectionRelative" else {})}
    doc = policy_doc({"score": sel, "persistence": {"minSamples": min_samples}})
    policy = doc.policies["default"]
    d = digest(report, policy)
    below, unknown, insufficient, nodes, worst = _plain(report, policy)
    assert d.below == below
    assert d.unknown == unknown
    assert d.insufficient == insufficient
    assert list(d.nodes) == list(nodes)  # first named first
    for name, nd in nodes.items():
        got = d.nodes[name]  # type: ignore[index]
        assert (got.ranks, got.measured, got.unknown) == (
            nd["ranks"], nd["measured"], nd["ranks"] - nd["measured"],
        )  # fmt: skip
        assert got.below == nd["below"]
        assert got.min_score == nd["min"]
    assert (d.worst_score, d.worst_rank) == (worst or (None, None))
    assert d.measured == len(below) + sum(
        1 for r in report.ranks if r.rank not in below and r.rank not in unknown
        and r.rank not in insufficient
    )  # fmt: skip
    assert d.pod_of == {r.rank: r.pod for r in report.ranks if r.rank in below and r.pod}
