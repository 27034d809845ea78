"""Reporter configuration: initialize-time options, then environment variables, then
what the platform tells us (downward API, service account, Ray runtime context).

Bad values raise ``ValueError`` naming the option or variable: at initialize, so a
misconfigured job fails before it trains rather than silently reporting nowhere.
"""

from __future__ import annotations

import math
import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from .. import env as detector_env
from .k8s_status import DEFAULT_STRAGGLER_THRESHOLD


class ReporterKind(StrEnum):
    AUTO = "auto"
    RAY = "ray"
    KUBERNETES = "kubernetes"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ReporterOptions:
    kind: ReporterKind = ReporterKind.AUTO
    job_name: str | None = None
    job_namespace: str | None = None
    max_queue: int = 64
    ray_address: str | None = None
    straggler_threshold: float = DEFAULT_STRAGGLER_THRESHOLD
    incarnation: str | None = None
    timeout_s: float = 10.0

    @classmethod
    def resolve(
        cls, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> ReporterOptions:
        """Options from ``overrides`` (initialize keywords) over ``env`` over defaults."""
        env = os.environ if env is None else env
        given = dict(overrides or {})
        unknown = given.keys() - set(cls.__slots__)
        if unknown:
            raise ValueError(f"unknown reporter option(s): {', '.join(sorted(unknown))}")

        def pick(field: str, var: str) -> Any:
            if given.get(field) is not None:
                return given[field], field
            if env.get(var):
                return env[var], var
            return None, field

        out = cls()
        raw, src = pick("kind", "PACEKEEPER_REPORTER")
        if raw is not None:
            try:
                out = replace(out, kind=ReporterKind(str(raw).lower()))
            except ValueError:
                allowed = ", ".join(k.value for k in ReporterKind)
                raise ValueError(f"{src}={raw!r} is not one of: {allowed}") from None
        # The same defaults the Detector uses for the report's job identity.
        name = given.get("job_name") or detector_env.job_name(env)
        namespace = given.get("job_namespace") or detector_env.job_namespace(env)
        out = replace(out, job_name=name, job_namespace=namespace)
        raw, src = pick("max_queue", "PACEKEEPER_REPORT_QUEUE")
        if raw is not None:
            out = replace(out, max_queue=_positive_int(src, raw))
        raw, src = pick("timeout_s", "PACEKEEPER_REPORT_TIMEOUT_S")
        if raw is not None:
            out = replace(out, timeout_s=_positive_float(src, raw))
        raw, src = pick("straggler_threshold", "PACEKEEPER_STRAGGLER_THRESHOLD")
        if raw is not None:
            value = _positive_float(src, raw, allow_zero=True)
            if value > 1.0:
                raise ValueError(f"{src}={raw!r} is outside [0, 1]")
            out = replace(out, straggler_threshold=value)
        address, _ = pick("ray_address", "PACEKEEPER_RAY_ADDRESS")
        incarnation, _ = pick("incarnation", "PACEKEEPER_INCARNATION")
        return replace(
            out,
            ray_address=address,
            incarnation=incarnation or new_incarnation(),
        )

    def effective_kind(self, env: Mapping[str, str] | None = None) -> ReporterKind:
        """``auto`` made concrete: Kubernetes when in a pod with a known job name, Ray when
        this process is connected to (or pointed at) a Ray cluster, else none."""
        if self.kind is not ReporterKind.AUTO:
            return self.kind
        env = os.environ if env is None else env
        if env.get("KUBERNETES_SERVICE_HOST") and self.job_name and self.job_namespace:
            return ReporterKind.KUBERNETES
        if _ray_connected() or env.get("RAY_ADDRESS") or self.ray_address:
            return ReporterKind.RAY
        return ReporterKind.NONE

    def nowhere_hint(self, env: Mapping[str, str] | None = None) -> str:
        """Why ``auto`` found no destination, and the variables that would give it one."""
        env = os.environ if env is None else env
        if env.get("KUBERNETES_SERVICE_HOST"):
            missing = [
                (what, fix)
                for what, fix, known in (
                    ("name", "PACEKEEPER_JOB_NAME (or JOB_NAME, PET_JOB_NAME, JOBSET_NAME)",
                     self.job_name),
                    ("namespace", "PACEKEEPER_JOB_NAMESPACE (or POD_NAMESPACE)",
                     self.job_namespace),
                )
                if not known
            ]  # fmt: skip
            unknown = " and ".join(what for what, _ in missing)
            verb = "are" if len(missing) > 1 else "is"
            fixes = " and ".join(fix for _, fix in missing)
            return f"in a Kubernetes pod but the job's {unknown} {verb} unknown: set {fixes}"
        return (
            "not in a Kubernetes pod (KUBERNETES_SERVICE_HOST unset) and not connected to "
            "Ray: set RAY_ADDRESS (or PACEKEEPER_RAY_ADDRESS) to report to a Ray cluster, "
            "or PACEKEEPER_REPORTER=none to say reporting is off"
        )

    def stragglerreport(self) -> tuple[str, str]:
        """(namespace, name) of the job's StragglerReport: the job's own."""
        if not (self.job_name and self.job_namespace):
            raise ValueError(
                "kubernetes reporter needs the job's name and namespace: set "
                "PACEKEEPER_JOB_NAME and PACEKEEPER_JOB_NAMESPACE (or POD_NAMESPACE)"
            )
        return self.job_namespace, self.job_name


def new_incarnation() -> str:
    """Distinct per process start: the time orders incarnations for a human reader."""
    return f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:8]}"


def _positive_int(src: str, raw: Any) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{src}={raw!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{src}={raw!r} must be >= 1")
    return value


def _positive_float(src: str, raw: Any, *, allow_zero: bool = False) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{src}={raw!r} is not a number") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{src}={raw!r} must be {'>= 0' if allow_zero else '> 0'}")
    return value


def _ray_connected() -> bool:
    # Never import ray just to ask: only a process that already uses it can be connected.
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())
