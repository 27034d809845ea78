"""The NVRx-compatible surface: names, defaults, bad input, Report and StragglerId."""

from __future__ import annotations

import inspect
import math
import pickle
import subprocess
import sys

import pytest

from pacekeeper import detector as straggler
from pacekeeper.detector import Detector, Report, Statistic, StragglerId


def _report(**overrides: object) -> Report:
    fields = {
        "gpu_relative_perf_scores": {},
        "section_relative_perf_scores": {},
        "gpu_individual_perf_scores": {},
        "section_individual_perf_scores": {},
        "rank_to_node": {0: "n0", 1: "n0", 2: "n1", 3: "n1"},
        "local_section_summaries": {},
        "local_kernel_summaries": {},
        "generate_report_elapsed_time": 1.0,
        "gather_on_rank0": True,
        "rank": 0,
    }
    fields.update(overrides)
    return Report(**fields)  # type: ignore[arg-type]


def test_compat_import_forms_expose_the_same_classes() -> None:
    from pacekeeper.detector import straggler as inner

    for name in ("Detector", "CallableId", "CustomSection", "Report", "StragglerId", "Statistic"):
        assert getattr(straggler, name) is getattr(inner, name)


def test_initialize_keeps_nvrx_keywords_and_defaults() -> None:
    params = inspect.signature(Detector.initialize).parameters
    assert {k: params[k].default for k in list(params)[:5]} == {
        "scores_to_compute": "all",
        "gather_on_rank0": True,
        "profiling_interval": 1,
        "report_time_interval": 60,
        "node_name": None,
    }
    section = inspect.signature(Detector.detection_section).parameters
    assert section["name"].default is None and section["profile_cuda"].default is True
    thresholds = inspect.signature(Report.identify_stragglers).parameters
    assert [p.default for p in list(thresholds.values())[1:]] == [0.75] * 4


def test_straggler_id_repr_is_parseable_like_nvrx() -> None:
    assert repr(StragglerId(rank=3, node="n1")) == "StragglerId(rank=3, node='n1')"
    assert StragglerId(3, "n1") == StragglerId(rank=3, node="n1")
    assert [m.name for m in Statistic] == ["MIN", "MAX", "MED", "AVG", "STD", "NUM"]


def test_detector_cannot_be_instantiated() -> None:
    with pytest.raises(RuntimeError, match="should not be instantiated"):
        Detector()


def test_identify_stragglers_flags_strictly_below_and_never_nan() -> None:
    report = _report(
        gpu_relative_perf_scores={0: 1.0, 1: 0.75, 2: 0.7499, 3: math.nan},
        gpu_individual_perf_scores={0: 0.1},
        section_relative_perf_scores={"fwd": {0: 1.0, 2: 0.5}, "bwd": {0: 0.9, 1: math.nan}},
        section_individual_perf_scores={"fwd": {1: 0.2}},
    )
    flagged = report.identify_stragglers()
    assert set(flagged) == {
        "straggler_gpus_relative",
        "straggler_gpus_individual",
        "straggler_sections_relative",
        "straggler_sections_individual",
    }
    assert flagged["straggler_gpus_relative"] == {StragglerId(2, "n1")}
    assert flagged["straggler_gpus_individual"] == {StragglerId(0, "n0")}
    assert flagged["straggler_sections_relative"] == {"fwd": {StragglerId(2, "n1")}}
    assert flagged["straggler_sections_individual"] == {"fwd": {StragglerId(1, "n0")}}
    custom = report.identify_stragglers(gpu_rel_threshold=0.76, section_rel_threshold=0.95)
    assert custom["straggler_gpus_relative"] == {StragglerId(1, "n0"), StragglerId(2, "n1")}
    assert set(custom["straggler_sections_relative"]) == {"fwd", "bwd"}


def test_report_survives_pickling_with_summaries() -> None:
    Detector.initialize()
    for _ in range(2):  # two samples: a defined STD (NaN would not compare equal)
        with Detector.detection_section("fwd"):
            pass
    report = Detector.generate_report()
    assert report is not None
    again = pickle.loads(pickle.dumps(report))
    assert repr(again) == repr(report)  # NaN GPU scores (no kernels) never compare equal
    assert again.local_section_summaries["fwd"][Statistic.NUM] == 2


