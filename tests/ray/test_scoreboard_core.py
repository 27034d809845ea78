"""ScoreBoard rules without Ray: validation, dedup, incarnations, bounds, queries, and
that only a job's own token writes its reports."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters.publish_tokens import PublishRefused, UnknownToken
from pacekeeper.detector.reporters.scoreboard import Outcome, ScoreBoardCore
from pacekeeper.detector.score_report import JobIdentity, Platform, ReportRejected

JOB = JobIdentity(platform=Platform.RAY, name="train", ray_job_id="01000000")
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _wire(seq: int, *, job: JobIdentity = JOB, at: datetime | None = None) -> dict[str, Any]:
    return synthetic_report(
        job=job, sequence=seq, generated_at=at or T0 + timedelta(seconds=seq)
    ).to_wire()


def _token(board: ScoreBoardCore, job: str) -> str:
    """The job's token on ``board``, registered on first use (as its badge would)."""
    tokens: dict[str, str] = board.__dict__.setdefault("_test_tokens", {})
    if job not in tokens:
        tokens[job] = board.register(job, f"badge-of-{job}", now=0.0)
    return tokens[job]


def _publish(board: ScoreBoardCore, payload: Any, inc: str | None = "a", job: str | None = None):
    return board.publish(payload, token=_token(board, job or JOB.key), incarnation=inc, now=0.0)


def test_latest_is_the_newest_accepted_report() -> None:
    board = ScoreBoardCore()
    for seq in range(3):
        assert _publish(board, json.dumps(_wire(seq))).outcome is Outcome.ACCEPTED
    latest = board.latest(JOB.key)
    assert latest is not None and latest["sequence"] == 2
    assert [w["sequence"] for w in board.window(JOB.key)] == [0, 1, 2]


def test_repeated_delivery_of_one_report_is_stored_once() -> None:
    board = ScoreBoardCore()
    _publish(board, _wire(0))
    _publish(board, _wire(1))
    assert _publish(board, _wire(1)).outcome is Outcome.DUPLICATE
    assert _publish(board, _wire(0)).outcome is Outcome.DUPLICATE
    assert [w["sequence"] for w in board.window(JOB.key)] == [0, 1]


def test_restarted_job_with_sequence_reset_is_a_new_incarnation() -> None:
    board = ScoreBoardCore()
    for seq in range(5):
        _publish(board, _wire(seq), inc="first")
    later = T0 + timedelta(minutes=10)
    result = _publish(board, _wire(0, at=later), inc="second")
    assert result.outcome is Outcome.NEW_INCARNATION
    latest = board.latest(JOB.key)
    assert latest is not None and latest["sequence"] == 0
    assert board.jobs()[0]["incarnation"] == "second"
    # A straggling report of the old process must not overwrite the new one.
    assert _publish(board, _wire(5), inc="first").outcome is Outcome.STALE
    latest = board.latest(JOB.key)
    assert latest is not None and latest["generatedAt"].startswith("2026-11-30T12:10")


def test_restart_without_incarnation_is_recognised_by_a_later_generation_time() -> None:
    board = ScoreBoardCore()
    _publish(board, _wire(7), inc=None)
    later = T0 + timedelta(hours=1)
    assert _publish(board, _wire(0, at=later), inc=None).outcome is Outcome.NEW_INCARNATION
    assert _publish(board, _wire(0, at=later), inc=None).outcome is Outcome.DUPLICATE


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda w: w | {"schemaVersion": 99}, "schemaVersion 99 is newer"),
        (
            lambda w: w | {"ranks": [w["ranks"][0] | {"gpuRelative": float("nan")}]},
            "gpuRelative",
        ),
        (
            lambda w: w | {"ranks": [w["ranks"][0] | {"sectionRelative": {"fwd": -0.5}}]},
            "sectionRelative.fwd",
        ),
        (lambda w: w | {"ranks": "x" * 5000}, "payload is"),
    ],
    ids=["future-schema", "nan-score", "negative-score", "oversize"],
)
def test_bad_report_is_refused_with_the_field_named_and_nothing_else_lost(
    mutate: Any, message: str
) -> None:
    board = ScoreBoardCore(max_payload_bytes=4000)
    good = _wire(0)
    _publish(board, good)
    bad = mutate(_wire(1))
    with pytest.raises(ReportRejected, match=message.replace(".", r"\.")):
        _publish(board, json.dumps(bad) if message != "gpuRelative" else bad)
    assert board.latest(JOB.key) == good
    assert board.counters["rejected"] == 1
    assert _publish(board, _wire(1)).outcome is Outcome.ACCEPTED


def test_report_for_another_job_is_refused_naming_both_identities() -> None:
    board = ScoreBoardCore()
    other = JobIdentity(platform=Platform.RAY, name="other", ray_job_id="02000000")
    with pytest.raises(PublishRefused, match=r"registered for 'ray:01000000'.*'ray:02000000'"):
        _publish(board, _wire(0, job=other))
    assert board.jobs() == []
    assert board.counters["refused"] == 1


