"""``auto`` that finds no destination says so once at initialize, naming the variables
that would fix it; an explicit ``none`` stays silent."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from pacekeeper.detector import Detector
from pacekeeper.detector.reporters import make_publisher

_VARS = (
    "PACEKEEPER_REPORTER",
    "PACEKEEPER_JOB_NAME",
    "JOB_NAME",
    "PET_JOB_NAME",
    "JOBSET_NAME",
    "PACEKEEPER_JOB_NAMESPACE",
    "POD_NAMESPACE",
    "KUBERNETES_SERVICE_HOST",
    "RAY_ADDRESS",
    "PACEKEEPER_RAY_ADDRESS",
)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in _VARS:
        monkeypatch.delenv(var, raising=False)
    Detector.shutdown()
    yield
    Detector.shutdown()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_auto_in_a_pod_without_job_name_warns_naming_the_variables(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PACEKEEPER_REPORTER", "auto")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("POD_NAMESPACE", "ml")
    with caplog.at_level(logging.WARNING, logger="pacekeeper.detector"):
        Detector.initialize(kernel_timing="none")
    assert Detector.reporter() is None
    (line,) = _warnings(caplog)
    assert "reports go nowhere" in line
    assert "job's name is unknown" in line and "PACEKEEPER_JOB_NAME" in line
    assert "PACEKEEPER_JOB_NAMESPACE" not in line


def test_auto_in_a_pod_without_name_or_namespace_names_both(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    with caplog.at_level(logging.WARNING, logger="pacekeeper.detector"):
        assert make_publisher({"kind": "auto"}, env=env) is None
    (line,) = _warnings(caplog)
    assert "name and namespace are unknown" in line
    assert "PACEKEEPER_JOB_NAME" in line and "POD_NAMESPACE" in line


def test_auto_outside_any_platform_warns_naming_ray_and_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="pacekeeper.detector"):
        assert make_publisher({"kind": "auto"}, env={}) is None
    (line,) = _warnings(caplog)
    assert "RAY_ADDRESS" in line and "PACEKEEPER_REPORTER=none" in line


@pytest.mark.parametrize("how", ["env", "keyword"])
def test_explicit_none_logs_nothing(
    how: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with caplog.at_level(logging.DEBUG, logger="pacekeeper.detector"):
        if how == "env":
            monkeypatch.setenv("PACEKEEPER_REPORTER", "none")
            Detector.initialize(kernel_timing="none")
        else:
            Detector.initialize(kernel_timing="none", reporter="none")
        assert make_publisher({"kind": "none"}, env={}) is None
    assert _warnings(caplog) == []
