"""Where ``pacekeeper status`` finds the controller, and the policy document it runs under.

The chart installs into whatever namespace the user picks (docs/install.md uses
``pacekeeper-system``), so no namespace is assumed: ``--controller-namespace`` when given,
else every namespace is searched for the controller's own traces, strongest first:

- its leader-election Lease (the chart names it ``<fullname>-leader``; ``operator run``
  defaults to ``pacekeeper-controller``);
- its state ConfigMaps (``pacekeeper-state``, ``pacekeeper-job-*``, labelled
  ``app.kubernetes.io/managed-by: pacekeeper``), which live in a namespace of their own
  (the chart's ``state.namespace``) and name the controller's namespace in their
  ``pacekeeper.dev/controller-namespace`` annotation; maps without it (releases before
  the state namespace) count for the namespace they are in;
- the release's policy ConfigMap (``app.kubernetes.io/part-of: pacekeeper``,
  ``app.kubernetes.io/component: policy``).

The state is read from the namespace those maps point from (``--state-namespace`` when
given; the controller's own namespace when no map names it). The policy in force is the
policy ConfigMap in the controller's namespace (what the
controller mounts at ``/etc/pacekeeper/policy.yaml``), or a file given with ``--policy``.
A search the reader may not do (403) is skipped and named in the message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacekeeper.controller.core.policy import PolicyDocument

DEFAULT_LEASE = "pacekeeper-controller"
"""``operator run --lease-name``'s default; the chart's is ``<fullname>-leader``."""
CHART_LEASE_SUFFIX = "-leader"
POLICY_SELECTOR = "app.kubernetes.io/part-of=pacekeeper,app.kubernetes.io/component=policy"
POLICY_KEY = "policy.yaml"
LOOKED_FOR = (
    "a leader Lease (pacekeeper-controller or *pacekeeper*-leader), state ConfigMaps "
    "(pacekeeper-state, pacekeeper-job-*) or the chart's policy ConfigMap"
)

_WEIGHT = {"Lease": 4, "state": 2, "policy": 1}
"""A live controller's Lease outranks state an old install left behind, which outranks
a release that has not decided anything yet."""


@dataclass(frozen=True, slots=True)
class ControllerFound:
    namespace: str | None
    """None: nothing found; the view says so instead of "no decision yet"."""
    how: str
    """What pointed there: ``--controller-namespace``, ``Lease ns/name``, ..."""
    others: tuple[str, ...] = ()
    """Other namespaces with traces of a controller (a second install)."""
    problems: tuple[str, ...] = ()
    """Searches that failed (``cannot list leases in all namespaces: 403 Forbidden``)."""
    state_namespace: str | None = None
    """Where its state ConfigMaps are (None: ``namespace``)."""

    @property
    def state_in(self) -> str | None:
        return self.state_namespace or self.namespace

    def not_found_message(self) -> str:
        extra = "; " + "; ".join(self.problems) if self.problems else ""
        return (
            f"no pacekeeper controller state found (looked for {LOOKED_FOR} in all "
            f"namespaces{extra}); pass --controller-namespace"
        )


@dataclass(frozen=True, slots=True)
class PolicyFound:
    document: PolicyDocument | None
    source: str
    """``ConfigMap ns/name``, ``file path``; or why none was read."""


_raw: dict[str, Any] = {"_preload_content": False, "_request_timeout": 10.0}
"""Plain JSON, as the API sends it: the typed models cost more and say nothing more."""


def _json(response: Any) -> Any:
    import json

    return json.loads(response.data or b"{}")


def _is_controller_lease(name: str) -> bool:
    return name == DEFAULT_LEASE or (name.endswith(CHART_LEASE_SUFFIX) and "pacekeeper" in name)


def _is_state_map(name: str) -> bool:
    from pacekeeper.controller.runtime.state_store import JOB_STATE_PREFIX, STATE_CONFIGMAP

    return name == STATE_CONFIGMAP or name.startswith(JOB_STATE_PREFIX)


def _why(e: Exception) -> str:
    status = getattr(e, "status", None)
    reason = getattr(e, "reason", None)
    if status:
        return f"{status} {reason or ''}".strip()
    return " ".join(str(e).split()) or type(e).__name__


def _items(listed: Any) -> list[Mapping[str, Any]]:
    return list((listed or {}).get("items") or [])


_KEEP: dict[str, Callable[[str], bool]] = {"Lease": _is_controller_lease, "state": _is_state_map}


def find_controller(
    api_client: Any, explicit: str | None, explicit_state: str | None = None
) -> ControllerFound:
    """The controller's namespace: ``explicit``, else the namespace with the strongest
    traces of a controller (Lease, state, policy ConfigMap) in the whole cluster; and
    its state namespace: ``explicit_state``, else the one whose maps name it."""
    if explicit and explicit_state:
        return ControllerFound(explicit, "--controller-namespace", state_namespace=explicit_state)
    from kubernetes import client

    from pacekeeper.controller.runtime.state_store import MANAGED_BY

    core = client.CoreV1Api(api_client)
    if explicit:
        named, failed = _state_namespaces(core)
        return ControllerFound(explicit, "--controller-namespace", problems=tuple(failed),
                               state_namespace=named.get(explicit))  # fmt: skip
    leases = client.CoordinationV1Api(api_client)
    managed = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
    searches: list[tuple[str, str, Any]] = [
        ("Lease", "leases", lambda: leases.list_lease_for_all_namespaces(**_raw)),
        ("state", "ConfigMaps", lambda: core.list_config_map_for_all_namespaces(
            label_selector=managed, **_raw)),
        ("policy", "ConfigMaps", lambda: core.list_config_map_for_all_namespaces(
            label_selector=POLICY_SELECTOR, **_raw)),
    ]  # fmt: skip
    traces: dict[str, dict[str, str]] = {}
    states: dict[str, str] = {}
    problems: list[str] = []
    for kind, plural, search in searches:
        try:
            found = _json(search())
        except Exception as e:  # ApiException (403 without cluster-wide list), urllib3 errors
            problems.append(f"cannot list {plural} in all namespaces: {_why(e)}")
            continue
        for obj in _items(found):
            meta = obj.get("metadata") or {}
            ns, name = str(meta.get("namespace")), str(meta.get("name"))
            if kind == "policy" or _KEEP[kind](name):
                owner = _controller_of(meta) if kind == "state" else ns
                if kind == "state" and owner != ns:
                    states.setdefault(owner, ns)
                traces.setdefault(owner, {}).setdefault(kind, f"{_label(kind)} {ns}/{name}")
    if not traces:
        return ControllerFound(None, "", problems=tuple(problems))
    ranked = sorted(traces, key=lambda ns: (-sum(_WEIGHT[k] for k in traces[ns]), ns))
    best = traces[ranked[0]]
    how = next(best[k] for k in _WEIGHT if k in best)
    state = explicit_state or states.get(ranked[0])
    return ControllerFound(ranked[0], how, tuple(ranked[1:]), tuple(problems), state)


def _controller_of(meta: Mapping[str, Any]) -> str:
    """The namespace of the controller that keeps a state map: its annotation, else
    (an older release's map) the map's own namespace."""
    from pacekeeper.controller.runtime.state_store import CONTROLLER_ANNOTATION

    named = (meta.get("annotations") or {}).get(CONTROLLER_ANNOTATION)
    return str(named or meta.get("namespace"))


def _state_namespaces(core: Any) -> tuple[dict[str, str], list[str]]:
    """Controller namespace -> the namespace its state maps are in, for every map that
    names its controller; and why none could be listed."""
    from pacekeeper.controller.runtime.state_store import MANAGED_BY

    managed = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
    try:
        found = _json(core.list_config_map_for_all_namespaces(label_selector=managed, **_raw))
    except Exception as e:  # ApiException (403 without cluster-wide list), urllib3 errors
        return {}, [f"cannot list ConfigMaps in all namespaces: {_why(e)}"]
    states: dict[str, str] = {}
    for obj in _items(found):
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace")), str(meta.get("name"))
        owner = _controller_of(meta)
        if _is_state_map(name) and owner != ns:
            states.setdefault(owner, ns)
    return states, []


def _label(kind: str) -> str:
    return {"Lease": "Lease", "state": "state ConfigMap", "policy": "policy ConfigMap"}[kind]


def find_policy(api_client: Any, namespace: str | None, policy_file: Path | None) -> PolicyFound:
    """The policy document in force: ``policy_file`` when given, else the policy ConfigMap
    in the controller's namespace. A document that does not validate is reported, not
    used: the view then shows the model's defaults and says why."""
    from pacekeeper.controller.core.policy import PolicyError, load_policy_document

    if policy_file is not None:
        from pacekeeper.controller.core.policy import load_policy_file

        try:
            return PolicyFound(load_policy_file(policy_file), f"file {policy_file}")
        except (PolicyError, OSError) as e:
            return PolicyFound(None, f"file {policy_file} unreadable: {e}")
    if namespace is None:
        return PolicyFound(None, "no controller found")
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    try:
        listed = _json(core.list_namespaced_config_map(namespace, label_selector=POLICY_SELECTOR,
                                                       **_raw))  # fmt: skip
    except Exception as e:  # ApiException, urllib3 errors
        return PolicyFound(None, f"cannot list ConfigMaps in {namespace}: {_why(e)}")
    for cm in sorted(_items(listed), key=lambda c: str((c.get("metadata") or {}).get("name"))):
        text = (cm.get("data") or {}).get(POLICY_KEY)
        if text is None:
            continue
        where = f"ConfigMap {namespace}/{(cm.get('metadata') or {}).get('name')}"
        try:
            return PolicyFound(load_policy_document(text, where), where)
        except PolicyError as e:
            return PolicyFound(None, f"{where} invalid: {e}")
    return PolicyFound(None, f"no policy ConfigMap in {namespace}")
