"""A ``profiling_interval`` the user gave is traced at exactly that cadence, as NVRx does;
left at its default, kernel tracing samples entries per window. Said once at
initialize (issue 19: ``profiling_interval=1`` alone had traced one entry in 32)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from test_guard import ScriptedBackend

from pacekeeper import cupti_ext
from pacekeeper.cupti_ext import BackendChoice
from pacekeeper.cupti_ext.sampling import fixed_sample_every
from pacekeeper.detector import Detector
from pacekeeper.detector.run_config import DEFAULT_PROFILING_INTERVAL, build_config


def _config(interval: int, given: bool | None = None) -> Any:
    return build_config("all", True, interval, 60, None, interval_given=given)


def test_only_a_chosen_interval_counts_as_given() -> None:
    assert not _config(DEFAULT_PROFILING_INTERVAL).interval_given
    assert _config(DEFAULT_PROFILING_INTERVAL).profiling_interval == 1
    assert type(_config(DEFAULT_PROFILING_INTERVAL).profiling_interval) is int
    assert _config(4).interval_given and _config(0).interval_given
    # A bare 1 is NVRx's default passed on: sampled, unless the caller says it chose it.
    assert not _config(1).interval_given
    assert _config(1, given=True).interval_given
    assert not _config(4, given=False).interval_given


@pytest.mark.parametrize(
    ("given", "env", "expected"),
    [(True, None, 1), (False, None, None), (True, 7, 7), (False, 3, 3)],
)
def test_the_environment_fixes_n_else_a_given_interval_traces_every_profiled_entry(
    given: bool, env: int | None, expected: int | None
) -> None:
    assert fixed_sample_every(interval_given=given, env_value=env) == expected


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The options the detector gives backend selection (a CUPTI backend stand-in)."""
    options: dict[str, Any] = {}

    def select(requested: str | None = None, **kw: Any) -> Any:
        options.clear()
        options.update(kw)
        return ScriptedBackend([]), BackendChoice("cupti", "test")

    monkeypatch.setattr(cupti_ext, "select_backend", select)
    monkeypatch.delenv("PACEKEEPER_KERNEL_SAMPLE_EVERY", raising=False)
    return options


@pytest.mark.parametrize(
    ("kwargs", "env", "sample_every"),
    [
        ({}, None, None),
        ({"profiling_interval": 1}, None, 1),  # written out, NVRx's cadence: every entry
        ({"profiling_interval": DEFAULT_PROFILING_INTERVAL}, None, None),
        ({"profiling_interval": 4}, None, 1),
        ({"profiling_interval": 4}, "9", 9),
        ({}, "2", 2),
    ],
)
def test_initialize_fixes_sampling_only_when_the_user_chose_a_cadence(  # noqa: PLR0917
    asked: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    kwargs: dict[str, Any],
    env: str | None,
    sample_every: int | None,
) -> None:
    caplog.set_level(logging.INFO)
    if env is not None:
        monkeypatch.setenv("PACEKEEPER_KERNEL_SAMPLE_EVERY", env)
    Detector.initialize(report_time_interval=3600, **kwargs)
    Detector.shutdown()
    assert asked.get("sample_every") == sample_every
    said = [r.getMessage() for r in caplog.records if "kernel tracing" in r.getMessage()]
    assert len(said) == 1
    assert ("samples profiled entries per window" in said[0]) == (sample_every is None)
