"""Publishing tokens: only the job a token was issued to writes with it, and only its
newest token works."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector.reporters.publish_tokens import (
    PublishRefused,
    PublishTokens,
    UnknownToken,
)
from pacekeeper.detector.score_report import ReportRejected


def test_a_token_writes_for_its_own_job_only() -> None:
    tokens = PublishTokens()
    mine = tokens.register("ray:01000000", "badge-a", now=0.0)
    tokens.register("ray:02000000", "badge-b", now=0.0)
    tokens.check("ray:01000000", mine)
    with pytest.raises(PublishRefused, match="registered for 'ray:01000000'"):
        tokens.check("ray:02000000", mine)


def test_refusals_are_report_rejections_so_publishers_never_retry_them_as_is() -> None:
    assert issubclass(PublishRefused, ReportRejected)
    assert issubclass(UnknownToken, PublishRefused)


def test_a_new_registration_of_the_same_job_revokes_the_old_token() -> None:
    tokens = PublishTokens()
    old = tokens.register("ray:01000000", "badge-1", now=0.0)
    new = tokens.register("ray:01000000", "badge-2", now=5.0)
    with pytest.raises(UnknownToken):
        tokens.check("ray:01000000", old)
    tokens.check("ray:01000000", new)
    assert tokens.registrations() == [
        {"job": "ray:01000000", "badge": "badge-2", "registeredAt": 5.0}
    ]


def test_registrations_are_bounded_and_the_oldest_job_must_register_again() -> None:
    tokens = PublishTokens(max_registrations=2)
    first = tokens.register("ray:01", "b1", now=0.0)
    tokens.register("ray:02", "b2", now=1.0)
    tokens.register("ray:03", "b3", now=2.0)
    assert len(tokens) == 2
    with pytest.raises(UnknownToken):
        tokens.check("ray:01", first)


@pytest.mark.parametrize("token", [None, "", 42, b"bytes"])
def test_no_token_is_refused_before_anything_else(token: object) -> None:
    with pytest.raises(PublishRefused, match="needs the token"):
        PublishTokens().job_of(token)


def test_an_old_reporter_sending_its_job_key_is_told_why() -> None:
    with pytest.raises(PublishRefused, match="older than the board"):
        PublishTokens().job_of("ray:01000000")


@settings(max_examples=50, deadline=None)
@given(guess=st.text(min_size=1, max_size=64))
def test_a_guessed_token_never_writes(guess: str) -> None:
    tokens = PublishTokens()
    real = tokens.register("ray:01000000", "badge", now=0.0)
    if guess == real:  # 2^-256
        return
    with pytest.raises(PublishRefused):
        tokens.check("ray:01000000", guess)
