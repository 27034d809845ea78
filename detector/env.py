"""Environment variables the detector reads, their defaults and units.

Read once at ``Detector.initialize`` (never on the hot path). A malformed value raises a
``ValueError`` naming the variable: it is user input, caught at start-up.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

N = TypeVar("N", int, float)

MAX_SECTION_SAMPLES = "PACEKEEPER_MAX_SECTION_SAMPLES"
"""Section timings kept per section and window (ring buffer; oldest overwritten). Default 8192."""

MAX_KERNEL_KEYS = "PACEKEEPER_MAX_KERNEL_KEYS"
"""Kernel keys per rank and report, the longest-running kept. Default 512."""

MAX_SECTIONS = "PACEKEEPER_MAX_SECTIONS"
"""Distinct section names tracked per process; later names are timed as '<other>'. Default 1024."""

BASELINE_WINDOWS = "PACEKEEPER_BASELINE_WINDOWS"
"""Report windows an individual-score baseline remembers. Default 20."""

REPORT_TIMEOUT_S = "PACEKEEPER_REPORT_TIMEOUT_S"
"""Seconds one collective of a report may wait on the detector's own process group before
the report gives up (``None``, logged and counted). Default 60; ``initialize(
report_timeout_s=...)`` wins over it."""

CONTROL = "PACEKEEPER_CONTROL"
"""Runtime control (docs/detector.md): ``auto`` (default: on when a reporter is
configured, read through it), ``none``, or ``file:PATH`` (a JSON control document)."""

CONTROL_POLL_S = "PACEKEEPER_CONTROL_POLL_S"
"""Seconds between the reporting rank's reads of the control document. Default 15."""

TORCHELASTIC_RUN_ID = "TORCHELASTIC_RUN_ID"
"""torchrun's ``--rdzv-id`` (a random id with ``--standalone``): the same across restarts."""

TORCHELASTIC_RESTART_COUNT = "TORCHELASTIC_RESTART_COUNT"
"""How many times torchrun restarted the workers (0 at the first attempt)."""

INCARNATION = "PACEKEEPER_INCARNATION"

RANK = "RANK"
"""The launcher's global rank (torchrun, Kubeflow, Lightning set it): who will be rank 0
when ``initialize`` runs before ``init_process_group``."""

JOB_NAME = "PACEKEEPER_JOB_NAME"
"""Job name in the score report. Default: the Kubernetes job name label env, else 'local'."""

JOB_NAMESPACE = "PACEKEEPER_JOB_NAMESPACE"
"""Kubernetes namespace of the job. Default: POD_NAMESPACE, else the service account's."""

KUBERNETES_SERVICE_HOST = "KUBERNETES_SERVICE_HOST"
POD_NAME = "POD_NAME"
POD_NAMESPACE = "POD_NAMESPACE"
HOSTNAME = "HOSTNAME"
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

# Labels that frameworks expose as env vars through the downward API (or set themselves).
_JOB_NAME_FALLBACKS = ("JOB_NAME", "PET_JOB_NAME", "JOBSET_NAME")


@dataclass(frozen=True, slots=True)
class DetectorSettings:
    max_section_samples: int = 8192
    max_kernel_keys: int = 512
    max_sections: int = 1024
    baseline_windows: int = 20
    report_timeout_s: float = 60.0


def _positive(environ: Mapping[str, str], name: str, default: N, parse: type[N]) -> N:
    """``$name`` parsed as ``parse`` (int: >= 1; float: > 0 and finite), else ``default``."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    kind = "an integer" if parse is int else "a number"
    try:
        value = parse(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not {kind}") from None
    if not math.isfinite(value) or value <= 0:  # for an int: < 1
        raise ValueError(f"{name}={raw.strip()} must be {'>= 1' if parse is int else '> 0'}")
    return value


def read_settings(environ: Mapping[str, str] | None = None) -> DetectorSettings:
    env = os.environ if environ is None else environ
    d = DetectorSettings()
    return DetectorSettings(
        max_section_samples=_positive(env, MAX_SECTION_SAMPLES, d.max_section_samples, int),
        max_kernel_keys=_positive(env, MAX_KERNEL_KEYS, d.max_kernel_keys, int),
        max_sections=_positive(env, MAX_SECTIONS, d.max_sections, int),
        baseline_windows=_positive(env, BASELINE_WINDOWS, d.baseline_windows, int),
        report_timeout_s=_positive(env, REPORT_TIMEOUT_S, d.report_timeout_s, float),
    )


def on_kubernetes(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return bool(env.get(KUBERNETES_SERVICE_HOST))


def pod_name(environ: Mapping[str, str] | None = None) -> str | None:
    """The pod this rank runs in, only when on Kubernetes (HOSTNAME is the pod name there)."""
    env = os.environ if environ is None else environ
    if not on_kubernetes(env):
        return None
    return env.get(POD_NAME) or env.get(HOSTNAME) or None


def job_namespace(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    ns = env.get(JOB_NAMESPACE) or env.get(POD_NAMESPACE)
    if ns:
        return ns
    if on_kubernetes(env):
        try:
            with open(SERVICE_ACCOUNT_NAMESPACE_FILE, encoding="utf-8") as f:
                return f.read().strip() or None
        except OSError:
            return None
    return None


def job_name(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    for key in (JOB_NAME, *_JOB_NAME_FALLBACKS):
        if env.get(key):
            return env[key]
    return None


NODE_NAME = "NODE_NAME"
"""Kubernetes node of this pod (downward API ``spec.nodeName``); the pod's HOSTNAME is not
the node there."""


def node_name(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get(NODE_NAME) or None


def reporter_kind(environ: Mapping[str, str] | None = None) -> str | None:
    """``PACEKEEPER_REPORTER`` when set: an annotated job's environment turns the reporter
    on; unset means the Detector publishes nowhere, as NVRx."""
    env = os.environ if environ is None else environ
    return env.get("PACEKEEPER_REPORTER") or None


def launcher_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """``$RANK`` as an integer, or None when unset or not an integer."""
    env = os.environ if environ is None else environ
    try:
        return int(env.get(RANK, ""))
    except ValueError:
        return None


def control_spec(environ: Mapping[str, str] | None = None) -> str | None:
    """``$PACEKEEPER_CONTROL``, or None when unset."""
    env = os.environ if environ is None else environ
    return env.get(CONTROL) or None


def control_poll_s(environ: Mapping[str, str] | None = None) -> float:
    env = os.environ if environ is None else environ
    return _positive(env, CONTROL_POLL_S, 15.0, float)


def elastic_run_id(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get(TORCHELASTIC_RUN_ID) or None


def elastic_restart_count(environ: Mapping[str, str] | None = None) -> int | None:
    """``$TORCHELASTIC_RESTART_COUNT`` (None outside torchrun or when malformed)."""
    env = os.environ if environ is None else environ
    try:
        return int(env.get(TORCHELASTIC_RESTART_COUNT, ""))
    except ValueError:
        return None
