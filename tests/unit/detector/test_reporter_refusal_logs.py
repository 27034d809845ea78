"""A refusal's reason reaches the printed log line (a default handler drops ``extra``),
once per cause per interval, with the count of those held back."""

from __future__ import annotations

import logging

import pytest

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters import Backoff, Publisher
from pacekeeper.detector.reporters.log_throttle import LogThrottle, message_cause
from pacekeeper.detector.score_report import JobIdentity, Platform, ReportRejected, ScoreReport

JOB = JobIdentity(platform=Platform.KUBERNETES, namespace="ml", name="llm")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RefusingSink:
    name = "refusing"

    def __init__(self) -> None:
        self.reason = "StragglerReport ml/llm status refused: HTTP 422 status.worstScore: Invalid"

    def send(self, report: ScoreReport) -> None:
        raise ReportRejected(self.reason)

    def close(self) -> None:
        pass


def _printed(caplog: pytest.LogCaptureFixture) -> list[str]:
    # What logging.basicConfig's handler shows: the formatted message, no extra.
    fmt = logging.Formatter("%(levelname)s %(message)s")
    return [fmt.format(r) for r in caplog.records if r.levelno >= logging.INFO]


def test_refusal_reason_job_and_count_are_in_the_printed_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    sink = RefusingSink()
    pub = Publisher(
        sink, backoff=Backoff(base_s=0.001, max_s=0.002), log_throttle=LogThrottle(60, clock=clock)
    )
    with caplog.at_level(logging.DEBUG, logger="pacekeeper.detector.reporters.publisher"):
        for seq in range(13):
            pub.submit(synthetic_report(job=JOB, sequence=seq))
        assert pub.flush(timeout_s=10)
        clock.now += 61
        pub.submit(synthetic_report(job=JOB, sequence=13))
        assert pub.flush(timeout_s=10)
    pub.close()
    assert pub.stats().rejected == 14
    printed = _printed(caplog)
    assert printed == [
        "ERROR report refused by receiver, dropped: StragglerReport ml/llm status refused: "
        "HTTP 422 status.worstScore: Invalid (job ml/llm, sequence 0, sink refusing)",
        "ERROR report refused by receiver, dropped: StragglerReport ml/llm status refused: "
        "HTTP 422 status.worstScore: Invalid (job ml/llm, sequence 13, sink refusing)"
        " (12 more since)",
    ]


def test_a_new_cause_is_printed_at_once_while_the_old_one_is_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    sink = RefusingSink()
    pub = Publisher(sink, log_throttle=LogThrottle(60, clock=clock))
    with caplog.at_level(logging.INFO, logger="pacekeeper.detector.reporters.publisher"):
        pub.submit(synthetic_report(job=JOB, sequence=1))
        pub.submit(synthetic_report(job=JOB, sequence=2))
        assert pub.flush(timeout_s=10)
        sink.reason = "job identity mismatch: reporter writes StragglerReport ml/llm"
        pub.submit(synthetic_report(job=JOB, sequence=3))
        assert pub.flush(timeout_s=10)
    pub.close()
    printed = _printed(caplog)
    assert len(printed) == 2 and "HTTP 422" in printed[0] and "mismatch" in printed[1]


def test_throttle_counts_repeats_within_the_interval_and_forgets_old_causes() -> None:
    clock = Clock()
    throttle = LogThrottle(10, max_causes=2, clock=clock)
    assert throttle.admit("a") == 0
    assert throttle.admit("a") is None and throttle.admit("a") is None
    clock.now += 10
    assert throttle.admit("a") == 2
    assert throttle.admit("b") == 0 and throttle.admit("c") == 0  # "a" forgotten
    assert throttle.admit("a") == 0


def test_numbers_do_not_make_a_new_cause() -> None:
    one = message_cause(ReportRejected("sequence 41 refused, score 0.5"))
    two = message_cause(ReportRejected("sequence 42 refused, score 0.25"))
    assert one == two
    assert one != message_cause(ValueError("sequence 41 refused, score 0.5"))


def test_bad_throttle_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        LogThrottle(-1)
    with pytest.raises(ValueError, match="max_causes"):
        LogThrottle(1, max_causes=0)


class _Unprintable(ReportRejected):
    def __str__(self) -> str:
        raise RuntimeError("cannot say why")


class _OnceUnprintableSink:
    name = "odd"

    def __init__(self) -> None:
        self.received: list[int] = []

    def send(self, report: ScoreReport) -> None:
        if report.sequence == 0:
            raise _Unprintable()
        self.received.append(report.sequence)

    def close(self) -> None:
        pass


def test_a_refusal_that_cannot_be_printed_does_not_stop_delivery() -> None:
    sink = _OnceUnprintableSink()
    pub = Publisher(sink)
    for seq in range(3):
        pub.submit(synthetic_report(job=JOB, sequence=seq))
    assert pub.flush(timeout_s=10)
    pub.close()
    assert sink.received == [1, 2]
