"""Values of ``report_cycle.discover`` and ``watch_if_ddp``, found by mutation (make
mutation, issue 41): which of the run's ``Discovery`` steps runs when (the walk at
``initialize``, the layout at a report), what the report keeps of the layout, whether
DDP models are watched, the guard labels of a failed step, and nothing at all with
discovery switched off. The run is a real single-process ``RunState``; its
``Discovery``'s steps and ``topology_discovery.watch_if_ddp`` are replaced by
recorders (torch is not needed to tell which runs)."""

from __future__ import annotations

from typing import Any

import pytest

from pacekeeper.detector import report_cycle as rc
from pacekeeper.detector import topology_discovery
from pacekeeper.detector.run_config import build_config
from pacekeeper.detector.run_state import RunState


def boom(*_: object) -> Any:
    raise RuntimeError("injected")


def make_run(monkeypatch: pytest.MonkeyPatch, discovery: str = "on") -> RunState:
    monkeypatch.setenv(topology_discovery.ENV, discovery)
    cfg = build_config(["relative_perf_scores"], True, 1, 60.0, "nodeA")
    return RunState.start(cfg, process_group=None, kernel_timing="none", job=None)


class Steps:
    """Records the run's Discovery steps; ``at_report`` returns ``layout``."""

    def __init__(self, run: RunState, layout: object) -> None:
        self.calls: list[object] = []
        self.layout = layout
        found = topology_discovery.of_run(run.payloads)
        found.scan = self.scan  # type: ignore[method-assign]
        found.at_report = self.at_report  # type: ignore[method-assign]
        self.found = found

    def scan(self) -> None:
        self.calls.append("scan")

    def at_report(self, current: object) -> object:
        self.calls.append(("at_report", current))
        return self.layout


def test_initialize_walks_the_job_and_a_report_takes_the_layout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = make_run(monkeypatch)
    before, layout = run.payloads.topology, object()
    steps = Steps(run, layout)
    run.time_collectives = True
    rc.discover(run, at_start=True)
    assert steps.calls == ["scan"]
    assert steps.found.watch_ddp is True
    assert run.payloads.topology is before
    run.time_collectives = False
    rc.discover(run)
    assert steps.calls == ["scan", ("at_report", before)]
    assert steps.found.watch_ddp is False
    assert run.payloads.topology is layout
    assert run.guard.counts() == {}


def test_failed_steps_are_counted_under_their_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(monkeypatch)
    steps = Steps(run, object())
    before = run.payloads.topology
    steps.found.scan = boom  # type: ignore[method-assign]
    rc.discover(run, at_start=True)
    assert run.guard.counts() == {"topology.scan": 1}
    steps.found.at_report = boom  # type: ignore[method-assign]
    rc.discover(run)
    assert run.guard.counts() == {"topology.scan": 1, "topology.discover": 1}
    assert run.payloads.topology is before


def test_switched_off_discovery_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(monkeypatch, "off")
    steps = Steps(run, object())
    before = run.payloads.topology
    run.time_collectives = True
    rc.discover(run, at_start=True)
    rc.discover(run)
    assert steps.calls == [] and run.payloads.topology is before
    watched = record_watch(monkeypatch)
    rc.watch_if_ddp(run, object())
    assert watched == []


def record_watch(monkeypatch: pytest.MonkeyPatch, fail: bool = False) -> list[object]:
    watched: list[object] = []

    def watch(obj: object) -> bool:
        watched.append(obj)
        if fail:
            raise RuntimeError("injected")
        return True

    monkeypatch.setattr(topology_discovery, "watch_if_ddp", watch)
    return watched


def test_ddp_models_are_watched_only_while_collectives_are_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = make_run(monkeypatch)
    watched = record_watch(monkeypatch)
    model = object()
    run.time_collectives = False
    rc.watch_if_ddp(run, model)
    assert watched == []
    run.time_collectives = True
    rc.watch_if_ddp(run, model)
    assert len(watched) == 1 and watched[0] is model
    assert run.guard.counts() == {}


def test_a_failed_watch_is_counted_as_topology_watch_ddp(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = make_run(monkeypatch)
    watched = record_watch(monkeypatch, fail=True)
    run.time_collectives = True
    rc.watch_if_ddp(run, "model")
    assert watched == ["model"]
    assert run.guard.counts() == {"topology.watch_ddp": 1}
