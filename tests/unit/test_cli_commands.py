"""The ``pacekeeper`` command line as a new user meets it: ``--version``, described
commands, one-line refusals with exit 2 instead of tracebacks, ``replay`` naming ranks
and modes, ``ray-controller``'s readable log lines, and the status view's pieces."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.cli.ray_controller import TextWithFields
from pacekeeper.controller.cli.status_view import heat_row, job_status, watch_view
from pacekeeper.controller.core.ids import JobKey, NodeName
from pacekeeper.controller.core.marks import MarkKind
from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.state import (
    ActionStamp,
    ClusterState,
    JobState,
    LadderState,
    MarkRecord,
    NodeState,
)

WIDE = {"COLUMNS": "200"}
BAD_POLICY = "policies:\n  default:\n    thresholds: {act: 0.9}\n"
DRY_RUN = """
mode: dry-run
policies:
  default:
    score: {kind: gpuIndividual}
    thresholds: {act: 0.9, recover: 0.95}
    ladder:
      notify: {enabled: true, timeoutS: 60}
      restartRank: {enabled: true, maxAttempts: 1}
"""


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args), env=WIDE)
    return res.exit_code, res.output


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "t.jsonl"
    args = ["--scenario", "slow-gpu-20", "--ranks", "16", "--duration", "1200"]
    code, out = run("simulate", *args, "--trace", str(path))
    assert code == 0, out
    return path


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    code, out = run("--version")
    assert code == 0
    assert out.strip() == f"pacekeeper {version('pacekeeper')}"


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (["operator", "run"], "Run the Kubernetes controller"),
        (["ray-controller"], "Run the Ray-side controller"),
        (["status", "kubernetes"], "StragglerReport"),
        (["status", "ray"], "ScoreBoard"),
    ],
)
def test_every_command_says_what_it_does(command: list[str], words: str) -> None:
    code, out = run(*command, "--help")
    assert code == 0, out
    assert words in out


def test_simulate_shorter_than_a_window_is_one_line_and_exit_2() -> None:
    code, out = run("simulate", "--duration", "30")
    assert code == 2
    assert "--duration 30 is shorter than one report window (60 s)" in out
    assert "Traceback" not in out


def test_replay_of_an_empty_trace_exits_2_saying_so(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DRY_RUN)
    (tmp_path / "t.jsonl").write_text("\n")
    code, out = run(
        "replay", "--policy", str(tmp_path / "p.yaml"), "--trace", str(tmp_path / "t.jsonl")
    )
    assert code == 2
    assert "holds no ScoreReports: nothing to replay" in out
    assert "0 decisions" not in out


def test_replay_refuses_a_policy_section_the_trace_never_timed(trace: Path) -> None:
    code, out = run(
        "replay", "--policy", "docs/policies/section-dry-run.yaml", "--trace", str(trace)
    )
    assert code == 2
    assert "policy 'forward-time' scores section 'forward', which no report" in out
    assert "StaleData" not in out


def test_replay_names_the_rank_it_would_restart_and_the_mode(trace: Path, tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DRY_RUN)
    code, out = run("replay", "--policy", str(tmp_path / "p.yaml"), "--trace", str(trace))
    assert code == 0, out
    restart = [ln for ln in out.splitlines() if "restartRank" in ln and "(would act)" in ln]
    assert restart, out
    cells = [c.strip() for c in restart[0].split("│")]
    assert "12" in cells  # the faulty rank of slow-gpu-20 on 16 ranks, seed 0
    assert "dry-run" in cells and "ObserveMode" in cells
    assert "decisions under mode dry-run" in out


@pytest.mark.parametrize(
    "command",
    [
        ["policy", "validate", "{p}"],
        ["replay", "--policy", "{p}", "--trace", "{p}"],
        ["simulate", "--policy", "{p}", "--ranks", "4", "--duration", "60"],
        ["ray-controller", "--policy", "{p}"],
        ["operator", "run", "--policy", "{p}", "--no-leader-election"],
    ],
)
def test_an_invalid_policy_exits_2_everywhere(command: list[str], tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(BAD_POLICY)
    code, out = run(*(a.format(p=p) for a in command))
    assert code == 2, out
    assert "thresholds.recover" in out or "recover" in out


def test_ray_controller_text_logs_carry_the_decision_fields() -> None:
    record = logging.LogRecord("pk", logging.INFO, "", 0, "decision", None, None)
    record.summary = "ray:02 rank 2: hold restartRank ObserveMode"
    line = TextWithFields().format(record)
    assert line.endswith("INFO decision summary='ray:02 rank 2: hold restartRank ObserveMode'")


NOW = datetime(2026, 1, 1, tzinfo=UTC)
WIRE_RANKS = [
    {"rank": r, "node": f"n{r // 2}", "gpuRelative": 0.5 if r == 3 else 0.99} for r in range(4)
]


def _wire() -> dict[str, object]:
    from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

    ranks = [
        RankScores(rank=r["rank"], node=r["node"], gpu_relative=r["gpuRelative"])
        for r in WIRE_RANKS
    ]
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llama"),
        sequence=7,
        generated_at=NOW,
        window_s=30.0,
        ranks=ranks,
    )
    return report.to_wire()


def test_status_line_names_worst_rank_verdict_marks_and_budget() -> None:
    job = JobKey("ml/llama")
    mark = MarkRecord(applied_at=NOW, holders=(job,), policy="gpu", action_key="k", simulated=True)
    cluster = ClusterState(
        nodes={NodeName("n1"): NodeState(marks={MarkKind.TAINT: mark})},
        stamps=(
            ActionStamp(NOW - timedelta(minutes=5), job),
            ActionStamp(NOW - timedelta(hours=2), job),
            ActionStamp(NOW, JobKey("ml/other")),
        ),
    )
    state = JobState(
        first_seen_at=NOW,
        ladders={
            NodeName("n1"): LadderState(started_at=NOW, step=ActionKind.TAINT_NODE, attempts=1)
        },
    )
    records = [
        {"verdict": "hold", "reason": "Healthy", "subject": "job"},
        {"verdict": "act", "action": "taintNode", "reason": "BelowThreshold", "subject": "node/n1",
         "mode": "enforce", "policy": "gpu"},
    ]  # fmt: skip
    s = job_status(job, _wire(), state, records, cluster, NOW)
    assert s.ranks == 4 and s.sequence == 7
    assert (s.worst[0].rank, s.worst[0].node, s.worst[0].score) == (3, "n1", 0.5)
    assert (s.verdict, s.action, s.reason, s.subject) == (
        "act",
        "taintNode",
        "BelowThreshold",
        "node/n1",
    )
    assert s.marks == (f"{MarkKind.TAINT} on n1 (simulated)",)
    assert s.actions_last_hour == 1
    assert s.ladders == ("n1: taintNode x1",)
    assert s.to_json()["worst"][0] == {"rank": 3, "node": "n1", "score": 0.5}


def test_status_of_a_job_without_report_or_decision_shows_none_yet() -> None:
    s = job_status("ml/new", None, None, [], ClusterState(), NOW)
    assert (s.ranks, s.worst, s.verdict, s.marks, s.actions_last_hour) == (0, (), None, (), 0)
    watch_view([s], "t")  # renders without a report


def test_heat_row_marks_slow_ranks_and_unmeasured_ones() -> None:
    assert heat_row([0.99, 0.8, 0.5, None]).plain == "■▓█·"  # the model's 0.7 / 0.85
    assert heat_row([1.0] * 5, width=2).plain == "■■\n■■\n■"
