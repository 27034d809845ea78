"""The metrics endpoint's authentication and authorisation core, with a scripted reviewer."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pacekeeper.controller.runtime.metrics_auth import (
    CacheSettings,
    MetricsAuthorizer,
    ReviewUnavailable,
    User,
    Verdict,
    bearer_token,
)

SCRAPER = User("system:serviceaccount:monitoring:prometheus", "u-1", ("system:authenticated",))
STRANGER = User("system:serviceaccount:team-a:trainer", "u-2")


@dataclass
class ScriptedReviewer:
    """Tokens it knows, who may get what, and every review it was asked for."""

    users: dict[str, User] = field(default_factory=dict)
    allowed: set[tuple[str, str, str]] = field(default_factory=set)
    down: bool = False
    reviews: list[str] = field(default_factory=list)

    def authenticate(self, token: str) -> User | None:
        self.reviews.append(f"token {token}")
        if self.down:
            raise ReviewUnavailable("the API answered 503")
        return self.users.get(token)

    def authorize(self, user: User, path: str, verb: str) -> bool:
        self.reviews.append(f"access {user.name} {verb} {path}")
        return (user.name, verb, path) in self.allowed


def world() -> ScriptedReviewer:
    return ScriptedReviewer(
        users={"scraper-token": SCRAPER, "stranger-token": STRANGER},
        allowed={(SCRAPER.name, "get", "/metrics")},
    )


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER  abc ", "abc"),
        ("Basic YWxhZGRpbjpvcGVuc2VzYW1l", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("", None),
        (None, None),
    ],
)
def test_only_a_bearer_header_yields_a_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_a_scraper_with_the_right_is_allowed_and_others_are_told_apart() -> None:
    auth = MetricsAuthorizer(world())
    assert auth.check("Bearer scraper-token", "/metrics", "get", 0.0).verdict is Verdict.ALLOWED
    stranger = auth.check("Bearer stranger-token", "/metrics", "get", 0.0)
    assert (stranger.verdict, stranger.user) == (Verdict.FORBIDDEN, STRANGER.name)
    assert auth.check("Bearer garbage", "/metrics", "get", 0.0).verdict is (Verdict.UNAUTHENTICATED)
    assert auth.check(None, "/metrics", "get", 0.0).verdict is Verdict.UNAUTHENTICATED


def test_the_right_is_checked_for_the_path_and_verb_asked() -> None:
    auth = MetricsAuthorizer(world())
    assert auth.check("Bearer scraper-token", "/debug", "get", 0.0).verdict is Verdict.FORBIDDEN
    assert auth.check("Bearer scraper-token", "/metrics", "post", 0.0).verdict is (
        Verdict.FORBIDDEN
    )


def test_a_missing_token_costs_the_api_nothing() -> None:
    reviewer = world()
    auth = MetricsAuthorizer(reviewer)
    for _ in range(5):
        auth.check(None, "/metrics", "get", 0.0)
        auth.check("Basic xyz", "/metrics", "get", 0.0)
    assert reviewer.reviews == []


def test_an_allowed_scraper_is_reviewed_once_a_minute() -> None:
    reviewer = world()
    auth = MetricsAuthorizer(reviewer, CacheSettings(allowed_ttl_s=60.0, refused_ttl_s=10.0))
    first = auth.check("Bearer scraper-token", "/metrics", "get", 100.0)
    again = auth.check("Bearer scraper-token", "/metrics", "get", 159.9)
    assert (first.cached, again.cached) == (False, True)
    assert len(reviewer.reviews) == 2  # one TokenReview, one SubjectAccessReview
    auth.check("Bearer scraper-token", "/metrics", "get", 160.0)
    assert len(reviewer.reviews) == 4


def test_a_revoked_right_is_seen_once_the_allowed_answer_expires() -> None:
    reviewer = world()
    auth = MetricsAuthorizer(reviewer, CacheSettings(allowed_ttl_s=60.0))
    assert auth.check("Bearer scraper-token", "/metrics", "get", 0.0).verdict is Verdict.ALLOWED
    reviewer.allowed.clear()  # the ClusterRoleBinding is deleted
    assert auth.check("Bearer scraper-token", "/metrics", "get", 30.0).verdict is Verdict.ALLOWED
    assert auth.check("Bearer scraper-token", "/metrics", "get", 61.0).verdict is (
        Verdict.FORBIDDEN
    )


def test_refusals_are_cached_for_less_time_than_grants() -> None:
    reviewer = world()
    auth = MetricsAuthorizer(reviewer, CacheSettings(allowed_ttl_s=60.0, refused_ttl_s=10.0))
    for now in (0.0, 5.0, 9.9):
        auth.check("Bearer garbage", "/metrics", "get", now)
        auth.check("Bearer stranger-token", "/metrics", "get", now)
    assert reviewer.reviews == ["token garbage", "token stranger-token",
                                f"access {STRANGER.name} get /metrics"]  # fmt: skip
    reviewer.allowed.add((STRANGER.name, "get", "/metrics"))  # now granted
    assert auth.check("Bearer stranger-token", "/metrics", "get", 10.0).verdict is (Verdict.ALLOWED)


def test_an_api_outage_is_unavailable_and_never_cached() -> None:
    reviewer = world()
    reviewer.down = True
    auth = MetricsAuthorizer(reviewer)
    decision = auth.check("Bearer scraper-token", "/metrics", "get", 0.0)
    assert (decision.verdict, decision.reason) == (Verdict.UNAVAILABLE, "the API answered 503")
    reviewer.down = False
    assert auth.check("Bearer scraper-token", "/metrics", "get", 1.0).verdict is Verdict.ALLOWED


def test_the_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    reviewer = world()
    auth = MetricsAuthorizer(reviewer, CacheSettings(max_entries=3))
    auth.check("Bearer scraper-token", "/metrics", "get", 0.0)
    for i in range(10):
        auth.check(f"Bearer garbage-{i}", "/metrics", "get", 0.0)
        auth.check("Bearer scraper-token", "/metrics", "get", 0.0)  # kept warm
    assert len(auth.cache) == 3
    assert auth.check("Bearer scraper-token", "/metrics", "get", 0.0).cached


def test_the_cache_keeps_no_token() -> None:
    auth = MetricsAuthorizer(world())
    auth.check("Bearer scraper-token", "/metrics", "get", 0.0)
    assert "scraper-token" not in repr(auth.cache._entries)


def test_reviews_beyond_the_cap_are_unavailable_at_once() -> None:
    entered = threading.Event()
    release = threading.Event()

    class Slow(ScriptedReviewer):
        def authenticate(self, token: str) -> User | None:
            entered.set()
            release.wait(10)
            return super().authenticate(token)

    auth = MetricsAuthorizer(Slow(users={"a": SCRAPER}), max_in_flight=1)
    worker = threading.Thread(target=auth.check, args=("Bearer a", "/metrics", "get", 0.0))
    worker.start()
    try:
        assert entered.wait(10)
        busy = auth.check("Bearer b", "/metrics", "get", 0.0)
        assert (busy.verdict, busy.reason) == (Verdict.UNAVAILABLE, "too many reviews in flight")
    finally:
        release.set()
        worker.join(10)


@pytest.mark.parametrize(
    "settings",
    [{"allowed_ttl_s": -1.0}, {"refused_ttl_s": -0.5}, {"max_entries": 0}],
)
def test_bad_cache_settings_name_the_field(settings: dict[str, float]) -> None:
    (name,) = settings
    with pytest.raises(ValueError, match=name):
        CacheSettings(**settings)  # type: ignore[arg-type]


@given(header=st.one_of(st.none(), st.text(max_size=40)))
def test_whatever_the_header_only_a_reviewed_token_is_allowed(header: str | None) -> None:
    reviewer = world()
    decision = MetricsAuthorizer(reviewer).check(header, "/metrics", "get", 0.0)
    if decision.verdict is Verdict.ALLOWED:
        assert bearer_token(header) == "scraper-token"
    if bearer_token(header) is None:
        assert reviewer.reviews == [] and decision.verdict is Verdict.UNAUTHENTICATED
