"""Who may read /metrics: bearer tokens checked the Kubernetes way, answers cached briefly.

The model is controller-runtime's metrics filter (and kube-rbac-proxy's): the scraper
sends its ServiceAccount token; a TokenReview says who holds it, a SubjectAccessReview
whether that user may ``get`` the non-resource URL ``/metrics`` (the chart's
``<release>-pacekeeper-metrics-reader`` ClusterRole grants exactly that). No token or a
token the API does not accept: 401. A known user without the right: 403. The API unable
to answer: 503, never cached, so an outage does not outlive itself.

Answers are cached per token (its SHA-256, never the token itself), path and verb: an
allowed scraper for ``allowed_ttl_s`` (one review pair a minute per scraper at the
default), a refusal for ``refused_ttl_s`` (a flood of the same bad token costs the API
one review per 10 s). So a revoked RoleBinding takes effect within a minute. Reviews in
flight are capped: distinct garbage tokens beyond the cap get 503 at once instead of
queueing review after review on the API server.

Pure: the reviews sit behind ``Reviewer`` and the time is passed in.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol


class Verdict(StrEnum):
    ALLOWED = "Allowed"
    UNAUTHENTICATED = "Unauthenticated"
    FORBIDDEN = "Forbidden"
    UNAVAILABLE = "Unavailable"


@dataclass(frozen=True, slots=True)
class User:
    """What a TokenReview says about a token's holder."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class ReviewUnavailable(Exception):
    """The API could not review (down, timed out, or refused us the review itself)."""


class Reviewer(Protocol):
    def authenticate(self, token: str) -> User | None:
        """The token's user, None when the API does not accept the token."""
        ...

    def authorize(self, user: User, path: str, verb: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        ...


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: Verdict
    reason: str
    user: str | None = None
    cached: bool = False


@dataclass(frozen=True, slots=True)
class CacheSettings:
    allowed_ttl_s: float = 60.0
    refused_ttl_s: float = 10.0
    max_entries: int = 1024
    """Bounded memory whatever the scrapers send; the least recently used go first."""

    def __post_init__(self) -> None:
        for name in ("allowed_ttl_s", "refused_ttl_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 0")
        if self.max_entries < 1:
            raise ValueError(f"max_entries={self.max_entries} must be >= 1")


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive,
    as RFC 6750 has it), None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


_Key = tuple[str, str, str]


class DecisionCache:
    """Decisions by (token digest, path, verb), each until its own expiry."""

    def __init__(self, settings: CacheSettings) -> None:
        self.settings = settings
        self._entries: OrderedDict[_Key, tuple[float, Decision]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: _Key, now: float) -> Decision | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires_at, decision = entry
        if now >= expires_at:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return decision

    def put(self, key: _Key, decision: Decision, now: float) -> None:
        match decision.verdict:
            case Verdict.ALLOWED:
                ttl = self.settings.allowed_ttl_s
            case Verdict.UNAUTHENTICATED | Verdict.FORBIDDEN:
                ttl = self.settings.refused_ttl_s
            case Verdict.UNAVAILABLE:
                return
        if ttl <= 0:
            return
        self._entries[key] = (now + ttl, decision)
        self._entries.move_to_end(key)
        while len(self._entries) > self.settings.max_entries:
            self._entries.popitem(last=False)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class MetricsAuthorizer:
    """``check`` one request: thread-safe, the reviews themselves run outside the lock."""

    def __init__(
        self,
        reviewer: Reviewer,
        settings: CacheSettings | None = None,
        *,
        max_in_flight: int = 4,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight={max_in_flight} must be >= 1")
        self.reviewer = reviewer
        self.cache = DecisionCache(settings or CacheSettings())
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_in_flight)

    def check(self, authorization: str | None, path: str, verb: str, now: float) -> Decision:
        token = bearer_token(authorization)
        if token is None:
            return Decision(Verdict.UNAUTHENTICATED, "no bearer token")
        key = (_digest(token), path, verb)
        with self._lock:
            hit = self.cache.get(key, now)
        if hit is not None:
            return replace(hit, cached=True)
        if not self._slots.acquire(blocking=False):
            return Decision(Verdict.UNAVAILABLE, "too many reviews in flight")
        try:
            decision = self._review(token, path, verb)
        except ReviewUnavailable as e:
            return Decision(Verdict.UNAVAILABLE, str(e))
        finally:
            self._slots.release()
        with self._lock:
            self.cache.put(key, decision, now)
        return decision

    def _review(self, token: str, path: str, verb: str) -> Decision:
        user = self.reviewer.authenticate(token)
        if user is None:
            return Decision(Verdict.UNAUTHENTICATED, "the API did not accept the token")
        if not self.reviewer.authorize(user, path, verb):
            return Decision(Verdict.FORBIDDEN, f"{verb} {path} is not allowed", user=user.name)
        return Decision(Verdict.ALLOWED, f"{verb} {path} allowed", user=user.name)
