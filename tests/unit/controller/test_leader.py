"""The pure lease claim rule: at most one live holder, takeover only after expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.runtime.leader import LeaseElector, LeaseRecord, claim

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_free_lease_is_claimed_with_acquire_time() -> None:
    rec = claim(None, "a", T0, 15)
    assert rec is not None
    assert (rec.holder, rec.acquire_time, rec.renew_time, rec.transitions) == ("a", T0, T0, 0)


def test_holder_renews_without_a_transition() -> None:
    held = LeaseRecord("a", 15, T0, T0, 3, "rv1")
    later = T0 + timedelta(seconds=5)
    rec = claim(held, "a", later, 15)
    assert rec is not None
    assert (rec.renew_time, rec.acquire_time, rec.transitions, rec.resource_version) == (
        later,
        T0,
        3,
        "rv1",
    )


def test_live_foreign_lease_is_not_taken() -> None:
    held = LeaseRecord("a", 15, T0, T0)
    assert claim(held, "b", T0 + timedelta(seconds=14.9), 15) is None


def test_expired_foreign_lease_is_taken_over_counting_a_transition() -> None:
    held = LeaseRecord("a", 15, T0, T0, 2, "rv9")
    rec = claim(held, "b", T0 + timedelta(seconds=15), 15)
    assert rec is not None
    assert (rec.holder, rec.transitions, rec.resource_version) == ("b", 3, "rv9")


@given(
    offsets=st.lists(st.floats(min_value=0, max_value=60), min_size=1, max_size=30),
    who=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=30),
)
def test_two_identities_never_hold_a_live_lease_at_once(
    offsets: list[float], who: list[str]
) -> None:
    rec: LeaseRecord | None = None
    now = T0
    for dt, me in zip(sorted(offsets), who, strict=False):
        now = T0 + timedelta(seconds=dt)
        new = claim(rec, me, now, 15)
        if new is not None:
            # A new holder only when the old one is gone or expired.
            if rec is not None and rec.holder != me:
                assert rec.expired(now)
            rec = new


def test_elector_refuses_timings_that_would_let_two_leaders_overlap() -> None:
    with pytest.raises(ValueError, match="retryPeriod < renewDeadline < leaseDuration"):
        LeaseElector(None, namespace="ns", name="l", identity="a", renew_deadline_s=20)
