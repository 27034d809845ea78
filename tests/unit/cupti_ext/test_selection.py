"""Backend choice: the user's request, else the best that works, with a reason; never a crash.

This machine has no GPU: ``cuda_available`` is replaced where a test needs a GPU; the
CUPTI backend then really tries cupti-python, whose calls fail here without a driver.
"""

from __future__ import annotations

import sys

import pytest

from pacekeeper.cupti_ext import selection
from pacekeeper.cupti_ext.events_backend import EventsBackend
from pacekeeper.cupti_ext.none_backend import NoneBackend


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in (selection.ENV_VAR, "CUDA_INJECTION64_PATH", "NSYS_PROFILING_SESSION_ID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setattr(selection, "cuda_available", lambda: True)


def test_auto_without_a_gpu_is_none_with_the_reason():
    backend, choice = selection.select_backend()
    assert isinstance(backend, NoneBackend)
    assert choice.name == "none" and choice.reason == "no CUDA device"


def test_requested_cupti_without_a_gpu_degrades_to_none_and_says_so(caplog):
    _, choice = selection.select_backend("cupti")
    assert choice.name == "none"
    assert choice.reason == "cupti requested by argument but no CUDA device"
    assert "kernel timing degraded" in caplog.text


def test_environment_chooses_when_no_argument_is_given(monkeypatch):
    monkeypatch.setenv(selection.ENV_VAR, "none")
    _, choice = selection.select_backend()
    assert choice == selection.BackendChoice("none", "requested by env")


def test_argument_overrides_the_environment(monkeypatch, gpu):
    monkeypatch.setenv(selection.ENV_VAR, "none")
    backend, choice = selection.select_backend("events")
    assert isinstance(backend, EventsBackend) and choice.name == "events"


@pytest.mark.parametrize("bad", ["cuda", "CUPTI2", "all"])
def test_unknown_backend_name_is_refused_naming_the_source(monkeypatch, bad):
    with pytest.raises(ValueError, match="kernel_timing"):
        selection.select_backend(bad)
    monkeypatch.setenv(selection.ENV_VAR, bad)
    with pytest.raises(ValueError, match=selection.ENV_VAR):
        selection.select_backend()


def test_cupti_import_failure_falls_back_to_events(monkeypatch, gpu):
    monkeypatch.setitem(sys.modules, "cupti", None)  # import raises ImportError
    backend, choice = selection.select_backend()
    assert isinstance(backend, EventsBackend)
    assert choice.name == "events"
    assert "cupti-python is not installed" in choice.reason


def test_cupti_that_cannot_run_here_falls_back_to_events(gpu):
    # cupti-python imports on this machine, but with no driver every call fails.
    backend, choice = selection.select_backend("cupti")
    assert isinstance(backend, EventsBackend)
    assert choice.reason.startswith("cupti requested by argument but unavailable")


def test_injected_profiler_is_a_conflict_that_falls_back_to_events(monkeypatch, gpu):
    monkeypatch.setenv("CUDA_INJECTION64_PATH", "/opt/nsys/libToolsInjection64.so")
    backend, choice = selection.select_backend()
    assert isinstance(backend, EventsBackend)
    assert "CUDA_INJECTION64_PATH" in choice.reason


def test_none_is_honoured_even_with_a_gpu(gpu):
    backend, choice = selection.select_backend("none")
    assert isinstance(backend, NoneBackend) and choice.reason == "requested by argument"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PACEKEEPER_KERNEL_MARKER", "nvtx", "PACEKEEPER_KERNEL_MARKER='nvtx' is not one of"),
        ("PACEKEEPER_KERNEL_SAMPLE_EVERY", "0", "PACEKEEPER_KERNEL_SAMPLE_EVERY=0 must be >= 1"),
        (
            "PACEKEEPER_KERNEL_SAMPLE_EVERY",
            "often",
            "PACEKEEPER_KERNEL_SAMPLE_EVERY='often' is not an integer or 'auto'",
        ),
        ("PACEKEEPER_COMM_KERNEL_PATTERN", "nccl(", "PACEKEEPER_COMM_KERNEL_PATTERN='nccl\\('"),
        ("PACEKEEPER_CUPTI_BUFFER_KIB", "4M", "PACEKEEPER_CUPTI_BUFFER_KIB='4M' is not an integer"),
        (
            "PACEKEEPER_CUPTI_BUFFER_KIB",
            "16",
            "PACEKEEPER_CUPTI_BUFFER_KIB=16 must be between 64 and 65536 KiB",
        ),
        ("PACEKEEPER_REPORT_FLUSH", "now", "PACEKEEPER_REPORT_FLUSH='now' is not one of plain"),
    ],
)
def test_bad_kernel_timing_settings_fail_at_selection_naming_the_variable(
    monkeypatch, name, value, message
):
    # Even on a machine without a GPU: the job would fail the same way on its GPU nodes.
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        selection.select_backend()
