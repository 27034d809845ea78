"""Render the chart with real Helm and check what comes out against real schemas.

Built-in kinds are checked with kubernetes-validate (offline, strict: unknown fields
fail); custom resources with jsonschema against their CRD's openAPIV3Schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import yaml
from helm_python import _native

from pacekeeper.detector.reporters.k8s_status import build_status, new_object
from pacekeeper.detector.score_report import JobIdentity, Platform, ScoreReport

REPO = Path(__file__).resolve().parents[2]
CHART_DIR = REPO / "charts" / "pacekeeper"
KUBE_VERSION = "1.33.0"
"""The Kubernetes whose schemas kubernetes-validate checks against, and the version renders
claim by default (the newest the chart gates on)."""
OLDEST_KUBE_VERSION = "1.20.2"
"""The chart's floor (Chart.yaml kubeVersion), the real-server tier's kube-apiserver."""
RELEASE = "pk"
NAMESPACE = "pacekeeper-system"
PROMETHEUS_OPERATOR_CRDS = Path(__file__).with_name("fixtures") / "prometheus_operator_crds.yaml"
CERT_MANAGER_CRDS = Path(__file__).with_name("fixtures") / "cert_manager_crds.yaml"

Manifest = dict[str, Any]

# A kubeconfig pointing nowhere: a client dry-run install never contacts it.
_UNREACHABLE_KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: none, cluster: {server: "https://127.0.0.1:9"}}]
contexts: [{name: none, context: {cluster: none, user: none}}]
current-context: none
users: [{name: none, user: {}}]
"""


@cache
def chart() -> helm.Chart:
    return helm.Chart.load(CHART_DIR)


PUSHED_IMAGE: dict[str, Any] = {
    "controller": {"image": {"repository": "registry.invalid/ml-platform/pacekeeper-controller"}}
}
"""Merged under every rendering's values unless `pushed_image=False`: the chart refuses its
unpushed local default image, so the renders here stand for a user who pushed it."""


def _with_pushed_image(values: dict[str, Any] | None) -> dict[str, Any]:
    def merged(low: dict[str, Any], high: dict[str, Any]) -> dict[str, Any]:
        out = dict(low)
        for key, value in high.items():
            both = isinstance(value, dict) and isinstance(out.get(key), dict)
            out[key] = merged(out[key], value) if both else value
        return out

    return merged(PUSHED_IMAGE, values or {})


def render_files(
    values: dict[str, Any] | None = None,
    *,
    kube_version: str = KUBE_VERSION,
    pushed_image: bool = True,
) -> dict[str, str]:
    """Template path -> rendered text, as `helm template --kube-version` would produce.

    `.Capabilities.KubeVersion` is what the templates gate on; Helm's offline
    `.Capabilities.APIVersions` lists every group version its client knows whatever the
    version, so it proves nothing about an old server and the chart does not read it.
    `Chart.render` does not pass capabilities, so the library's render call is made here
    with the same options plus the version.
    """
    opts = {
        "name": RELEASE,
        "namespace": NAMESPACE,
        "is_install": True,
        "kube_version": f"v{kube_version}",
    }
    if pushed_image:
        values = _with_pushed_image(values)
    rendered = _native.call_string(
        "helm_render",
        chart()._raw(),
        None if values is None else json.dumps(values),
        json.dumps(opts),
    )
    files: dict[str, str] = json.loads(rendered)
    return files


def render(
    values: dict[str, Any] | None = None, *, kube_version: str = KUBE_VERSION
) -> list[Manifest]:
    """Every object the release would create (NOTES.txt and empty templates left out)."""
    out: list[Manifest] = []
    for path, text in sorted(render_files(values, kube_version=kube_version).items()):
        if path.endswith("NOTES.txt"):
            continue
        out.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return out


def notes(values: dict[str, Any] | None = None) -> str:
    return next(t for p, t in render_files(values).items() if p.endswith("NOTES.txt"))


def install_dry_run(
    values: dict[str, Any] | None = None, *, pushed_image: bool = True
) -> dict[str, Any]:
    """`helm install --dry-run=client`: the same values checks a real install runs."""
    if pushed_image:
        values = _with_pushed_image(values)
    config = helm.Config(
        storage_driver="memory", namespace=NAMESPACE, kubeconfig_content=_UNREACHABLE_KUBECONFIG
    )
    with config:
        return config.install(chart(), RELEASE, values, namespace=NAMESPACE, dry_run="client")


