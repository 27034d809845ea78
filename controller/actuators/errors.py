"""What actuators raise; the operator maps them to Kopf's temporary and permanent errors."""

from __future__ import annotations

API_UNAVAILABLE = "ApiUnavailable"
"""RetryLater reason: 5xx answers, timeouts or connection failures outlasted the attempts."""
API_CONFLICT = "ApiConflict"
"""RetryLater reason: the object kept changing under us (409) through every attempt."""
API_THROTTLED = "ApiThrottled"
"""RetryLater reason: the API server answered 429 outside of a disruption budget."""
API_REFUSED = "ApiRefused"
"""GiveUp reason: a 4xx that retrying cannot fix (forbidden, invalid, unsupported)."""
NODE_NOT_FOUND = "NodeNotFound"
"""GiveUp reason: the node to mark does not exist."""


class ActuatorError(Exception):
    """Base of the two outcomes an actuator cannot handle itself."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class RetryLater(ActuatorError):
    """Nothing is lost: call the same actuator again after `delay_s` seconds."""

    def __init__(self, delay_s: float, reason: str, detail: str = "") -> None:
        super().__init__(reason, detail)
        self.delay_s = delay_s


class GiveUp(ActuatorError):
    """Retrying will not help; the decision should be recorded as failed.

    ``http_status`` and ``server_message`` carry the API server's answer when there was
    one, so logs and decision records say what the server said, not only that it said no."""

    def __init__(
        self,
        reason: str,
        detail: str = "",
        *,
        http_status: int | None = None,
        server_message: str | None = None,
    ) -> None:
        super().__init__(reason, detail)
        self.http_status = http_status
        self.server_message = server_message
