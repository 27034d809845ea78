"""webhook.enabled: the env-injection webhook's objects, scope, failure mode and certificate."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from chart_cases import FEATURES
from chart_render import NAMESPACE, RELEASE, one, render

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.runtime.webhook import MUTATE_PATH

WEBHOOK = f"{RELEASE}-pacekeeper-webhook"
TLS_DIR = "/var/run/secrets/pacekeeper.dev/tls"


def hook(values: dict[str, Any]) -> dict[str, Any]:
    (entry,) = one(render(values), "MutatingWebhookConfiguration")["webhooks"]
    return entry


def webhook_pod(values: dict[str, Any]) -> dict[str, Any]:
    return one(render(values), "Deployment", "-webhook")["spec"]["template"]


def test_off_by_default() -> None:
    objects = render()
    assert not [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    assert not [o for o in objects if o["metadata"]["name"].startswith(WEBHOOK)]


def test_a_down_webhook_never_blocks_pods_and_answers_are_awaited_briefly() -> None:
    entry = hook(FEATURES["webhook"])
    assert entry["failurePolicy"] == "Ignore"
    assert entry["timeoutSeconds"] == 3
    assert entry["sideEffects"] == "None"
    assert entry["admissionReviewVersions"] == ["v1"]
    assert entry["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                               "resources": ["pods"], "scope": "Namespaced"}]  # fmt: skip
    strict = hook(FEATURES["webhook-cluster-issuer"])
    assert (strict["failurePolicy"], strict["timeoutSeconds"]) == ("Fail", 2)


def test_it_never_sees_the_release_namespace_system_namespaces_or_opted_out_pods() -> None:
    entry = hook(FEATURES["webhook"])
    excluded = [
        value
        for e in entry["namespaceSelector"]["matchExpressions"]
        if (e["key"], e["operator"]) == ("kubernetes.io/metadata.name", "NotIn")
        for value in e["values"]
    ]
    assert {NAMESPACE, "kube-system", "kube-public", "kube-node-lease"} <= set(excluded)
    assert entry["objectSelector"] == {
        "matchExpressions": [
            {"key": "pacekeeper.dev/inject", "operator": "NotIn", "values": ["false"]}
        ]
    }


def test_a_narrower_scope_from_values_keeps_the_release_namespace_out() -> None:
    # Helm merges maps: labels given in values narrow the default expressions, which stay.
    entry = hook(FEATURES["tls-existing-secret"])
    assert entry["namespaceSelector"]["matchLabels"] == {"pacekeeper.dev/inject": "enabled"}
    assert entry["namespaceSelector"]["matchExpressions"][0] == (
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NAMESPACE]}
    )
    assert entry["objectSelector"]["matchLabels"] == {"team": "ml"}
    only = {"webhook": {"enabled": True, "namespaceSelector": {"matchExpressions": []},
                        "objectSelector": {"matchExpressions": []}}}  # fmt: skip
    entry = hook(only)
    assert entry["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [NAMESPACE]}
    ]}  # fmt: skip
    assert entry["objectSelector"] == {"matchExpressions": []}


def test_the_apiserver_reaches_the_pods_serving_the_path_over_the_service() -> None:
    objects = render(FEATURES["webhook"])
    service = one(objects, "Service", "-webhook")
    client = one(objects, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]
    assert client["service"] == {"name": WEBHOOK, "namespace": NAMESPACE, "path": MUTATE_PATH,
                                 "port": 443}  # fmt: skip
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    pod = webhook_pod(FEATURES["webhook"])
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {port["targetPort"]: 9443}
    command = [str(w) for w in c["command"]]
    assert command[command.index("--port") + 1] == "9443"
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": "webhook", "scheme": "HTTPS"}


def test_the_rendered_command_is_one_the_cli_accepts() -> None:
    (c,) = webhook_pod(FEATURES["webhook"])["spec"]["containers"]
    command = [str(w) for w in c["command"]]
    assert command[:3] == ["pacekeeper", "webhook", "serve"]
    group: Any = typer.main.get_command(app)
    ctx = group.commands["webhook"].commands["serve"].make_context("serve", command[3:])
    assert str(ctx.params["tls_dir"]) == TLS_DIR


@pytest.mark.parametrize("feature", ["webhook", "webhook-metrics-open"])
def test_the_webhook_holds_no_token_and_no_rights(feature: str) -> None:
    objects = render(FEATURES[feature])
    pod = webhook_pod(FEATURES[feature])
    account = one(objects, "ServiceAccount", "-webhook")
    assert pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert pod["spec"]["automountServiceAccountToken"] is False
    assert account["automountServiceAccountToken"] is False
    bound = [s["name"] for o in objects if o["kind"].endswith("Binding")
             for s in o.get("subjects") or []]  # fmt: skip
    assert account["metadata"]["name"] not in bound


def test_its_certificate_is_a_mounted_secret_whose_ca_the_apiserver_trusts() -> None:
    objects = render(FEATURES["webhook-metrics-open"])
    secret = one(objects, "Secret", "-tls")
    spec = webhook_pod(FEATURES["webhook-metrics-open"])["spec"]
    (c,) = spec["containers"]
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
    assert mount["mountPath"] == TLS_DIR and mount["readOnly"] is True
    (volume,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == secret["metadata"]["name"]
    entry = one(objects, "MutatingWebhookConfiguration")["webhooks"][0]
    assert entry["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]


def test_with_cert_manager_the_ca_injector_fills_the_bundle() -> None:
    objects = render(FEATURES["webhook-cert-manager"])
    certificate = one(objects, "Certificate", "-tls")
    config = one(objects, "MutatingWebhookConfiguration")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == (
        f"{NAMESPACE}/{certificate['metadata']['name']}"
    )
    assert "caBundle" not in config["webhooks"][0]["clientConfig"]
    spec = certificate["spec"]
    assert spec["secretName"] == f"{RELEASE}-pacekeeper-tls"
    assert f"{WEBHOOK}.{NAMESPACE}.svc" in spec["dnsNames"]
    assert f"{RELEASE}-pacekeeper-metrics.{NAMESPACE}.svc" in spec["dnsNames"]
    assert spec["privateKey"]["rotationPolicy"] == "Always"
    # No issuer given: a CA of the release's own, from a self-signed Issuer.
    ca = one(objects, "Certificate", "-ca")
    assert ca["spec"]["isCA"] is True
    assert spec["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer",
                                 "name": f"{RELEASE}-pacekeeper-ca"}  # fmt: skip
    assert one(objects, "Issuer", "-ca")["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    assert one(objects, "Issuer", "-selfsigned")["spec"] == {"selfSigned": {}}


def test_a_given_issuer_replaces_the_releases_own_ca() -> None:
    objects = render(FEATURES["webhook-cluster-issuer"])
    assert [o["kind"] for o in objects if o["apiVersion"] == "cert-manager.io/v1"] == [
        "Certificate"
    ]
    assert one(objects, "Certificate")["spec"]["issuerRef"] == {
        "group": "cert-manager.io", "kind": "ClusterIssuer", "name": "platform-ca"
    }  # fmt: skip


def test_an_existing_secret_is_mounted_and_its_ca_given_in_values() -> None:
    values = FEATURES["tls-existing-secret"]
    objects = render(values)
    assert not {"Secret", "Certificate", "Issuer"} & {o["kind"] for o in objects}
    (volume,) = [v for v in webhook_pod(values)["spec"]["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "platform-tls"
    entry = one(objects, "MutatingWebhookConfiguration")["webhooks"][0]
    assert entry["clientConfig"]["caBundle"] == values["tls"]["secret"]["caBundle"]
