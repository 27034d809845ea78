"""`pacekeeper export`: live history (ScoreBoard, StragglerReport) to replayable JSONL,
each valid report once."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.simulation.runner import read_trace
from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.controller.traces.export import (
    ExportError,
    JsonlExport,
    ray_history,
    status_reports,
)
from pacekeeper.detector.score_report import JobIdentity, Platform

T0 = datetime(2026, 12, 1, tzinfo=UTC)
JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm")


def _wire(seq: int, job: JobIdentity = JOB) -> dict[str, Any]:
    at = T0 + timedelta(seconds=60 * seq)
    return synthetic_report(job=job, sequence=seq, generated_at=at).to_wire()


class _Remote:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


class FakeBoard:
    """The ScoreBoard actor's read methods, answered at once (``get`` is identity)."""

    def __init__(self, history: dict[str, list[dict[str, Any]]]) -> None:
        self.jobs = _Remote(lambda: [{"job": k} for k in history])
        self.window = _Remote(lambda key, n=None: list(history[key]))


def test_each_valid_report_of_the_job_is_written_once_in_order() -> None:
    out = io.StringIO()
    export = JsonlExport(out)
    bad = _wire(3) | {"windowS": -1}
    other = _wire(4, JobIdentity(name="other"))
    for w in (_wire(1), _wire(2), _wire(2), bad, other, _wire(5)):
        export.add(w)
    assert (export.written, export.rejected) == (3, 1)
    lines = out.getvalue().splitlines()
    assert [line.count('"sequence":') for line in lines] == [1, 1, 1]


def test_the_scoreboard_history_of_one_job() -> None:
    board = FakeBoard({"ml/llm": [_wire(1), _wire(2)], "ray:02000000": [_wire(1)]})
    assert len(ray_history(board, "ml/llm", lambda x: x)) == 2
    with pytest.raises(ExportError, match=r"holds 2 jobs .*choose one with --job"):
        ray_history(board, None, lambda x: x)
    with pytest.raises(ExportError, match="has no job 'nope'"):
        ray_history(board, "nope", lambda x: x)


def test_a_stragglerreport_status_yields_its_report_and_incarnation() -> None:
    objs = [{"status": {"report": _wire(1), "incarnation": "a"}}, {"status": {}}, {}]
    assert [inc for _, inc in status_reports(objs)] == ["a"]


def test_cli_follows_a_stragglerreport_and_writes_each_new_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pacekeeper.controller.cli import kube_config
    from pacekeeper.controller.sources import kubernetes

    seen = iter([_wire(1), _wire(1), _wire(2)])

    class Source:
        def __init__(self, client: Any) -> None:
            pass

        def read_report_object(self, namespace: str, name: str) -> dict[str, Any]:
            assert (namespace, name) == ("ml", "llm")
            return {"status": {"report": next(seen), "incarnation": "i"}}

    found = kube_config.KubeConnection(object(), None, "test")
    monkeypatch.setattr(kube_config, "connect", lambda _path: found)
    monkeypatch.setattr(kubernetes, "KubernetesSource", Source)
    monkeypatch.setattr("time.sleep", lambda _s: None)
    ticks = iter([0.0, 0.5, 1.5, 2.5])
    monkeypatch.setattr("time.monotonic", lambda: next(ticks))
    out = tmp_path / "live.jsonl"
    args = ["export", "kubernetes", "--namespace", "ml", "--name", "llm", "-o", str(out)]
    res = CliRunner().invoke(app, [*args, "--follow-s", "3", "--interval-s", "1"])
    assert res.exit_code == 0, res.output
    assert [r.sequence for r in read_trace(out)] == [1, 2]
    assert "wrote 2 reports" in res.output
