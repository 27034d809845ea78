"""Who this rank is in reports: its job, node, pod and Ray node, resolved once at initialize.

The sources are the environment (``env``), the Ray runtime context when Ray is already
connected, the host name, and the CUDA runtime for the GPU's UUID; docs/detector.md's
identity table lists them in order.
Kept apart from the run state so the precedence rules read (and change) in one place.
"""

from __future__ import annotations

import os
import socket
import sys

from . import env
from .gather import GroupInfo
from .reports import RankInfo
from .score_report import JobIdentity, Platform


def ray_context() -> tuple[str | None, str | None]:
    """(Ray job id, Ray node id) when this process is connected to Ray; never imports Ray."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return None, None
    ctx = ray.get_runtime_context()
    return ctx.get_job_id(), ctx.get_node_id()


def default_job(ray_job_id: str | None) -> JobIdentity:
    name = env.job_name()
    if ray_job_id:
        return JobIdentity(platform=Platform.RAY, name=name or ray_job_id, ray_job_id=ray_job_id)
    if env.on_kubernetes():
        return JobIdentity(
            platform=Platform.KUBERNETES,
            namespace=env.job_namespace() or "default",
            name=name or "unknown",
        )
    # torchrun's run id names the job across its restarts where nothing else does.
    return JobIdentity(platform=Platform.LOCAL, name=name or env.elastic_run_id() or "local")


def elastic_incarnation() -> str | None:
    """The reporter's incarnation under torchrun: ``$PACEKEEPER_INCARNATION`` (else a new
    one) with the restart count, ``<base>.r<n>``, so every restart is a new incarnation
    even where the platform fixed the variable for the pod (its sequence starts again at
    0, and an unchanged incarnation would make the receiver drop its reports as
    duplicates). None outside torchrun: the reporter's own default applies."""
    restart = env.elastic_restart_count()
    if restart is None:
        return None
    from .reporters.options import new_incarnation

    base = os.environ.get(env.INCARNATION) or new_incarnation()
    return f"{base}.r{restart}"


def resolve_node_name(node_name: str | None) -> str:
    """``node_name`` if given; else ``$NODE_NAME`` on Kubernetes (a pod's host name is the
    pod's, not the node's); else the host name."""
    node = node_name or (env.node_name() if env.on_kubernetes() else None)
    return node or socket.gethostname() or "<unknown>"


GPU_UUID_PREFIXES = ("GPU-", "MIG-")


def gpu_uuid() -> str | None:
    """The UUID of this process's current CUDA device, in the driver's ``GPU-<uuid>`` form
    (what ``nvidia-smi -L`` and DCGM print), or None when this rank uses no GPU.

    Never imports torch and never creates a CUDA context: a rank that has not touched
    CUDA yet (a CPU-only or gloo job on a GPU machine, or a report before the first
    kernel) has no GPU to name. The caller asks again at a later report."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cuda = torch.cuda
    if not cuda.is_initialized():
        return None
    raw = str(cuda.get_device_properties(cuda.current_device()).uuid).strip()
    if not raw:
        return None
    return raw if raw.startswith(GPU_UUID_PREFIXES) else f"GPU-{raw}"


def gpu_in_use_possible() -> bool:
    """Whether a later report may still find a GPU: torch is loaded and CUDA present."""
    torch = sys.modules.get("torch")
    return torch is not None and bool(torch.cuda.is_available())


def rank_info(
    info: GroupInfo, node: str, ray_node_id: str | None, gpu: str | None = None
) -> RankInfo:
    """This rank's place, as it travels in every payload (sample counts filled per report)."""
    return RankInfo(
        rank=info.global_rank,
        node=node,
        pod=env.pod_name(),
        ray_node_id=ray_node_id,
        pid=os.getpid(),
        gpu_uuid=gpu,
    )
