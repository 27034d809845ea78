"""Columns read where a report is parsed (``report_columns.columnar``, issue 42): a
decision on them reads what it reads off the rank objects, and a ranks list changed
after its columns were read is read anew, never from stale columns."""

from __future__ import annotations

import copy
import pickle
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import numpy as np
import pytest

from pacekeeper.controller.core import rank_columns
from pacekeeper.controller.core.engine import decide
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.observations import ClusterView, JobView, NodeView, Window
from pacekeeper.controller.core.peer_stats import Groups
from pacekeeper.controller.core.policy import parse_policy_document
from pacekeeper.controller.core.rank_table import ColumnarRanks, reading
from pacekeeper.controller.core.report_columns import FLOAT_FIELDS, columnar
from pacekeeper.controller.core.state import State
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _rank(i: int, rng: random.Random, layout: str) -> RankScores:
    def score() -> float | None:
        return None if rng.random() < 0.2 else round(rng.uniform(0.3, 1.0), 3)

    sections: dict[str, float | None] = {"step": score(), "fwd": score()}
    if layout == "ragged" and i % 3 == 0:
        sections = {} if i % 2 else {"step": score(), "other": score()}
    return RankScores(
        rank=i,
        node=f"n{(i * 7 % 5) if layout == 'interleaved' else i // 4}",
        gpu_relative=score(),
        gpu_individual=score(),
        gpu_individual_median=score(),
        gpu_relative_median=score(),
        gpu_individual_fast=score(),
        wait_share=None if i % 2 else rng.uniform(0, 0.5),
        section_relative=sections,
        section_individual={} if layout == "no sections" else dict(sections),
        section_samples=i,
        kernel_samples=3 * i,
        group=f"g{i % 2}" if layout == "groups" else None,
        coords={"dp": i % 4, "pp": i // 4 % 2} if layout == "coords" else None,
    )


def _report(n: int, layout: str, seed: int = 0, seq: int = 1) -> ScoreReport:
    rng = random.Random(seed)
    return ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="j"),
        sequence=seq,
        generated_at=T0 + timedelta(seconds=60 * seq),
        window_s=60.0,
        ranks=[_rank(i, rng, layout) for i in range(n)],
    )


def _groups(ranks: Any) -> Any:
    g = Groups.of(ranks)
    return g.keys, g.members


