"""`initialize(reporter=...)` wires the transport with no code beyond the Detector's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pacekeeper.detector import Detector


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("PACEKEEPER_REPORTER", "PACEKEEPER_REPORT_QUEUE", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    Detector.shutdown()
    yield
    Detector.shutdown()


def test_without_configuration_nothing_is_published_as_with_nvrx() -> None:
    Detector.initialize(kernel_timing="none")
    assert Detector.reporter() is None


def test_explicit_none_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACEKEEPER_REPORTER", "ray")
    Detector.initialize(kernel_timing="none", reporter="none")
    assert Detector.reporter() is None


def test_bad_reporter_configuration_raises_at_initialize_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PACEKEEPER_REPORTER", "kubernetes")
    monkeypatch.setenv("PACEKEEPER_REPORT_QUEUE", "0")
    with pytest.raises(ValueError, match="PACEKEEPER_REPORT_QUEUE"):
        Detector.initialize(kernel_timing="none")
    assert not Detector.initialized, "a refused initialize leaves nothing half-started"
    Detector.initialize(kernel_timing="none", reporter="none")  # and can be retried


def test_reporter_is_started_on_the_reporting_rank_and_stopped_at_shutdown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PACEKEEPER_JOB_NAME", "wired")
    monkeypatch.setenv("PACEKEEPER_JOB_NAMESPACE", "default")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "9")  # nothing listens: never blocks
    Detector.initialize(kernel_timing="none", reporter="kubernetes")
    publisher = Detector.reporter()
    assert publisher is not None
    assert publisher.submit in Detector._listeners
    Detector.shutdown()
    assert Detector.reporter() is None
    assert publisher.submit not in Detector._listeners
