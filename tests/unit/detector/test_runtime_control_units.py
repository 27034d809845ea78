"""Runtime control's parts without ranks: the document's checks, the settings it gives,
the file source, the interval retune, torchrun's incarnation, and integration modules
that import no training stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pacekeeper.detector import env, identity
from pacekeeper.detector.control import Control, ControlSettings, Thresholds
from pacekeeper.detector.control_sources import FileControl, StaticControl, control_mode
from pacekeeper.detector.interval import IntervalTracker


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({"enabled": 1}, "control.enabled"),
        ({"reportTimeIntervalS": float("inf")}, "control.reportTimeIntervalS"),
        ({"profilingInterval": True}, "control.profilingInterval"),
        ({"thresholds": {"gpuRelative": -0.1}}, "control.thresholds.gpuRelative"),
        ({"thresholds": {"typo": 0.5}}, "control.thresholds: unknown"),
        ({"interval": 5}, "control: unknown"),
        ([1], "control=[1]"),
    ],
)
def test_a_bad_document_is_refused_naming_the_field(doc: object, path: str) -> None:
    with pytest.raises(ValueError, match=path.replace(".", r"\.").replace("[", r"\[")):
        Control.from_wire(doc)


def test_absent_fields_mean_initializes_values() -> None:
    base = ControlSettings.initial(60.0, 1)
    under = base.under(Control.from_wire({"profilingInterval": 3}), report=4)
    assert (under.enabled, under.report_time_interval, under.profiling_interval) == (True, 60.0, 3)
    assert under.report == 4 and under.thresholds == Thresholds()
    assert base.under(None, report=5).same_as(base)
    assert Thresholds(section_relative=0.5).resolved()["section_rel_threshold"] == 0.5
    assert Thresholds().resolved()["gpu_rel_threshold"] == 0.75


def test_the_file_source_keeps_the_last_good_document(tmp_path: Path) -> None:
    path = tmp_path / "control.json"
    source = FileControl(str(path))
    assert source.latest() is None
    path.write_text(json.dumps({"enabled": False}))
    assert source.latest() == Control(enabled=False)
    path.write_text(json.dumps({"enabled": "no"}) + " ")  # refused: the last good stays
    assert source.latest() == Control(enabled=False)
    path.unlink()
    assert source.latest() is None
    static = StaticControl({"reportTimeIntervalS": 2})
    assert static.latest() == Control(report_time_interval_s=2.0)


def test_control_is_exchanged_only_when_every_rank_can_tell() -> None:
    assert control_mode(None, None, {}) is False  # no reporter: nothing to read from
    assert control_mode(None, "kubernetes", {}) is True
    assert control_mode(None, None, {"PACEKEEPER_REPORTER": "ray"}) is True
    assert control_mode(None, "none", {}) is False
    assert control_mode("file:/x", None, {}) is True
    assert control_mode(None, "ray", {"PACEKEEPER_CONTROL": "none"}) is False
    with pytest.raises(ValueError, match="control="):
        control_mode("sometimes", None, {})


def test_a_retuned_interval_counts_from_the_report_that_applied_it() -> None:
    clock = iter(i * 0.01 for i in range(10_000))
    tracker = IntervalTracker(0.1, 1, clock=lambda: next(clock))
    for _ in range(20):
        tracker.iter_increase()
    assert tracker.iter_interval == 10 and tracker.is_interval_elapsed()
    tracker.retune(0.5, 1)
    assert tracker.iter_interval == 50 and tracker.next_report_iter == 70
    assert tracker.is_interval_elapsed()  # the current report stands
    tracker.retune(0, 4)
    assert tracker.iter_interval == 4 and tracker.next_report_iter == 24


def test_a_torchrun_restart_is_a_new_incarnation_of_the_same_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("PACEKEEPER_JOB_NAME", "JOB_NAME", "PET_JOB_NAME", "JOBSET_NAME",
                "KUBERNETES_SERVICE_HOST"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv(env.TORCHELASTIC_RESTART_COUNT, raising=False)
    assert identity.elastic_incarnation() is None
    monkeypatch.setenv(env.TORCHELASTIC_RUN_ID, "run-42")
    monkeypatch.setenv(env.INCARNATION, "pod-1")
    monkeypatch.setenv(env.TORCHELASTIC_RESTART_COUNT, "0")
    assert identity.elastic_incarnation() == "pod-1.r0"
    monkeypatch.setenv(env.TORCHELASTIC_RESTART_COUNT, "1")
    assert identity.elastic_incarnation() == "pod-1.r1"
    assert identity.default_job(None).key == "local:run-42"


@pytest.mark.parametrize("module", ["lightning", "huggingface", "ray_train", "torchelastic"])
def test_an_integration_module_imports_no_training_stack(module: str) -> None:
    probe = (
        f"import sys, pacekeeper.detector.integrations.{module}\n"
        "heavy = ('torch', 'ray', 'lightning', 'pytorch_lightning', 'transformers')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "[]"
