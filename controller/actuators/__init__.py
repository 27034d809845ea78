"""Actuators: idempotent actions on the world, each undoing only its own marks.

Kubernetes: `KubernetesActuators` (nodes, pods, events). See docs/actuators.md.
"""

from pacekeeper.controller.actuators.errors import GiveUp, RetryLater
from pacekeeper.controller.actuators.results import ActionResult, DrainResult, Outcome

__all__ = ["ActionResult", "DrainResult", "GiveUp", "Outcome", "RetryLater"]
