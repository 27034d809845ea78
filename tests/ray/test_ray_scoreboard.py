"""The ScoreBoard actor on a real local Ray cluster, fed by real gloo ranks."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import (
    driver_job,
    finish,
    read_latest_in_another_process,
    register,
    reset_named_board,
    start_torchrun,
)

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters import Backoff, Publisher
from pacekeeper.detector.reporters.publish_tokens import PublishRefused
from pacekeeper.detector.reporters.ray_scoreboard import RayScoreBoardSink, get_scoreboard
from pacekeeper.detector.score_report import (
    SCHEMA_VERSION,
    JobIdentity,
    Platform,
    ReportRejected,
    ScoreReport,
)

HERE = Path(__file__).parent
FAST = Backoff(base_s=0.01, max_s=0.2)


def _job() -> JobIdentity:
    """This process's job: a process publishes for its own Ray job only."""
    return driver_job()


def _key_named(name: str) -> str | None:
    """The board's key of the job whose reports carry ``name`` (a torchrun job's reports
    are filed under the Ray job its reporting rank joined as)."""
    import ray

    board = get_scoreboard()
    for head in ray.get(board.jobs.remote()):
        latest = ray.get(board.latest.remote(head["job"]))
        if latest is not None and latest["job"]["name"] == name:
            return str(head["job"])
    return None


def _window(job: str) -> list[dict[str, Any]]:
    import ray

    return ray.get(get_scoreboard().window.remote(job))  # type: ignore[no-any-return]


