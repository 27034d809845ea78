"""``confirm: probe`` on Ray: the Ray-side runner asks the job for its confirmation probe
through the ScoreBoard's runtime control (written with the board's control key), once per
request across passes and a runner restart, keeping the operator's other fields; without
the key it writes nothing and the node step waits. End to end, the job's Ray reporter
reads the request from the board, and its answer, published through the board, lets the
taint through."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from controller_helpers import (
    STATE_KEY_BYTES,
    Clock,
    placed_report,
    ray_policy,
    start_workers,
    where,
)
from ray_helpers import driver_job, register, reset_named_board

from pacekeeper.controller.core.decisions import Decision, Reason, Verdict
from pacekeeper.controller.core.policy import ActionKind, PolicyDocument
from pacekeeper.controller.sources.ray_scoreboard import (
    KvStateStore,
    PassResult,
    RayRunner,
    ScoreBoardSource,
    load_control_key,
)
from pacekeeper.detector.control_sources import close_source, make_source
from pacekeeper.detector.reporters.board_control import control_key_digest
from pacekeeper.detector.reporters.ray_scoreboard import RayScoreBoardSink, ScoreBoard
from pacekeeper.detector.score_report import JobIdentity, ProbeEvidence, RankScores, ScoreReport

KEY = "operator-control-key-0123456789"
SLOW_RANK = 3
OPERATOR_CONTROL = {"reportTimeIntervalS": 30.0, "thresholds": {"gpuRelative": 0.7}}


def probe_policy() -> PolicyDocument:
    """Notify at once, the taint (a node step) one minute later, only on a probe."""
    return ray_policy(
        {
            "notify": {"enabled": True, "timeoutS": 60},
            "taintNode": {"enabled": True, "timeoutS": 60},
        },
        extra={"confirm": "probe", "probe": {"slowerThan": 0.9, "timeoutS": 600}},
    )


def counting_board(*, control_key: str | None) -> Any:
    """A real ScoreBoard actor that also keeps every control write it was sent, so a test
    can tell one write from several that wrote the same document."""
    import ray

    # Defined here so Ray ships it by value (the test modules are not importable there).
    class CountingBoard(ScoreBoard):
        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            self.control_writes: list[Any] = []

        def set_control(self, job: str, control: Any, key: str) -> dict[str, Any]:
            self.control_writes.append(control)
            return super().set_control(job, control, key)

        def writes(self) -> list[Any]:
            return list(self.control_writes)

    digest = None if control_key is None else control_key_digest(control_key)
    cls: Any = ray.remote(CountingBoard)
    return cls.options(num_cpus=0).remote(persist=False, control_key_sha256=digest)


@dataclass
class Job:
    """This process's Ray job on ``board``: workers its reports place ranks on, rank 3 slow."""

    board: Any
    token: str
    job: JobIdentity
    placements: list[tuple[int, str]]
    workers: list[Any]
    seq: int = 0

    def report(
        self, clock: Clock, answers: dict[int, float] | None = None, probe_id: str = ""
    ) -> ScoreReport:
        report = placed_report(
            self.job, self.seq, clock.now, self.placements, slow={SLOW_RANK: 0.4}
        )
        self.seq += 1
        if not answers:
            return report
        ranks = [  # what each rank's detector/probe.py puts in the report that answers
            RankScores.model_validate(
                {
                    **r.model_dump(),
                    "probe": ProbeEvidence(
                        id=probe_id, device="cpu", cpu_gflops=answers[r.rank], elapsed_ms=40.0
                    ),
                }
            )
            for r in report.ranks
        ]
        return ScoreReport.build(
            job=report.job,
            sequence=report.sequence,
            generated_at=report.generated_at,
            window_s=report.window_s,
            ranks=ranks,
            world_size=report.summary.world_size,
        )

    def publish(self, clock: Clock) -> None:
        import ray

        ray.get(
            self.board.publish.remote(self.report(clock).to_json(), self.token, "a"), timeout=60
        )


def _job(board: Any, badge: Any) -> Job:
    workers = start_workers(2)
    return Job(board, register(board, badge), driver_job("probe"), where(workers), workers)