def crds() -> list[Manifest]:
    return [yaml.safe_load(c["data"]) for c in chart().crds]


def report_rank_schema() -> dict[str, Any]:
    """The StragglerReport CRD's schema of one rank of ``status.report`` (the fields
    the API server keeps; the rest it prunes)."""
    (crd,) = [c for c in crds() if c["metadata"]["name"] == "stragglerreports.pacekeeper.dev"]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    report = schema["properties"]["status"]["properties"]["report"]
    items: dict[str, Any] = report["properties"]["ranks"]["items"]
    return items


def status_object(ranks: Sequence[Any]) -> dict[str, Any]:
    """The StragglerReport a job's reporter writes for ``ranks`` (``RankScores``): created,
    then its status patched, as in the cluster."""
    report = ScoreReport.build(
        job=JobIdentity(platform=Platform.KUBERNETES, namespace="team-a", name="llama"),
        sequence=7,
        generated_at=datetime(2026, 11, 30, 1, 0, tzinfo=UTC),
        window_s=60.0,
        ranks=list(ranks),
    )
    obj = new_object("team-a", "llama", report)
    obj["status"] = build_status(report, incarnation="20261130T010000Z-abcd1234")
    return obj


def one(objects: list[Manifest], kind: str, name_suffix: str = "") -> Manifest:
    found = [
        o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(name_suffix)
    ]
    assert len(found) == 1, f"expected one {kind} *{name_suffix}, found {len(found)}"
    return found[0]


def kinds(objects: list[Manifest]) -> list[str]:
    return sorted(o["kind"] for o in objects)


@cache
def _custom_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> openAPIV3Schema of every CRD we know of: the chart's own and
    the prometheus-operator and cert-manager subsets in fixtures/."""
    defs = list(crds())
    for fixture in (PROMETHEUS_OPERATOR_CRDS, CERT_MANAGER_CRDS):
        defs += [d for d in yaml.safe_load_all(fixture.read_text()) if d]
    schemas: dict[tuple[str, str], dict[str, Any]] = {}
    for crd in defs:
        spec = crd["spec"]
        for version in spec["versions"]:
            api_version = f"{spec['group']}/{version['name']}"
            schemas[(api_version, spec["names"]["kind"])] = version["schema"]["openAPIV3Schema"]
    return schemas


def is_builtin(obj: Manifest) -> bool:
    return (obj["apiVersion"], obj["kind"]) not in _custom_schemas()


def validate(obj: Manifest) -> None:
    """Raise when the object does not match its kind's schema."""
    schema = _custom_schemas().get((obj["apiVersion"], obj["kind"]))
    if schema is None:
        _validate_builtin(json.dumps(obj, sort_keys=True))
        return
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    # CRD schemas are OpenAPI 3.0 schemas: draft-4 semantics (boolean exclusiveMinimum).
    jsonschema.validate(body, _structural(schema), cls=jsonschema.Draft4Validator)


@cache
def _validate_builtin(obj_json: str) -> None:
    """kubernetes-validate re-reads its schema files on every call; the same object
    recurs across feature cases, so each distinct object is checked once."""
    kubernetes_validate.validate(json.loads(obj_json), KUBE_VERSION, strict=True)


def _structural(schema: dict[str, Any], *, top: bool = True) -> dict[str, Any]:
    """A CRD schema as plain JSON schema: Kubernetes prunes unknown fields, so an object
    without x-kubernetes-preserve-unknown-fields gets additionalProperties false (a typo
    we render would otherwise vanish silently on the API server)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-"):
            continue
        if key == "properties":
            out[key] = {name: _structural(sub, top=False) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _structural(value, top=False)
        else:
            out[key] = value
    is_object = schema.get("type") == "object" and "properties" in schema
    if is_object and not schema.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    if top and "properties" in out:
        # metadata is checked by the API server, not the CRD schema; a nested `kind`
        # (cert-manager's issuerRef.kind) is an ordinary field.
        out["properties"].pop("metadata", None)
        out["properties"].pop("apiVersion", None)
        out["properties"].pop("kind", None)
    return out


def pod_specs(obj: Manifest) -> Iterator[dict[str, Any]]:
    if obj["kind"] == "Pod":
        yield obj["spec"]
    elif obj["kind"] == "Deployment":
        yield obj["spec"]["template"]["spec"]