@pytest.mark.parametrize(
    ("kwargs", "names"),
    [
        ({"scores_to_compute": ["relative_perf_scores", "fast_scores"]}, "fast_scores"),
        ({"scores_to_compute": "some"}, "scores_to_compute"),
        ({"report_time_interval": -5.0}, "report_time_interval"),
        ({"report_time_interval": math.inf}, "report_time_interval"),
        ({"profiling_interval": -1}, "profiling_interval"),
        ({"profiling_interval": 1.5}, "profiling_interval"),
        ({"node_name": ""}, "node_name"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(kwargs: dict, names: str) -> None:
    with pytest.raises(ValueError, match=names):
        Detector.initialize(**kwargs)
    assert not Detector.initialized


def test_bad_environment_value_raises_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACEKEEPER_MAX_SECTION_SAMPLES", "lots")
    with pytest.raises(ValueError, match="PACEKEEPER_MAX_SECTION_SAMPLES"):
        Detector.initialize()


def test_second_initialize_is_refused_until_shutdown() -> None:
    Detector.initialize()
    with pytest.raises(AssertionError, match="already initialized"):  # NVRx asserts
        Detector.initialize()
    with pytest.raises(RuntimeError, match="already initialized"):
        Detector.initialize()
    Detector.shutdown()
    Detector.initialize(scores_to_compute=["individual_perf_scores"])
    assert Detector.scores_to_compute == ["individual_perf_scores"]


def test_sections_need_an_initialized_detector() -> None:
    with pytest.raises(RuntimeError, match="not initialized"):
        Detector.detection_section("fwd")


def test_only_requested_scores_are_computed() -> None:
    Detector.initialize(scores_to_compute=["relative_perf_scores"])
    with Detector.detection_section("fwd"):
        pass
    report = Detector.generate_report()
    assert report is not None
    assert report.section_relative_perf_scores == {"fwd": {0: 1.0}}
    assert report.section_individual_perf_scores == {}


def test_unnamed_section_is_named_after_its_with_statement() -> None:
    Detector.initialize()
    for _ in range(3):
        with Detector.detection_section():
            pass
    (name,) = Detector.custom_sections
    assert name.endswith(f"{__file__}:{inspect.currentframe().f_lineno - 3}")  # type: ignore[union-attr]
    assert Detector.custom_sections[name].total_entry_cnt == 3


def test_a_section_works_as_a_decorator_like_nvrx() -> None:
    Detector.initialize()

    @Detector.detection_section("step")
    def step(x: int) -> int:
        return x * 2

    assert [step(1), step(2)] == [2, 4]
    assert Detector.custom_sections["step"].total_entry_cnt == 2


def test_profiling_interval_times_every_nth_entry() -> None:
    Detector.initialize(profiling_interval=3)
    for _ in range(7):
        with Detector.detection_section("fwd"):
            pass
    section = Detector.custom_sections["fwd"]
    assert section.total_entry_cnt == 7
    assert len(section.cpu_elapsed_times) == 3  # entries 0, 3, 6


def test_a_section_that_raises_propagates_and_is_not_timed() -> None:
    Detector.initialize()
    with pytest.raises(KeyError), Detector.detection_section("fwd"):
        raise KeyError("user error")
    with Detector.detection_section("fwd"), Detector.detection_section("fwd"):
        pass  # nested entries of one section pair up
    assert len(Detector.custom_sections["fwd"].cpu_elapsed_times) == 2


def test_section_samples_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACEKEEPER_MAX_SECTION_SAMPLES", "16")
    monkeypatch.setenv("PACEKEEPER_MAX_SECTIONS", "2")
    Detector.initialize()
    for i in range(100):
        with Detector.detection_section(f"s{i % 5}"):
            pass
    assert set(Detector.custom_sections) == {"s0", "s1", "<other>"}
    assert all(len(s.cpu_elapsed_times) <= 16 for s in Detector.custom_sections.values())
    report = Detector.generate_report()
    assert report is not None
    assert report.local_section_summaries["<other>"][Statistic.NUM] == 16


def test_importing_the_detector_loads_no_heavy_dependency() -> None:
    modules = ", ".join(
        f"pacekeeper.detector.{m}"
        for m in [
            "baselines",
            "detector",
            "env",
            "gather",
            "guard",
            "identity",
            "interval",
            "local_payload",
            "local_world",
            "payload",
            "report_cycle",
            "report_group",
            "reporter_view",
            "reports",
            "run_config",
            "run_state",
            "score_report",
            "scoring",
            "sections",
            "straggler",
            "timings",
            "wrapping",
        ]
    )
    code = (
        f"import sys, pacekeeper.detector, {modules}\n"
        "bad = [m for m in ('torch', 'ray', 'kubernetes', 'kopf', 'cupti') if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cpu_only_run_makes_no_cuda_call() -> None:
    code = (
        "import sys\n"
        "from pacekeeper.detector import Detector\n"
        "def run(**kw):\n"
        "    Detector.initialize(**kw)\n"
        "    with Detector.detection_section('fwd'):\n        pass\n"
        "    r = Detector.generate_report()\n"
        "    assert r.section_relative_perf_scores == {'fwd': {0: 1.0}}, r\n"
        "    gpu = [r.gpu_relative_perf_scores, r.gpu_individual_perf_scores]\n"
        "    assert [list(g) for g in gpu] == [[0], [0]] and all(g[0] != g[0] for g in gpu), r\n"
        "    Detector.shutdown()\n"
        "run(kernel_timing='none')\n"
        "print('torch' in sys.modules)\n"
        "run()\n"
        "import torch\n"
        "print(torch.cuda.is_initialized())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # With the none backend the detector does not even import torch; with auto
    # selection on a CPU-only machine it may look for CUDA but never initialises it.
    assert out.stdout.split() == ["False", "False"]
