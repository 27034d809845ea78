"""The controller's policy at start: loaded, or waited for while it is invalid.

A policy ConfigMap edited by hand into something the models refuse would otherwise make
every start exit 2: a crash-loop that says why only in the last container's log. With
``operator run --on-invalid-policy wait`` the process stays up instead, decides nothing
(it does not even stand for leadership), serves ``pacekeeper_policy_valid 0`` and logs
the refusal every ``retry_s``; the kubelet refreshes a mounted ConfigMap in place, so the
first valid version read starts the operator as usual. Separate from ``operator.py``
because it runs before any Kubernetes client exists.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pacekeeper.controller.core.policy import PolicyDocument, PolicyError, load_policy_file
from pacekeeper.controller.runtime.shutdown import StopRequest

logger = logging.getLogger(__name__)

POLICY_RETRY_S = 30.0
"""Re-read an invalid policy this often (the kubelet syncs ConfigMap volumes about every
minute); ``PACEKEEPER_POLICY_RETRY_S`` overrides it."""


def policy_retry_s() -> float:
    return float(os.environ.get("PACEKEEPER_POLICY_RETRY_S") or POLICY_RETRY_S)


def policy_valid_gauge(registry: Any) -> Any:
    from prometheus_client import Gauge

    return Gauge(
        "pacekeeper_policy_valid",
        "1 while the controller runs a valid policy; 0 while it waits, deciding nothing, "
        "for the policy file to become valid.",
        registry=registry,
    )


def wait_for_valid_policy(
    path: Path,
    stop: StopRequest,
    gauge: Any,
    *,
    retry_s: float = POLICY_RETRY_S,
    load: Callable[[Path], PolicyDocument] = load_policy_file,
) -> PolicyDocument | None:
    """The first valid document read from ``path``, or None when a stop comes first."""
    while True:
        try:
            doc = load(path)
        except PolicyError as e:
            gauge.set(0)
            logger.error(
                "policy invalid: deciding nothing until it is fixed",
                extra={"policy": str(path), "error": str(e), "retry_s": retry_s},
            )
        else:
            gauge.set(1)
            return doc
        if stop.flag.wait(retry_s) or stop.is_set():
            return None


def run_after_valid_policy(
    api_client: Any,
    path: Path,
    cli_mode: Any,
    config: Any,
    stop: StopRequest,
    *,
    retry_s: float | None = None,
) -> int:
    """``operator.run`` once ``path`` holds a valid policy; 0 when stopped before."""
    import dataclasses

    from pacekeeper.controller.runtime.metrics import ControllerMetrics
    from pacekeeper.controller.runtime.metrics_serving import serve_metrics
    from pacekeeper.controller.runtime.operator import effective_mode, run

    metrics = ControllerMetrics()
    gauge = policy_valid_gauge(metrics.registry)
    # Probes and alerts see the wait (and scrapers are checked as ever).
    serve_metrics(metrics.registry, config.metrics_serving(), api_client)
    doc = wait_for_valid_policy(path, stop, gauge, retry_s=retry_s or policy_retry_s())
    if doc is None:
        logger.info("operator stopped", extra={"reason": stop.reason})
        return 0
    logger.info("policy valid: operator starting", extra={"policy": str(path)})
    served = dataclasses.replace(config, metrics_port=0)
    return run(api_client, effective_mode(doc, cli_mode), served, stop=stop, metrics=metrics)