def _store() -> KvStateStore:
    return KvStateStore(key=f"test/state/{uuid.uuid4().hex[:6]}", signing_key=STATE_KEY_BYTES)


def _awaiting(result: PassResult) -> list[Decision]:
    return [d for d in result.decisions if d.reason is Reason.AWAITING_PROBE]


def _request(result: PassResult) -> str:
    (held,) = _awaiting(result)
    assert held.verdict is Verdict.HOLD and held.action is ActionKind.TAINT_NODE
    request = held.evidence["probe"]["request"]
    assert isinstance(request, str)
    return request


def _taints(result: PassResult) -> list[str]:
    return [
        d.subject
        for d in result.decisions
        if d.verdict is Verdict.ACT and d.action is ActionKind.TAINT_NODE
    ]


def _up_to_the_probe(runner: RayRunner, job: Job, clock: Clock) -> PassResult:
    """Notify on the first report; the taint is due a minute later: asked, held."""
    job.publish(clock)
    first = runner.run_once()
    assert [(d.action, d.verdict) for d in first.decisions if d.verdict is Verdict.ACT] == [
        (ActionKind.NOTIFY, Verdict.ACT)
    ]
    clock.advance(61)
    job.publish(clock)
    return runner.run_once()


def _control(board: Any, job: Job) -> Any:
    import ray

    return ray.get(board.control.remote(job.job.key), timeout=60)


