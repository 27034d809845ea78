"""The Kubernetes actuators, wired together over one API client."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pacekeeper.controller.actuators.api import KubeApi
from pacekeeper.controller.actuators.events import EventRecorder
from pacekeeper.controller.actuators.nodes import NodeActuator
from pacekeeper.controller.actuators.pods import PodActuator
from pacekeeper.controller.actuators.retries import RetrySettings
from pacekeeper.controller.core.marks import DEFAULT_OWNER, Provenance


class KubernetesActuators:
    """`nodes` (taint, untaint, cordon, uncordon), `pods` (restart_rank, drain), `events`.

    Synchronous (the official client); the operator runs them in a worker thread.
    `sleep` is the backoff between attempts inside one call (tests pass a recorder).
    """

    def __init__(
        self,
        api_client: Any,
        *,
        owner: str = DEFAULT_OWNER,
        instance: str = "",
        settings: RetrySettings | None = None,
        delete_fallback_after: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.owner = owner
        self.settings = settings or RetrySettings()
        api = self.api = KubeApi(api_client, request_timeout_s=self.settings.request_timeout_s)
        self.events = EventRecorder(api, settings=self.settings, sleep=sleep, instance=instance)
        self.nodes = NodeActuator(api, self.events, settings=self.settings, sleep=sleep)
        self.pods = PodActuator(
            api,
            self.events,
            settings=self.settings,
            sleep=sleep,
            delete_fallback_after=delete_fallback_after,
        )

    def provenance(self, job: str, reason: str, policy: str, at: datetime) -> Provenance:
        """Provenance for a decision; pass the decision's time so retries share it."""
        return Provenance(owner=self.owner, job=job, reason=str(reason), policy=policy, at=at)
