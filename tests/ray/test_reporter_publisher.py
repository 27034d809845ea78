"""The background publisher and reporter options (no transport: an in-test sink)."""

from __future__ import annotations

import logging
import random
import threading
import time

import pytest

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters import Backoff, Publisher, ReporterKind, ReporterOptions
from pacekeeper.detector.score_report import ReportRejected, ScoreReport

FAST = Backoff(base_s=0.001, max_s=0.004)


class RecordingSink:
    """Collects sequences; fails while ``down`` is set; can hold each send on a gate."""

    name = "recording"

    def __init__(self) -> None:
        self.received: list[int] = []
        self.down = threading.Event()
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.refuse: set[int] = set()

    def send(self, report: ScoreReport) -> None:
        self.entered.set()
        self.gate.wait()
        if report.sequence in self.refuse:
            raise ReportRejected(f"sequence {report.sequence} refused")
        if self.down.is_set():
            raise ConnectionError("receiver down")
        self.received.append(report.sequence)

    def close(self) -> None:
        pass


def _reports(n: int, start: int = 0) -> list[ScoreReport]:
    return [synthetic_report(sequence=s) for s in range(start, start + n)]


def test_reports_arrive_in_order() -> None:
    sink = RecordingSink()
    pub = Publisher(sink, backoff=FAST)
    for r in _reports(10):
        pub.submit(r)
    assert pub.flush(timeout_s=10)
    assert sink.received == list(range(10))
    assert pub.stats().published == 10
    pub.close()


def test_submit_returns_while_the_receiver_hangs_and_full_queue_drops_oldest() -> None:
    sink = RecordingSink()
    sink.gate.clear()  # the receiver never answers until we say so
    pub = Publisher(sink, max_queue=3, backoff=FAST)
    reports = _reports(8)
    pub.submit(reports[0])
    assert sink.entered.wait(5)
    for r in reports[1:]:
        pub.submit(r)  # returns although the one send in flight is stuck
    stats = pub.stats()
    assert not sink.gate.is_set()
    assert stats.submitted == 8 and stats.queue_depth == 3 and stats.dropped_oldest == 5
    sink.gate.set()
    assert pub.flush(timeout_s=10)
    # The in-flight report was dropped as oldest; its late success is not a second copy.
    assert sink.received[-3:] == [5, 6, 7]
    assert len(sink.received) == len(set(sink.received))
    pub.close()


def test_outage_is_retried_until_delivered_and_visible_in_logs_and_counters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = RecordingSink()
    sink.down.set()
    pub = Publisher(sink, backoff=FAST)
    with caplog.at_level(logging.DEBUG, logger="pacekeeper.detector.reporters.publisher"):
        for r in _reports(3):
            pub.submit(r)
        assert not pub.flush(timeout_s=0.2)
        failing = pub.stats()
        sink.down.clear()
        assert pub.flush(timeout_s=10)
    assert failing.send_errors >= 2 and failing.errors_by_cause["ConnectionError"] >= 2
    assert failing.last_error == "ConnectionError: receiver down"
    assert sink.received == [0, 1, 2]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["report delivery failed, will retry"]
    assert "report delivery recovered" in caplog.messages
    assert pub.stats().consecutive_failures == 0
    pub.close()


def test_refused_report_is_dropped_and_counted_and_the_next_still_goes() -> None:
    sink = RecordingSink()
    sink.refuse = {1}
    pub = Publisher(sink, backoff=FAST)
    for r in _reports(3):
        pub.submit(r)
    assert pub.flush(timeout_s=10)
    assert sink.received == [0, 2]
    stats = pub.stats()
    assert stats.rejected == 1 and stats.last_error == "sequence 1 refused"
    pub.close()


def test_close_gives_up_within_its_deadline_when_the_receiver_is_down() -> None:
    sink = RecordingSink()
    sink.down.set()
    pub = Publisher(sink, backoff=FAST)
    pub.submit(synthetic_report())
    pub.close(timeout_s=0.2)
    assert pub._thread is not None and not pub._thread.is_alive()
    pub.submit(synthetic_report(sequence=1))  # after close: counted, never raises
    assert pub.stats().dropped_oldest == 1


