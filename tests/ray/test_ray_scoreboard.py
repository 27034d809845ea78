"""The ScoreBoard actor on a real local Ray cluster, fed by real gloo ranks."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import finish, read_latest_in_another_process, start_torchrun

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters import Backoff, Publisher
from pacekeeper.detector.reporters.ray_scoreboard import RayScoreBoardSink, get_scoreboard
from pacekeeper.detector.score_report import JobIdentity, Platform, ReportRejected, ScoreReport

HERE = Path(__file__).parent
FAST = Backoff(base_s=0.01, max_s=0.2)


def _job() -> JobIdentity:
    return JobIdentity(platform=Platform.RAY, name="t", ray_job_id=uuid.uuid4().hex[:8])


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
        key = f"local:{name}"
        deadline = time.monotonic() + 30
        while len(_window(key)) < 2:  # reports after steps 1 and 3 so far
            assert time.monotonic() < deadline
            time.sleep(0.05)
        ray.kill(get_scoreboard(), no_restart=True)
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
    assert [w["sequence"] for w in _window(job.key)] == list(range(8))


def test_bad_reports_are_refused_at_the_board_with_a_clear_error(ray_cluster: str) -> None:
    import ray

    board = get_scoreboard()
    job = _job()
    good = synthetic_report(job=job, sequence=0)
    ray.get(board.publish.remote(good.to_json(), job.key, "a"))
    future = good.to_wire() | {"schemaVersion": 2, "sequence": 1}
    with pytest.raises(ReportRejected, match="schemaVersion 2 is newer"):
        ray.get(board.publish.remote(json.dumps(future), job.key, "a"))
    with pytest.raises(ReportRejected, match="job identity mismatch"):
        ray.get(board.publish.remote(good.to_json(), "ray:someone-else", "a"))
    assert ray.get(board.latest.remote(job.key)) == good.to_wire()


def test_a_restarted_job_replaces_its_history_head_with_the_new_incarnation(
    ray_cluster: str,
) -> None:
    import ray

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
    assert ray.get(board.stats.remote())["stale"] >= 1


def test_sink_refuses_a_report_of_another_job_without_contacting_the_board() -> None:
    sink = RayScoreBoardSink(job="ray:mine", incarnation="x")
    with pytest.raises(ReportRejected, match="'ray:mine'"):
        sink.send(synthetic_report(job=_job()))


def test_store_holds_only_the_bounded_history_and_a_new_board_reloads_it(
    ray_cluster: str,
) -> None:
    import ray

    from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

    prefix = f"test-{uuid.uuid4().hex[:6]}/"
    actor = ray.remote(ScoreBoard).options(num_cpus=0)
    board = actor.remote(max_history=3, store_prefix=prefix)
    job = _job()
    for seq in range(10):
        ray.get(board.publish.remote(synthetic_report(job=job, sequence=seq).to_json(), job.key))
    assert ray.get(board.stored_keys.remote()) == 3 + 1  # three reports and the job's meta
    ray.kill(board)
    reborn = actor.remote(max_history=3, store_prefix=prefix)
    assert [w["sequence"] for w in ray.get(reborn.window.remote(job.key))] == [7, 8, 9]
    assert ray.get(reborn.stats.remote())["restored_jobs"] == 1
    ray.kill(reborn)