def _wait_for(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_four_gloo_ranks_report_through_the_board_across_a_board_kill(
    ray_cluster: str, tmp_path: Path
) -> None:
    import ray

    name = f"gloo-{uuid.uuid4().hex[:6]}"
    pause = tmp_path / "resume"
    result = tmp_path / "result.json"
    env = {
        "PACEKEEPER_REPORTER": "ray",
        "PACEKEEPER_RAY_ADDRESS": ray_cluster,
        "PACEKEEPER_JOB_NAME": name,
        "STEPS": "6",
        "REPORT_EVERY": "2",
        "SLOW_RANK": "3",
        "PAUSE_AFTER_STEP": "3",
        "PAUSE_AFTER_STEP_FILE": str(pause),
        "RESULT_FILE": str(result),
    }
    # The job runs in the background so the board can be killed while it trains.
    job = start_torchrun(HERE / "gloo_job.py", 4, env)
    try:
        _wait_for(Path(str(pause) + ".reached"), 180)
        deadline = time.monotonic() + 30
        while (key := _key_named(name)) is None or len(_window(key)) < 2:  # steps 1 and 3
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # Ray restarts it (same store key): history and the reporter's retries survive.
        ray.kill(get_scoreboard(), no_restart=False)
    finally:
        pause.write_text("go")  # never leave the ranks waiting, even when failing
        finish(job, timeout_s=180)
    stats = json.loads(result.read_text())
    assert stats["published"] == 3 and stats["dropped"] == 0 and stats["rejected"] == 0
    history = [ScoreReport.from_wire(w) for w in _window(key)]
    assert [r.sequence for r in history] == sorted({r.sequence for r in history})
    assert len(history) == 3
    latest = ScoreReport.from_wire(json.loads(read_latest_in_another_process(ray_cluster, key)))
    assert latest.sequence == history[-1].sequence
    assert latest.job.platform is Platform.RAY and latest.job.name == name
    assert key == f"ray:{latest.job.ray_job_id}" != f"ray:{ray.get_runtime_context().get_job_id()}"
    assert [r.rank for r in latest.ranks] == [0, 1, 2, 3]
    assert (
        latest.ranks[3].section_relative["compute"]
        < 0.75
        < latest.ranks[0].section_relative["compute"]
    )


@pytest.mark.parametrize("no_restart", [True, False], ids=["recreated", "restarted-by-ray"])
def test_reports_queued_while_the_board_is_down_all_arrive_after_it_is_back(
    ray_cluster: str, no_restart: bool
) -> None:
    import ray

    reset_named_board()
    job = _job()
    sink = RayScoreBoardSink(job=None, incarnation="inc-1")
    publisher = Publisher(sink, max_queue=16, backoff=FAST)
    for seq in range(3):
        publisher.submit(synthetic_report(job=job, sequence=seq))
    assert publisher.flush(timeout_s=30)
    ray.kill(get_scoreboard(), no_restart=no_restart)
    for seq in range(3, 8):
        publisher.submit(synthetic_report(job=job, sequence=seq))
    assert publisher.flush(timeout_s=60)
    stats = publisher.stats()
    publisher.close()
    assert stats.send_errors >= 1, "the kill should have failed at least one send"
    assert stats.published == 8 and stats.dropped_oldest == 0
    # The restarted board lost its tokens (memory only): the sink registered again.
    board_stats = ray.get(get_scoreboard().stats.remote())
    assert board_stats["registered"] == 1 and board_stats["refused"] >= 1
    if no_restart:
        # Created anew, with a new store key: what the old board stored is not its own.
        assert [w["sequence"] for w in _window(job.key)] == list(range(3, 8))
        # At least the three reports and the job's meta; the store may also hold what
        # earlier tests' boards left there, which the new board refuses as well.
        assert board_stats["restore_refused"] >= 3 + 1
    else:
        assert [w["sequence"] for w in _window(job.key)] == list(range(8))


def test_bad_reports_are_refused_at_the_board_with_a_clear_error(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    reset_named_board()
    board = get_scoreboard()
    job = _job()
    token = register(board, badge)
    good = synthetic_report(job=job, sequence=0)
    ray.get(board.publish.remote(good.to_json(), token, "a"))
    newer = SCHEMA_VERSION + 1
    future = good.to_wire() | {"schemaVersion": newer, "sequence": 1}
    with pytest.raises(ReportRejected, match=f"schemaVersion {newer} is newer"):
        ray.get(board.publish.remote(json.dumps(future), token, "a"))
    other = JobIdentity(platform=Platform.RAY, name="x", ray_job_id="7f000000")
    with pytest.raises(PublishRefused, match="job identity mismatch"):
        ray.get(board.publish.remote(synthetic_report(job=other).to_json(), token, "a"))
    with pytest.raises(PublishRefused, match="older than the board"):
        ray.get(board.publish.remote(good.to_json(), job.key, "a"))  # the old signature
    assert ray.get(board.latest.remote(job.key)) == good.to_wire()
    assert ray.get(board.latest.remote(other.key)) is None


def test_a_restarted_job_replaces_its_history_head_with_the_new_incarnation(
    ray_cluster: str,
) -> None:
    import ray

    reset_named_board()
    job = _job()
    first = RayScoreBoardSink(job=None, incarnation="20260101T000000Z-aaaa")
    for seq in range(4):
        first.send(synthetic_report(job=job, sequence=seq))
    second = RayScoreBoardSink(job=None, incarnation="20260101T001000Z-bbbb")
    second.send(synthetic_report(job=job, sequence=0, slow={2: 0.4}))
    first.send(synthetic_report(job=job, sequence=4))  # the old process, late
    board = get_scoreboard()
    latest = ScoreReport.from_wire(ray.get(board.latest.remote(job.key)))
    assert latest.sequence == 0 and latest.summary.worst_rank == 2
    (entry,) = [j for j in ray.get(board.jobs.remote()) if j["job"] == job.key]
    assert entry["incarnation"] == "20260101T001000Z-bbbb" and entry["reports"] == 5
    stats = ray.get(board.stats.remote())
    assert stats["stale"] >= 1
    # Each process registered its own badge; the old one's token was replaced, so it
    # registered again (its badge is of the same job) before its late report.
    assert stats["registered"] == 3 and stats["registration_refused"] == 0
    first.close()
    second.close()


def test_a_report_over_the_boards_bound_arrives_compacted_with_its_worst_ranks(
    ray_cluster: str,
) -> None:
    import ray

    reset_named_board()
    job = _job()
    bound = 64 * 1024
    sink = RayScoreBoardSink(job=None, incarnation="big", max_report_bytes=bound)
    big = synthetic_report(job=job, sequence=0, world_size=2048, slow={1500: 0.3, 7: 0.5})
    assert len(big.to_json()) > bound  # the premise: sent whole, the board would refuse it
    sink.send(big)
    wire = ray.get(get_scoreboard().latest.remote(job.key))
    assert wire is not None
    got = ScoreReport.from_wire(wire)
    assert len(got.to_json()) <= bound  # what the board counted
    assert got.truncated and 0 < len(got.ranks) < 2048
    assert {1500, 7} <= {r.rank for r in got.ranks}  # the worst kept
    assert got.summary.worst_rank == 1500 and got.summary.world_size == 2048
    small = synthetic_report(job=job, sequence=1)
    sink.send(small)  # under the bound: sent as it is
    assert ray.get(get_scoreboard().latest.remote(job.key)) == small.to_wire()
    sink.close()


def test_sink_refuses_a_report_of_another_job_without_contacting_the_board() -> None:
    sink = RayScoreBoardSink(job="ray:mine", incarnation="x")
    other = JobIdentity(platform=Platform.RAY, name="t", ray_job_id="02000000")
    with pytest.raises(ReportRejected, match="'ray:mine'"):
        sink.send(synthetic_report(job=other))


def test_store_holds_only_the_bounded_history_and_a_new_board_reloads_it(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

    prefix = f"test-{uuid.uuid4().hex[:6]}/"
    store_key = uuid.uuid4().hex * 2
    actor = ray.remote(ScoreBoard).options(num_cpus=0)
    board = actor.remote(max_history=3, store_prefix=prefix, store_key=store_key)
    token = register(board, badge)
    job = _job()
    for seq in range(10):
        ray.get(board.publish.remote(synthetic_report(job=job, sequence=seq).to_json(), token))
    assert ray.get(board.stored_keys.remote()) == 3 + 1  # three reports and the job's meta
    ray.kill(board)
    reborn = actor.remote(max_history=3, store_prefix=prefix, store_key=store_key)
    assert [w["sequence"] for w in ray.get(reborn.window.remote(job.key))] == [7, 8, 9]
    assert ray.get(reborn.stats.remote())["restored_jobs"] == 1
    ray.kill(reborn)
