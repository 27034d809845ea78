"""Moving the controller's state out of its own namespace into the state namespace, once.

Releases before this one kept their state ConfigMaps (``pacekeeper-state``,
``pacekeeper-job-<hash>``, ``pacekeeper-hardware-NNN``) in the release namespace, where
the state Role had to grant writes on every ConfigMap, the policy's included (RBAC
cannot name the hashed job maps). The state now lives in a namespace of its own
(docs/security.md); an upgraded controller copies the old maps there before it decides
anything, so no action is lost or repeated across the upgrade.

- It runs after the Lease is won and before the first reconcile: the old controller has
  stopped writing, and nothing of this one has been written yet.
- Each map is created in the state namespace; one that is already there (an earlier
  attempt stopped part way) is kept as it is.
- ``pacekeeper-state-migrated`` is written last: while it exists, nothing is copied
  again, so a job map deleted since (its report is gone) never comes back from the old
  copy.
- The old maps are only read (``list`` and ``get``: the migration Role grants no more).
  They stay behind for a rollback; docs/upgrade.md says how to remove them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from pacekeeper.controller.runtime.hardware_store import HARDWARE_PREFIX
from pacekeeper.controller.runtime.state_store import (
    CONTROLLER_ANNOTATION,
    JOB_STATE_PREFIX,
    MANAGED_BY,
    STATE_CONFIGMAP,
)

logger = logging.getLogger(__name__)

MIGRATION_CONFIGMAP = "pacekeeper-state-migrated"
MIGRATED_FROM_ANNOTATION = "pacekeeper.dev/migrated-from"


class StateMigrationError(RuntimeError):
    """The old state could not be read or copied: the controller must not act without it."""


@dataclass(frozen=True, slots=True)
class Migration:
    source: str
    target: str
    copied: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    """Already in the state namespace (an earlier attempt copied them)."""
    done_before: bool = False
    """The marker was there: nothing was read."""


def is_state_name(name: str) -> bool:
    return (
        name == STATE_CONFIGMAP
        or name.startswith(JOB_STATE_PREFIX)
        or name.startswith(HARDWARE_PREFIX)
    )


def migrate_state(
    api_client: Any,
    *,
    source: str,
    target: str,
    controller_namespace: str,
    now: datetime,
    request_timeout_s: float = 10.0,
) -> Migration:
    """Copy the state ConfigMaps of ``source`` into ``target`` unless that was done."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    if source == target:
        raise ValueError(f"state namespace {target!r} is the namespace it would move from")
    core = client.CoreV1Api(api_client)
    raw: dict[str, Any] = {"_preload_content": False, "_request_timeout": request_timeout_s}
    try:
        core.read_namespaced_config_map(MIGRATION_CONFIGMAP, target, **raw).data  # noqa: B018
        return Migration(source, target, done_before=True)
    except ApiException as e:
        if e.status != 404:
            raise StateMigrationError(f"cannot read {target}/{MIGRATION_CONFIGMAP}: {e}") from e
    copied: list[str] = []
    kept: list[str] = []
    for cm in _old_state(core, source, raw):
        try:
            body = _copy(cm, target, source, controller_namespace)
            core.create_namespaced_config_map(target, cast(Any, body), **raw).data  # noqa: B018
            copied.append(_name(cm))
        except ApiException as e:
            if e.status != 409:
                raise StateMigrationError(f"cannot copy {source}/{_name(cm)}: {e}") from e
            kept.append(_name(cm))
    marker = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": MIGRATION_CONFIGMAP,
            "namespace": target,
            "labels": dict(MANAGED_BY),
            "annotations": {CONTROLLER_ANNOTATION: controller_namespace},
        },
        "data": {
            "from": source,
            "at": now.isoformat(),
            "configMaps": json.dumps(copied + kept),
        },
    }
    try:
        core.create_namespaced_config_map(target, cast(Any, marker), **raw).data  # noqa: B018
    except ApiException as e:
        if e.status != 409:
            raise StateMigrationError(f"cannot write {target}/{MIGRATION_CONFIGMAP}: {e}") from e
    done = Migration(source, target, tuple(copied), tuple(kept))
    logger.info(
        "state moved to the state namespace",
        extra={"from": source, "to": target, "copied": len(copied), "kept": len(kept)},
    )
    return done


LIST_PAGE = 50
"""Maps listed per request: a job's map can hold hundreds of kB (a large job's ladder and
records), and an old release may have a thousand."""


def _old_state(core: Any, source: str, raw: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The older release's state maps in ``source``, page by page."""
    from kubernetes.client.exceptions import ApiException

    selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
    token: str | None = None
    while True:
        page: dict[str, Any] = {"limit": LIST_PAGE, **({"_continue": token} if token else {})}
        try:
            response: Any = core.list_namespaced_config_map(
                source, label_selector=selector, **page, **raw
            )
        except ApiException as e:
            raise StateMigrationError(f"cannot list the old state in {source}: {e}") from e
        listed = json.loads(cast(bytes, response.data) or b"{}")
        yield from (cm for cm in listed.get("items") or [] if is_state_name(_name(cm)))
        token = (listed.get("metadata") or {}).get("continue") or None
        if token is None:
            return


def _name(cm: Any) -> str:
    return str((cm.get("metadata") or {}).get("name"))


def _copy(cm: Any, target: str, source: str, controller_namespace: str) -> dict[str, Any]:
    meta = cm.get("metadata") or {}
    annotations = {
        **(meta.get("annotations") or {}),
        CONTROLLER_ANNOTATION: controller_namespace,
        MIGRATED_FROM_ANNOTATION: source,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": _name(cm),
            "namespace": target,
            "labels": dict(meta.get("labels") or {}),
            "annotations": annotations,
        },
        "data": dict(cm.get("data") or {}),
    }
