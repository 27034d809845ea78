"""The real ByteDance traces (OSDI'25 artifact, read in place from shared/data) as a
drop-in job reports them: without any rank's coordinates (issue 39). AR — one worker
slowed — gets its culprit acted on and no one else; SE — sequence-length imbalance and
a longer last stage, no fault — gets nothing; under every policy of docs/policies/ and
the benchmark policy, with 8 and 4 GPUs a node. Without the controller's pattern test
(``structure_pattern``) AR's last stage had a healthy node notified and tainted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "real_traces.py"
TRACES = ROOT / ".." / "shared" / "data" / "bytedance-straggler-traces"

pytestmark = [
    pytest.mark.skipif(not TRACES.is_dir(), reason=f"the artifact traces are absent ({TRACES})"),
    pytest.mark.skipif(
        importlib.util.find_spec("pyarrow") is None, reason="pyarrow reads the parquet traces"
    ),
]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCH.parent))
    spec = importlib.util.spec_from_file_location("real_traces_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _outcomes(bench: ModuleType, name: str, culprits: frozenset[int], steps: int) -> list:
    case = bench.load_case(name, culprits)
    trace = bench.traces_of(case, steps)[False]
    out = []
    for gpus in bench.LAYOUTS[name]:
        for policy, doc in bench.policies():
            out.append((policy, gpus, bench.our_outcome(trace, case, doc, gpus)))
    return out


def test_ar_without_coordinates_acts_on_its_culprit_only(bench: ModuleType) -> None:
    outcomes = _outcomes(bench, "AR", frozenset({0}), 8)
    examples = {p.stem for p in (ROOT / "docs" / "policies").glob("*.yaml")}
    assert {p for p, _, _ in outcomes} == examples | {"benchmark policy"}
    for policy, gpus, out in outcomes:
        assert out.others == [], (policy, gpus, out.others)
        assert out.acted_at is not None and out.first_named is not None, (policy, gpus)
        assert out.acted_at - out.first_named <= 2, (policy, gpus)


@pytest.mark.parametrize("steps", [8, 2], ids=["8-steps", "2-steps"])
def test_se_without_coordinates_gets_nothing(bench: ModuleType, steps: int) -> None:
    for policy, gpus, out in _outcomes(bench, "SE", frozenset(), steps):
        assert out.acted_at is None and out.others == [], (policy, gpus, out.others)
        assert out.hardware == 0, (policy, gpus)
