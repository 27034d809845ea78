"""Runtime control through the StragglerReport's ``spec.control``, against the API
harness over real HTTP: two torchrun gloo ranks start disabled by the spec a platform
engineer wrote, and switch on together, at the same report, when the spec changes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from harness import RunningServer
from job_env import pod_env
from reporter_helpers import CRD_PATH, crd

from pacekeeper.detector.control import Control
from pacekeeper.detector.reporters.k8s_status import GROUP, PLURAL, VERSION
from pacekeeper.detector.score_report import ScoreReport

JOB = Path(__file__).with_name("control_job.py")
API_VERSION = f"{GROUP}/{VERSION}"


def _report(control: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "StragglerReport",
        "metadata": {"name": "ctl-job", "namespace": "default"},
        "spec": {
            "job": {"platform": "kubernetes", "name": "ctl-job", "namespace": "default"},
            "control": control,
        },
    }


def test_spec_control_disables_then_enables_every_rank_at_the_same_report(
    k8s_server: RunningServer, tmp_path: Path
) -> None:
    k8s_server.apply_yaml(CRD_PATH)
    k8s_server.apply(_report({"enabled": False}))
    env = pod_env(tmp_path, k8s_server.url, "ctl-job") | {
        "PACEKEEPER_CONTROL_POLL_S": "0.1",
        "PAUSE_AT": "30",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         "--nproc-per-node=2", str(JOB)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "reached").exists():
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the job never reached its pause"
            time.sleep(0.05)
        obj = k8s_server.read(API_VERSION, "StragglerReport", "ctl-job", "default")
        assert obj is not None and not dict(obj).get("status")  # disabled: nothing published
        k8s_server.apply(_report({"enabled": True}))
        (tmp_path / "go").write_text("1")
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output[-4000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["errors"] == {} for r in ranks), [r["errors"] for r in ranks]
    # The same control at the same reports on both ranks (rank 1 never reads the API).
    follow = [[rec[:3] for rec in r["records"]] for r in ranks]
    assert follow[0] == follow[1]
    records = ranks[0]["records"]
    assert all(enabled is False for it, enabled, _, _ in records if it <= 30)
    enabled_at = [(it, seq) for it, enabled, seq, _ in records if enabled]
    assert enabled_at and enabled_at[0][0] == 31  # the first report after the change
    assert {seq for _, seq in enabled_at} == {enabled_at[0][1]}
    produced = [it for it, enabled, _, made in records if made]
    assert produced and produced[0] == 32  # the enabling report's window was not timed
    status = dict(k8s_server.read(API_VERSION, "StragglerReport", "ctl-job", "default") or {})
    report = ScoreReport.from_wire(status["status"]["report"])
    assert [r.rank for r in report.ranks] == [0, 1]
    assert status["spec"]["control"] == {"enabled": True}  # the job never writes spec
    assert k8s_server.history.find(verb="patch", plural=PLURAL, subresource=None) == []


def _control_validator() -> Any:
    import jsonschema

    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    control = schema["properties"]["spec"]["properties"]["control"]
    return jsonschema.Draft4Validator(control)


GOOD = [
    {},
    {"enabled": False},
    {"reportTimeIntervalS": 0, "profilingInterval": 0},
    {"reportTimeIntervalS": 12.5, "thresholds": {"gpuRelative": 0.6, "sectionIndividual": 1}},
]
BAD = [
    {"enabled": "no"},
    {"reportTimeIntervalS": -1},
    {"profilingInterval": -2},
    {"thresholds": {"gpuRelative": 1.5}},
]


@pytest.mark.parametrize("doc", GOOD)
def test_what_the_crd_admits_the_detector_applies(doc: dict[str, Any]) -> None:
    assert list(_control_validator().iter_errors(doc)) == []
    assert Control.from_wire(doc).to_wire() == {
        k: v for k, v in doc.items() if k != "thresholds"
    } | ({"thresholds": doc["thresholds"]} if "thresholds" in doc else {})


@pytest.mark.parametrize("doc", BAD)
def test_what_the_crd_refuses_the_detector_refuses_too(doc: dict[str, Any]) -> None:
    assert list(_control_validator().iter_errors(doc)) != []
    with pytest.raises(ValueError, match=r"control\."):
        Control.from_wire(doc)
