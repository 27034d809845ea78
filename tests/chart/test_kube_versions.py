"""The chart on its oldest supported Kubernetes (the real-server tier's 1.20.2) and on the
newest whose schemas we check (1.33): each version-gated part, rendered for both."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from chart_cases import FEATURES
from chart_render import CHART_DIR, KUBE_VERSION, NAMESPACE, OLDEST_KUBE_VERSION, REPO, one, render

OLD, NEW = OLDEST_KUBE_VERSION, KUBE_VERSION
HA = FEATURES["high-availability"]
WEBHOOK = FEATURES["webhook"]
OPT_OUT = {"key": "pacekeeper.dev/inject", "operator": "NotIn", "values": ["false"]}

# What kube-apiserver 1.20 serves, of the built-in group versions the chart could use.
SERVED_BY_1_20 = {
    "v1",
    "apps/v1",
    "batch/v1",
    "policy/v1beta1",
    "rbac.authorization.k8s.io/v1",
    "admissionregistration.k8s.io/v1",
    "networking.k8s.io/v1",
    "coordination.k8s.io/v1",
}
REMOVED_BY_1_33 = {"policy/v1beta1", "batch/v1beta1", "networking.k8s.io/v1beta1"}
CUSTOM_GROUPS = ("monitoring.coreos.com/", "cert-manager.io/")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.match(r"v?(\d+)\.(\d+)\.(\d+)", text).groups())  # type: ignore[union-attr]


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector, as the API server evaluates it."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        present, value = e["key"] in labels, labels.get(e["key"])
        ok = {
            "In": present and value in e.get("values", []),
            "NotIn": not present or value not in e.get("values", []),
            "Exists": present,
            "DoesNotExist": not present,
        }[e["operator"]]
        if not ok:
            return False
    return True


def _webhook(values: dict[str, Any], kube_version: str) -> dict[str, Any]:
    objects = render(values, kube_version=kube_version)
    return one(objects, "MutatingWebhookConfiguration")["webhooks"][0]  # type: ignore[no-any-return]


def test_the_floor_is_the_kube_apiserver_of_the_real_server_tier() -> None:
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.20.0-0"
    binaries = (REPO / "tests" / "realserver" / "binaries.py").read_text()
    tier = re.search(r'^KUBE_VERSION = "([0-9.]+)"', binaries, re.M)
    assert tier is not None and tier.group(1) == OLD
    assert _version(OLD) >= _version(chart["kubeVersion"].removeprefix(">="))


@pytest.mark.parametrize(
    ("kube_version", "api_version"),
    [
        (OLD, "policy/v1beta1"),
        ("1.20.0", "policy/v1beta1"),
        ("1.21.0", "policy/v1"),
        (NEW, "policy/v1"),
    ],
)
def test_the_pod_disruption_budget_uses_policy_v1_from_1_21(
    kube_version: str, api_version: str
) -> None:
    pdb = one(render(HA, kube_version=kube_version), "PodDisruptionBudget")
    assert pdb["apiVersion"] == api_version
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "controller"


def test_a_managed_clusters_prerelease_style_version_counts_as_its_release() -> None:
    pdb = one(render(HA, kube_version="1.21.14-eks-18ef993"), "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"


def test_from_1_21_the_webhook_leaves_out_the_release_namespace_by_name() -> None:
    hook = _webhook(WEBHOOK, NEW)
    release_ns = {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NAMESPACE]}
    assert hook["namespaceSelector"]["matchExpressions"][0] == release_ns
    assert not _matches(hook["namespaceSelector"], {"kubernetes.io/metadata.name": NAMESPACE})
    assert hook["objectSelector"] == WEBHOOK.get("objectSelector", hook["objectSelector"])


def test_before_1_21_the_webhook_leaves_out_its_own_pods_by_their_opt_out_label() -> None:
    """1.20 sets no kubernetes.io/metadata.name: NotIn on it would match every namespace,
    the release's too, so with failurePolicy Fail the webhook's pods could never start."""
    values = {"webhook": {"enabled": True, "failurePolicy": "Fail"}}
    hook = _webhook(values, OLD)
    expressions = hook["namespaceSelector"].get("matchExpressions", [])
    assert all(NAMESPACE not in e.get("values", []) for e in expressions)
    assert OPT_OUT in hook["objectSelector"]["matchExpressions"]
    pod = one(render(values, kube_version=OLD), "Deployment", "-webhook")["spec"]["template"]
    assert not _matches(hook["objectSelector"], pod["metadata"]["labels"])
    assert _matches(hook["objectSelector"], {"app": "trainer"})


@pytest.mark.parametrize("kube_version", [OLD, NEW])
def test_the_webhooks_own_pods_never_match_its_object_selector(kube_version: str) -> None:
    objects = render(WEBHOOK, kube_version=kube_version)
    hook = one(objects, "MutatingWebhookConfiguration")["webhooks"][0]
    pod = one(objects, "Deployment", "-webhook")["spec"]["template"]
    assert not _matches(hook["objectSelector"], pod["metadata"]["labels"])


def test_before_1_21_a_users_object_selector_keeps_its_terms_and_gains_the_opt_out() -> None:
    mine = {"matchLabels": {"team": "ml"}, "matchExpressions": [
        {"key": "tier", "operator": "In", "values": ["gpu"]}]}  # fmt: skip
    hook = _webhook({"webhook": {"enabled": True, "objectSelector": mine}}, OLD)
    assert hook["objectSelector"] == {
        "matchLabels": {"team": "ml"},
        "matchExpressions": [*mine["matchExpressions"], OPT_OUT],
    }
    assert (
        _webhook({"webhook": {"enabled": True, "objectSelector": mine}}, NEW)["objectSelector"]
        == mine
    )
    # The chart's default already leaves the label out: nothing is added twice.
    assert _webhook(WEBHOOK, OLD)["objectSelector"]["matchExpressions"] == [OPT_OUT]


@pytest.mark.parametrize("feature", FEATURES)
def test_on_1_20_every_built_in_object_uses_a_group_version_it_serves(feature: str) -> None:
    for obj in render(FEATURES[feature], kube_version=OLD):
        if obj["apiVersion"].startswith(CUSTOM_GROUPS):
            continue
        assert obj["apiVersion"] in SERVED_BY_1_20, (obj["kind"], obj["apiVersion"])


@pytest.mark.parametrize("feature", FEATURES)
def test_on_1_33_no_object_uses_a_removed_group_version(feature: str) -> None:
    for obj in render(FEATURES[feature], kube_version=NEW):
        assert obj["apiVersion"] not in REMOVED_BY_1_33, (obj["kind"], obj["apiVersion"])