@pytest.mark.parametrize(
    ("token", "error", "message"),
    [
        (None, PublishRefused, "needs the token"),
        ("", PublishRefused, "needs the token"),
        ("ray:01000000", PublishRefused, "older than the board"),
        ("guessed-token", UnknownToken, "not a registered job's current one"),
    ],
    ids=["none", "empty", "job-key-of-old-reporters", "guessed"],
)
def test_publish_without_the_jobs_token_is_refused_counted_and_never_stored(
    token: Any, error: type[Exception], message: str
) -> None:
    board = ScoreBoardCore()
    board.register(JOB.key, "badge", now=0.0)
    with pytest.raises(error, match=message):
        board.publish(_wire(0), token=token, incarnation="a", now=0.0)
    assert board.jobs() == [] and board.counters["refused"] == 1
    assert board.counters["accepted"] == 0 and board.counters["rejected"] == 0


def test_registering_again_replaces_the_token_and_the_old_one_stops_working() -> None:
    board = ScoreBoardCore()
    first = board.register(JOB.key, "rank0-process-1", now=0.0)
    assert board.publish(_wire(0), token=first, incarnation="a", now=0.0).outcome is (
        Outcome.ACCEPTED
    )
    second = board.register(JOB.key, "rank0-process-2", now=1.0)  # rank 0 restarted
    assert second != first
    with pytest.raises(UnknownToken):
        board.publish(_wire(1), token=first, incarnation="a", now=2.0)
    assert board.publish(_wire(1), token=second, incarnation="b", now=2.0).outcome is (
        Outcome.NEW_INCARNATION
    )
    assert board.counters["registered"] == 2


def test_jobs_beyond_the_bound_evict_the_least_recently_updated() -> None:
    board = ScoreBoardCore(max_jobs=2)
    jobs = [JobIdentity(platform=Platform.RAY, name=f"j{i}", ray_job_id=f"0{i}") for i in range(3)]
    for i, job in enumerate(jobs):
        token = _token(board, job.key)
        result = board.publish(_wire(0, job=job), token=token, incarnation="a", now=float(i))
    assert result.evicted_jobs == (jobs[0].key,)
    assert [j["job"] for j in board.jobs()] == sorted([jobs[1].key, jobs[2].key])
    assert board.counters["evicted_jobs"] == 1


@settings(max_examples=25, deadline=None)
@given(max_history=st.integers(1, 6), sequences=st.lists(st.integers(0, 20), max_size=30))
def test_history_never_exceeds_its_bound_and_stays_in_sequence_order(
    max_history: int, sequences: list[int]
) -> None:
    board = ScoreBoardCore(max_history=max_history)
    for seq in sequences:
        _publish(board, _wire(seq))
    stored = [w["sequence"] for w in board.window(JOB.key)]
    assert len(stored) <= max_history
    assert stored == sorted(set(stored))


def test_window_selects_the_last_n_and_those_after_a_time() -> None:
    board = ScoreBoardCore()
    for seq in range(6):
        _publish(board, _wire(seq))
    assert [w["sequence"] for w in board.window(JOB.key, n=2)] == [4, 5]
    since = (T0 + timedelta(seconds=3)).isoformat()
    assert [w["sequence"] for w in board.window(JOB.key, since=since)] == [4, 5]
    assert [w["sequence"] for w in board.window(JOB.key, n=1, since=since)] == [5]
    assert board.window("ray:unknown") == []
    with pytest.raises(ValueError, match="timezone"):
        board.window(JOB.key, since="2026-11-30T12:00:00")


def test_restore_rebuilds_history_and_keeps_counting_after_it() -> None:
    board = ScoreBoardCore(max_history=3)
    entries = [_publish(board, _wire(seq)).entry for seq in range(5)]
    fresh = ScoreBoardCore(max_history=3)
    fresh.restore([e for e in entries if e is not None], "a", [])
    assert [w["sequence"] for w in fresh.window(JOB.key)] == [2, 3, 4]
    assert _publish(fresh, _wire(4)).outcome is Outcome.DUPLICATE
    result = _publish(fresh, _wire(5))
    assert result.entry is not None and result.entry.counter == 5


def test_history_is_bounded_in_bytes_but_always_keeps_the_newest_report() -> None:
    size = len(json.dumps(_wire(0), separators=(",", ":")))
    board = ScoreBoardCore(max_job_bytes=int(size * 2.5))
    results = [_publish(board, json.dumps(_wire(seq), separators=(",", ":"))) for seq in range(5)]
    assert [w["sequence"] for w in board.window(JOB.key)] == [3, 4]
    assert [e.sequence for e in results[-1].dropped] == [2]
    tiny = ScoreBoardCore(max_job_bytes=10)
    _publish(tiny, _wire(0))
    _publish(tiny, _wire(1))
    assert [w["sequence"] for w in tiny.window(JOB.key)] == [1]
