"""Where the CLI finds Kubernetes: the one loader behind ``operator run``, ``status`` and
``export``, in kubectl's order so that a shell that works with kubectl works here.

1. ``--kubeconfig``, else ``KUBECONFIG`` (one path or a ``:``-separated list, merged);
2. ``~/.kube/config``;
3. the pod's service account (in-cluster).

Besides the client it returns the namespace kubectl would default to: the current
context's ``namespace``, or in a cluster the pod's own namespace (``None`` when neither
says, where kubectl would use ``default``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_KUBECONFIG = "~/.kube/config"
HOW_TO_CONFIGURE = "set KUBECONFIG, pass --kubeconfig, or run in a cluster"
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeConfigError(Exception):
    """No usable Kubernetes configuration; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class KubeConnection:
    api_client: Any
    namespace: str | None
    """The current context's namespace (in a cluster: the pod's); None when unset."""
    source: str
    """``kubeconfig <path(s)>`` or ``in-cluster``, for messages."""


def connect(
    kubeconfig: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> KubeConnection:
    """A client and default namespace from the first source that exists, in kubectl's
    order; ``KubeConfigError`` when none does or the one found is broken."""
    env = os.environ if environ is None else environ
    explicit = str(kubeconfig) if kubeconfig else env.get("KUBECONFIG", "")
    if explicit:
        return _from_kubeconfig(explicit)
    if os.path.exists(os.path.expanduser(DEFAULT_KUBECONFIG)):
        return _from_kubeconfig(DEFAULT_KUBECONFIG)
    return _in_cluster(env)


def api_client(kubeconfig: str | Path | None = None) -> Any:
    return connect(kubeconfig).api_client


def _in_cluster(env: Mapping[str, str]) -> KubeConnection:
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config  # untyped in the kubernetes package
    try:
        config.load_incluster_config()
    except config.ConfigException as e:
        if env.get("KUBERNETES_SERVICE_HOST"):
            raise KubeConfigError(
                f"no Kubernetes configuration: in a cluster, but {_one_line(e).rstrip('.')} "
                f"(is the service account token mounted?); {HOW_TO_CONFIGURE}"
            ) from None
        raise KubeConfigError(
            f"no Kubernetes configuration (not in a cluster, no {DEFAULT_KUBECONFIG}): "
            f"{HOW_TO_CONFIGURE}"
        ) from None
    try:
        namespace = SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        namespace = None
    return KubeConnection(client.ApiClient(), namespace, "in-cluster")


def _from_kubeconfig(value: str) -> KubeConnection:
    """A client from a kubeconfig path or ``:``-separated list of them, as KUBECONFIG takes.

    The files are read and parsed here first, so that a user learns which file is
    missing, unreadable or not YAML, not a TypeError from inside the kubernetes loader."""
    import yaml
    from kubernetes import config as kube_config

    config: Any = kube_config
    paths = [p for p in value.split(os.pathsep) if p]
    present = [p for p in paths if os.path.exists(os.path.expanduser(p))]
    if not present:
        what = f"kubeconfig {value} does" if len(paths) < 2 else f"none of kubeconfigs {value}"
        raise KubeConfigError(f"{what} not exist: {HOW_TO_CONFIGURE}")
    for path in present:
        try:
            doc = yaml.safe_load(Path(path).expanduser().read_text())
        except OSError as e:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise KubeConfigError(
                f"kubeconfig {path} is not valid YAML: {_yaml_problem(e)}"
            ) from None
        if doc is not None and not isinstance(doc, dict):
            raise KubeConfigError(
                f"kubeconfig {path} is not a kubeconfig: expected a mapping with clusters, "
                "users, contexts and current-context"
            )
    # The kubernetes loader merges a list only when given it whole, and skips missing
    # entries itself, as kubectl does.
    try:
        client = config.new_client_from_config(config_file=value)
        _contexts, active = config.list_kube_config_contexts(config_file=value)
    except Exception as e:  # the loader raises ConfigException, or anything on odd data
        raise KubeConfigError(f"kubeconfig {value} is invalid: {_one_line(e)}") from None
    namespace = ((active or {}).get("context") or {}).get("namespace") or None
    return KubeConnection(client, namespace, f"kubeconfig {value}")


def _yaml_problem(e: Exception) -> str:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or _one_line(e)
    if mark is None:
        return str(problem)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__