READS: dict[str, Callable[[Any], Any]] = {
    **{f"floats {f}": partial(rank_columns.floats, field=f) for f in FLOAT_FIELDS},
    **{f"given {f}": partial(rank_columns.any_given, field=f) for f in (*FLOAT_FIELDS, "group")},
    "true coords": partial(rank_columns.any_true, field="coords"),
    "true gpu_uuid": partial(rank_columns.any_true, field="gpu_uuid"),
    "sections rel": partial(rank_columns.section_block, field="section_relative"),
    "sections ind": partial(rank_columns.section_block, field="section_individual"),
    "samples": lambda r: rank_columns.ints(r, "kernel_samples", "section_samples"),
    "numbers": rank_columns.numbers,
    "nodes": rank_columns.node_codes,
    "coords": rank_columns.coord_block,
    "groups": _groups,
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and np.array_equal(a, b, True)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _reads(ranks: Any) -> dict[str, Any]:
    with reading():
        return {name: read(ranks) for name, read in READS.items()}


@pytest.mark.parametrize(
    "layout", ["plain", "interleaved", "ragged", "no sections", "groups", "coords"]
)
@pytest.mark.parametrize("n", [0, 1, 9, 40])
def test_parsed_columns_read_what_the_rank_objects_hold(layout: str, n: int) -> None:
    report = _report(n, layout, seed=n)
    parsed = columnar(report)
    assert isinstance(parsed.ranks, ColumnarRanks) and parsed.ranks.parsed is not None
    assert all(a is b for a, b in zip(parsed.ranks, report.ranks, strict=True))
    plain, carried = _reads(list(report.ranks)), _reads(parsed.ranks)
    for name in READS:
        assert _same(carried[name], plain[name]), name


def test_a_decision_on_parsed_columns_is_the_one_on_the_ranks() -> None:
    doc = parse_policy_document(
        {
            "mode": "enforce",
            "defaultPolicy": "p",
            "policies": {"p": {"score": {"kind": "worst"}, "warmup": {"afterJobStartS": 0}}},
        },
        "t",
    )
    cluster = ClusterView(nodes={NodeName(f"n{k}"): NodeView(NodeName(f"n{k}")) for k in range(10)})
    reports = [_report(40, "plain", seed=s, seq=s) for s in range(1, 4)]

    def run(reps: list[ScoreReport]) -> str:
        st, out = State(), []
        for i in range(1, len(reps) + 1):
            job = JobView(JobKey("ml/j"), tuple(reps[:i]), namespace="ml", name="j", started_at=T0)
            o = decide(Window((job,), cluster), st, doc, reps[i - 1].generated_at)
            st = o.next_state
            out.append(repr(o))
        return "\n".join(out)

    assert run([columnar(r) for r in reports]) == run(reports)


@pytest.mark.parametrize(
    "change",
    [
        lambda rs, new: rs.__setitem__(0, new),
        lambda rs, new: rs.__setitem__(slice(0, 1), [new]),
        lambda rs, new: rs.append(new),
        lambda rs, new: rs.insert(0, new),
        lambda rs, new: rs.extend([new]),
        lambda rs, new: rs.__iadd__([new]),
        lambda rs, new: (rs.pop(0), rs.append(new)),
        lambda rs, new: (rs.remove(rs[0]), rs.append(new)),
        lambda rs, new: (rs.__delitem__(0), rs.append(new)),
        lambda rs, new: (rs.reverse(), rs.__setitem__(0, new)),
        lambda rs, new: (rs.sort(key=lambda r: -r.rank), rs.__setitem__(0, new)),
        lambda rs, new: (rs.clear(), rs.append(new)),
        lambda rs, new: (rs.__imul__(1), rs.__setitem__(0, new)),
    ],
)
def test_ranks_changed_after_parsing_are_read_anew(change: Callable[[Any, Any], Any]) -> None:
    parsed = columnar(_report(12, "plain"))
    ranks = parsed.ranks
    assert isinstance(ranks, ColumnarRanks)
    before = _reads(ranks)
    new = ranks[-1].model_copy(update={"rank": 99, "gpu_relative": 0.01, "node": "elsewhere"})
    change(ranks, new)
    assert ranks.parsed is None
    after, plain = _reads(ranks), _reads(list(ranks))
    for name in READS:
        assert _same(after[name], plain[name]), name
    assert not _same(after["numbers"], before["numbers"])


def test_a_copy_with_other_ranks_carries_no_columns() -> None:
    parsed = columnar(_report(8, "plain"))
    other = [r.model_copy(update={"gpu_relative": 0.1}) for r in parsed.ranks]
    moved = parsed.model_copy(update={"ranks": other})
    assert not isinstance(moved.ranks, ColumnarRanks)
    with reading():
        assert rank_columns.floats(moved.ranks, "gpu_relative").tolist() == [0.1] * 8


def test_copies_and_pickles_are_plain_lists() -> None:
    ranks = columnar(_report(6, "plain")).ranks
    for other in (copy.copy(ranks), copy.deepcopy(ranks), pickle.loads(pickle.dumps(ranks))):
        assert type(other) is list and other == list(ranks)


def test_parsed_columns_are_read_only_and_the_wire_form_is_unchanged() -> None:
    report = _report(10, "groups")
    parsed = columnar(report)
    assert columnar(parsed) is parsed
    assert parsed.to_wire() == report.to_wire() and parsed == report
    assert parsed.ranks.parsed is not None  # type: ignore[attr-defined]
    derived = parsed.ranks.parsed.derived  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        derived["x"] = 1
    arrays = [v for v in derived.values() if isinstance(v, np.ndarray)]
    arrays += [m for v in derived.values() if isinstance(v, Groups) for m in v.members]
    assert arrays and not any(a.flags.writeable for a in arrays)
