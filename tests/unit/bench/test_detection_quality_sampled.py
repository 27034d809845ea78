"""The sampled detection-quality bench end to end (--quick, a few scenarios): every
policy given is judged on the same scenarios, beside NVRx's rules, and the JSON holds
the cells with exact bounds and the derived seeds."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from pacekeeper.controller.simulation import sampler
from pacekeeper.controller.simulation.sampled_quality import poisson_upper

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(
        "sampled_quality", ROOT / "bench" / "_sampled_quality.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_runs_for_covers_the_gpu_days_in_whole_rounds(bench) -> None:
    n = bench.runs_for(10000.0, 1024, 1800.0)
    assert n % 24 == 0
    assert n * 1024 * 1800 / 86400 >= 10000.0
    assert (n - 24) * 1024 * 1800 / 86400 < 10000.0


def test_quick_run_judges_every_policy_on_the_same_scenarios(bench, tmp_path: Path) -> None:
    out = tmp_path / "q.json"
    policies = [
        ROOT / "docs" / "policies" / "observe.yaml",
        ROOT / "docs" / "policies" / "enforce-gpu.yaml",
    ]
    args = ["--quick", "--runs", "2", "--first", "6", "--out", str(out)]
    bench.main([*args, *(a for p in policies for a in ("--policy", str(p)))])
    doc = json.loads(out.read_text())
    assert doc["ranks"] == 64 and doc["runs"] == 2
    assert [s["seed"] for s in doc["scenarios"]] == [
        sampler.derive_seed("issue38", i) for i in (6, 7)
    ]
    dets = {c["detector"] for c in doc["cells"]}
    assert {"observe", "enforce-gpu", "nvrx:nvrx-0.75"} <= dets
    assert set(doc["policies"]) == {"observe", "enforce-gpu"}
    # Each judged by its own file, not the benchmark's policy under its name.
    assert doc["policies"]["observe"].get("mode", "observe") == "observe"  # the default
    assert doc["policies"]["enforce-gpu"]["mode"] == "enforce"
    for c in doc["cells"]:
        assert c["upper95PerGpuDay"] == pytest.approx(
            poisson_upper(c["falseDisruptions"], c["gpuDays"]), rel=1e-3
        )
    total = [c for c in doc["cells"] if c["family"] == "all" and c["fault"] == "all"]
    assert len(total) == len(dets)
    assert all(c["runs"] == 2 and c["faultyRuns"] == 2 for c in total)  # two slow-GPU runs


def test_chunks_merge_into_the_table_of_one_run(bench, tmp_path: Path) -> None:
    policy = ["--policy", str(ROOT / "docs" / "policies" / "enforce-recommended.yaml")]
    quick = ["--quick", *policy]
    bench.main([*quick, "--indices", "6", "7", "--out", str(tmp_path / "one.json")])
    bench.main([*quick, "--runs", "1", "--first", "6", "--out", str(tmp_path / "a.json")])
    bench.main([*quick, "--runs", "1", "--first", "7", "--out", str(tmp_path / "b.json")])
    merged = tmp_path / "m.json"
    bench.main(
        ["--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(merged)]
    )
    one, both = (json.loads((tmp_path / n).read_text()) for n in ("one.json", "m.json"))
    assert both["cells"] == one["cells"]
    assert both["goals"] == one["goals"]
    assert both["goals"]["detector"] == "enforce-recommended"
    assert merged.with_suffix(".md").read_text() == (tmp_path / "one.md").read_text()
    # Chunks given out of order: each run stays beside its scenario.
    flipped = tmp_path / "f.json"
    bench.main(["--merge", str(tmp_path / "b.json"), str(tmp_path / "a.json"),
                "--out", str(flipped)])  # fmt: skip
    back = json.loads(flipped.read_text())
    assert back["scenarios"] == one["scenarios"]
    assert back["runs_"] == one["runs_"]
    with pytest.raises(SystemExit, match="two chunks"):
        bench.main(["--merge", str(tmp_path / "a.json"), str(tmp_path / "one.json"),
                    "--out", str(tmp_path / "x.json")])  # fmt: skip