def test_the_request_is_written_once_across_passes_and_a_restart_and_keeps_the_operators_fields(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    board = counting_board(control_key=KEY)
    ray.get(board.set_control.remote(driver_job().key, OPERATOR_CONTROL, KEY), timeout=60)
    job = _job(board, badge)
    clock, store = Clock(), _store()

    def runner() -> RayRunner:
        return RayRunner(
            probe_policy(),
            source=ScoreBoardSource(board),
            store=store,
            clock=clock,
            control_key=KEY,
        )

    first = runner()
    asked = _up_to_the_probe(first, job, clock)
    request = _request(asked)
    assert _control(board, job) == OPERATOR_CONTROL | {"probe": {"id": request}}
    assert first.stats()["probe_requested"] == 1
    clock.advance(30)
    job.publish(clock)
    again = first.run_once()
    assert _request(again) == request and _taints(again) == []
    restarted = runner()  # the old runner died; its state is in the GCS store
    clock.advance(30)
    job.publish(clock)
    after = restarted.run_once()
    assert _request(after) == request and _taints(after) == []
    assert restarted.stats()["probe_requested"] == 0
    writes = ray.get(board.writes.remote(), timeout=60)
    assert writes == [OPERATOR_CONTROL, OPERATOR_CONTROL | {"probe": {"id": request}}]
    assert _control(board, job) == OPERATOR_CONTROL | {"probe": {"id": request}}
    for w in [*job.workers, board]:
        ray.kill(w)


def test_without_a_control_key_nothing_is_written_and_the_taint_waits(
    ray_cluster: str, badge: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    board = counting_board(control_key=KEY)
    job = _job(board, badge)
    clock = Clock()
    runner = RayRunner(probe_policy(), source=ScoreBoardSource(board), store=_store(), clock=clock)
    with caplog.at_level(logging.WARNING, logger="pacekeeper.controller.sources.ray_scoreboard"):
        asked = _up_to_the_probe(runner, job, clock)
        request = _request(asked)
        clock.advance(30)
        job.publish(clock)
        again = runner.run_once()
    assert _request(again) == request and _taints(asked) == _taints(again) == []
    assert _control(board, job) is None and ray.get(board.writes.remote(), timeout=60) == []
    said = [r for r in caplog.records if r.getMessage() == "probe request not written"]
    assert len(said) == 1, "once per job, not once per pass"
    assert "--control-key-file" in said[0].error and said[0].job == job.job.key  # type: ignore[attr-defined]
    for w in [*job.workers, board]:
        ray.kill(w)


def test_a_refused_write_is_logged_not_raised_and_asked_again_next_pass(
    ray_cluster: str, badge: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    board = counting_board(control_key=None)  # made by a reporter: it takes no control
    job = _job(board, badge)
    clock = Clock()
    runner = RayRunner(
        probe_policy(), source=ScoreBoardSource(board), store=_store(), clock=clock, control_key=KEY
    )
    with caplog.at_level(logging.WARNING, logger="pacekeeper.controller.sources.ray_scoreboard"):
        asked = _up_to_the_probe(runner, job, clock)
        clock.advance(30)
        job.publish(clock)
        again = runner.run_once()
    request = _request(asked)
    assert _request(again) == request and _taints(again) == []
    assert runner.stats()["probe_request_failed"] == 2  # tried on each pass
    probe_writes = [w for w in ray.get(board.writes.remote(), timeout=60) if w.get("probe")]
    assert probe_writes == [{"probe": {"id": request}}] * 2
    said = [r for r in caplog.records if r.getMessage() == "probe request not written"]
    assert len(said) == 1 and "created without a control key" in said[0].error  # type: ignore[attr-defined]
    assert _control(board, job) is None
    for w in [*job.workers, board]:
        ray.kill(w)


def test_the_jobs_ray_reporter_reads_the_request_and_its_answer_lets_the_taint_through(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

    reset_named_board()
    clock = Clock()
    # As `pacekeeper ray-controller --control-key-file` runs it: the runner's own source
    # creates the cluster's board, with the key, before any job reports.
    runner = RayRunner(probe_policy(), store=_store(), clock=clock, control_key=KEY)
    assert runner.run_once().decisions == ()
    board = get_scoreboard(create=False)
    job = _job(board, badge)
    request = _request(_up_to_the_probe(runner, job, clock))

    sink = RayScoreBoardSink(job=None, incarnation="a")
    assert sink.read_control() == {"probe": {"id": request}}
    # The reporting rank's watcher, as Detector.initialize(control="auto") makes it.
    source = make_source("auto", SimpleNamespace(sink=sink), {"PACEKEEPER_CONTROL_POLL_S": "0.1"})
    assert source is not None
    try:
        deadline = time.monotonic() + 30
        while (seen := source.latest()) is None or seen.probe_id != request:
            assert time.monotonic() < deadline, "the reporter never read the request"
            time.sleep(0.1)
    finally:
        close_source(source)

    clock.advance(30)
    answers = dict.fromkeys(range(16), 50.0) | {SLOW_RANK: 5.0}
    sink.send(job.report(clock, answers, request))  # the detector's own publish path
    answered = runner.run_once()
    node = job.placements[0][1]
    assert _taints(answered) == [f"node/{node}"]
    (taint,) = [d for d in answered.decisions if d.action is ActionKind.TAINT_NODE]
    assert taint.evidence["probe"]["confirmed"] is True
    assert taint.evidence["probe"]["ratios"][str(SLOW_RANK)]["cpu_gflops"] == pytest.approx(0.1)
    sink.close()
    for w in job.workers:
        ray.kill(w)
    reset_named_board()


def test_the_control_key_comes_from_a_file_never_a_short_one(tmp_path: Any) -> None:
    assert load_control_key(None, {}) is None
    path = tmp_path / "control.key"
    with pytest.raises(ValueError, match="control key file"):
        load_control_key(path, {})
    path.write_text("short\n")
    with pytest.raises(ValueError, match="at least 16"):
        load_control_key(path, {})
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    assert load_control_key(None, {"PACEKEEPER_CONTROL_KEY_FILE": str(path)}) == KEY
    assert load_control_key(path, {}) == KEY


def test_ray_controller_refuses_a_control_key_file_it_cannot_use(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from pacekeeper.controller.cli.app import app

    policy = tmp_path / "policy.yaml"
    policy.write_text("mode: observe\npolicies: {default: {}}\n")
    short = tmp_path / "short.key"
    short.write_text("guessable")
    for key_file, said in ((tmp_path / "missing.key", "control key file"), (short, "at least 16")):
        result = CliRunner().invoke(
            app, ["ray-controller", "--policy", str(policy), "--control-key-file", str(key_file)]
        )
        assert result.exit_code == 2, result.output
        assert said in result.output and "Traceback" not in result.output