def test_backoff_grows_exponentially_up_to_its_cap_with_jitter_below_it() -> None:
    b = Backoff(base_s=0.5, max_s=4.0)
    assert [b.cap_s(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    rng = random.Random(7)
    delays = [b.delay_s(5, rng) for _ in range(200)]
    assert all(0.25 <= d <= 4.0 for d in delays)
    assert len({round(d, 3) for d in delays}) > 50
    assert Backoff(base_s=0.5, max_s=4.0, jitter=False).delay_s(3, rng) == 2.0
    with pytest.raises(ValueError, match="max_s"):
        Backoff(base_s=1.0, max_s=0.5)


def test_options_prefer_keywords_over_env_and_name_bad_variables() -> None:
    env = {"PACEKEEPER_REPORTER": "kubernetes", "PACEKEEPER_JOB_NAME": "llm", "POD_NAMESPACE": "ml"}
    opts = ReporterOptions.resolve({"job_name": "override"}, env)
    assert opts.kind is ReporterKind.KUBERNETES and opts.job_name == "override"
    assert opts.job_namespace == "ml" and opts.incarnation
    assert opts.stragglerreport() == ("ml", "override")
    with pytest.raises(ValueError, match=r"PACEKEEPER_REPORTER='kafka' is not one of"):
        ReporterOptions.resolve(None, {"PACEKEEPER_REPORTER": "kafka"})
    with pytest.raises(ValueError, match=r"PACEKEEPER_REPORT_QUEUE='0' must be >= 1"):
        ReporterOptions.resolve(None, {"PACEKEEPER_REPORT_QUEUE": "0"})
    with pytest.raises(ValueError, match=r"PACEKEEPER_STRAGGLER_THRESHOLD='1.5' is outside"):
        ReporterOptions.resolve(None, {"PACEKEEPER_STRAGGLER_THRESHOLD": "1.5"})
    with pytest.raises(ValueError, match="unknown reporter option"):
        ReporterOptions.resolve({"jobname": "x"}, {})


def test_auto_picks_kubernetes_in_a_pod_with_a_job_name_and_none_elsewhere() -> None:
    pod_env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "PACEKEEPER_JOB_NAME": "j"}
    pod = ReporterOptions.resolve(None, pod_env | {"POD_NAMESPACE": "ml"})
    assert pod.effective_kind(pod_env) is ReporterKind.KUBERNETES
    bare = ReporterOptions.resolve(None, {})
    assert bare.effective_kind({}) in (ReporterKind.NONE, ReporterKind.RAY)
    off = ReporterOptions.resolve(None, pod_env | {"PACEKEEPER_REPORTER": "none"})
    assert off.effective_kind(pod_env) is ReporterKind.NONE


def test_install_reporter_registers_on_the_detector_and_uninstall_removes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pacekeeper.detector import Detector
    from pacekeeper.detector.reporters import install_reporter, uninstall_reporter

    monkeypatch.setenv("PACEKEEPER_REPORTER", "kubernetes")
    monkeypatch.setenv("PACEKEEPER_JOB_NAME", "llm")
    monkeypatch.setenv("PACEKEEPER_JOB_NAMESPACE", "ml")
    publisher = install_reporter(Detector)
    assert publisher is not None and publisher.sink.name == "kubernetes"
    try:
        assert publisher.submit in Detector._listeners
    finally:
        uninstall_reporter(Detector, publisher, timeout_s=0.1)
    assert publisher.submit not in Detector._listeners
    assert install_reporter(Detector, "none") is None
    monkeypatch.delenv("PACEKEEPER_JOB_NAME")
    for fallback in ("JOB_NAME", "PET_JOB_NAME", "JOBSET_NAME"):
        monkeypatch.delenv(fallback, raising=False)
    with pytest.raises(ValueError, match="PACEKEEPER_JOB_NAME"):
        install_reporter(Detector, "kubernetes")


def test_missing_client_library_fails_when_asked_for_and_degrades_when_guessed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    from pacekeeper.detector.reporters import make_publisher

    monkeypatch.setitem(sys.modules, "kubernetes", None)  # import now fails
    env = {"PACEKEEPER_JOB_NAME": "llm", "POD_NAMESPACE": "ml"}
    with pytest.raises(ValueError, match=r"pip install 'pacekeeper\[kubernetes\]'"):
        make_publisher({"kind": "kubernetes"}, env=env)
    pod = env | {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    with caplog.at_level(logging.WARNING):
        assert make_publisher(None, env=pod) is None
    assert "score reporter disabled, client library missing" in caplog.messages


def test_new_reports_do_not_cut_the_retry_backoff_short() -> None:
    sink = RecordingSink()
    sink.down.set()
    pub = Publisher(sink, backoff=Backoff(base_s=30.0, max_s=30.0, jitter=False))
    pub.submit(synthetic_report(sequence=0))
    # The first attempt fails; the next would only come after 30 s.
    deadline = time.monotonic() + 10
    while pub.stats().send_errors < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for seq in range(1, 20):
        pub.submit(synthetic_report(sequence=seq))
    assert not pub.flush(timeout_s=0.3)
    assert pub.stats().send_errors == 1
    pub.close(timeout_s=0.1)
    assert pub._thread is not None and not pub._thread.is_alive()
