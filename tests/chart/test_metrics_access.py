"""metrics.access: who may read /metrics, and everything in the chart that follows from it."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from chart_cases import FEATURES
from chart_render import NAMESPACE, RELEASE, notes, one, render

from pacekeeper.controller.cli.app import app

TLS_DIR = "/var/run/secrets/pacekeeper.dev/tls"
SERVICE_HOST = f"{RELEASE}-pacekeeper-metrics.{NAMESPACE}.svc"


def container(values: dict[str, Any] | None = None) -> dict[str, Any]:
    deployment = one(render(values), "Deployment", "-pacekeeper")
    (c,) = deployment["spec"]["template"]["spec"]["containers"]
    return c


def flag(command: list[Any], name: str) -> str | None:
    words = [str(w) for w in command]
    return words[words.index(name) + 1] if name in words else None


def test_by_default_scrapes_are_authenticated_and_authorised_over_https() -> None:
    c = container()
    assert flag(c["command"], "--metrics-access") == "kubernetes"
    assert flag(c["command"], "--metrics-tls-dir") == TLS_DIR
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
    assert mount == {"name": "tls", "mountPath": TLS_DIR, "readOnly": True}
    spec = one(render(), "Deployment", "-pacekeeper")["spec"]["template"]["spec"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == f"{RELEASE}-pacekeeper-tls"
    # Only what serving needs; the CA (and nothing of the API) stays out of the pod.
    assert [i["key"] for i in volume["secret"]["items"]] == ["tls.crt", "tls.key"]
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": "metrics", "scheme": "HTTPS"}


@pytest.mark.parametrize(
    "feature", ["defaults", "metrics-open", "metrics-localhost", "metrics-off"]
)
def test_the_rendered_command_is_one_the_operator_accepts(feature: str) -> None:
    command = [str(w) for w in container(FEATURES[feature])["command"]]
    assert command[:3] == ["pacekeeper", "operator", "run"]
    group: Any = typer.main.get_command(app)
    run = group.commands["operator"].commands["run"]
    ctx = run.make_context("run", command[3:])  # parses every option, runs nothing
    assert ctx.params["metrics_access"] == (
        "localhost" if feature == "metrics-off" else flag(command, "--metrics-access")
    )


def test_the_controller_may_review_tokens_and_access_and_nothing_more() -> None:
    objects = render()
    role = one(objects, "ClusterRole", "-metrics-auth")
    assert role["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
         "verbs": ["create"]},
    ]  # fmt: skip
    binding = one(objects, "ClusterRoleBinding", "-metrics-auth")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"{RELEASE}-pacekeeper", "namespace": NAMESPACE}
    ]


def test_scrapers_get_the_reader_role_which_grants_get_on_metrics_only() -> None:
    objects = render(FEATURES["metrics-scrapers"])
    reader = one(objects, "ClusterRole", "-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    binding = one(objects, "ClusterRoleBinding", "-metrics-reader")
    assert binding["roleRef"]["name"] == reader["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    ]
    # Without scrapers the role exists (bind it yourself) but nobody holds it.
    assert not [o for o in render() if o["metadata"]["name"].endswith("-metrics-reader")
                and o["kind"] == "ClusterRoleBinding"]  # fmt: skip


def test_the_service_monitor_scrapes_https_verifying_the_chart_ca_with_a_token() -> None:
    objects = render(FEATURES["metrics-scrapers"])
    (endpoint,) = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "serverName": SERVICE_HOST,
        "ca": {"secret": {"name": f"{RELEASE}-pacekeeper-tls", "key": "ca.crt"}},
    }
    assert "insecureSkipVerify" not in endpoint["tlsConfig"]
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    (token_endpoint,) = one(render(FEATURES["service-monitor-token-secret"]), "ServiceMonitor")[
        "spec"
    ]["endpoints"]
    assert token_endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": "prometheus-scrape-token", "key": "token"},
    }
    assert "bearerTokenFile" not in token_endpoint


def test_open_serves_plain_http_without_any_auth_object() -> None:
    objects = render(FEATURES["metrics-open"])
    c = container(FEATURES["metrics-open"])
    assert flag(c["command"], "--metrics-access") == "open"
    assert flag(c["command"], "--metrics-tls-dir") is None
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    names = {o["metadata"]["name"] for o in objects}
    assert (
        not {f"{RELEASE}-pacekeeper-{n}" for n in ("metrics-auth", "metrics-reader", "tls")} & names
    )
    (endpoint,) = one(render({"metrics": {"access": "open", "serviceMonitor": {"enabled": True}}}),
                      "ServiceMonitor")["spec"]["endpoints"]  # fmt: skip
    assert not {"scheme", "tlsConfig", "bearerTokenFile", "authorization"} & set(endpoint)


def test_localhost_binds_inside_the_pod_and_nothing_points_at_it() -> None:
    objects = render(FEATURES["metrics-localhost"])
    c = container(FEATURES["metrics-localhost"])
    assert flag(c["command"], "--metrics-access") == "localhost"
    assert flag(c["command"], "--metrics-port") == "8080"
    # The kubelet cannot reach 127.0.0.1 in the pod: no probes, no port, no Service.
    assert not {"ports", "livenessProbe", "readinessProbe"} & set(c)
    assert not {"Service", "ServiceMonitor", "Pod", "Secret"} & {o["kind"] for o in objects}


def test_the_helm_test_refuses_no_token_and_reads_with_the_reader_role() -> None:
    objects = render()
    pod = one(objects, "Pod")
    spec = pod["spec"]
    account = one(objects, "ServiceAccount", "-test-metrics")
    binding = one(objects, "ClusterRoleBinding", "-test-metrics")
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    assert binding["roleRef"]["name"] == f"{RELEASE}-pacekeeper-metrics-reader"
    for hook in (account, binding):  # there only while the test runs
        assert hook["metadata"]["annotations"]["helm.sh/hook"] == "test"
        assert int(hook["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0
    (scrape,) = spec["containers"]
    script = scrape["command"][-1]
    assert scrape["command"][:2] == ["python", "-c"]
    assert f'"https://{SERVICE_HOST}:8080/metrics"' in script
    assert "status == 401" in script and "status == 200" in script
    assert 'cafile="/etc/pacekeeper-ca/ca.crt"' in script
    (ca,) = [v for v in spec["volumes"] if v["name"] == "ca"]
    assert ca["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    compile(script, "metrics-test", "exec")  # what the pod runs is valid Python


def test_the_network_policy_still_guards_the_port_in_front_of_the_token_check() -> None:
    policy = one(render(FEATURES["metrics-network-policy"]), "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": "metrics", "protocol": "TCP"}]


def test_notes_say_who_may_scrape_and_warn_when_nobody_checks() -> None:
    assert "No reader yet" in notes() and f"{RELEASE}-pacekeeper-metrics-reader" in notes()
    assert "Readers: monitoring/prometheus-k8s" in notes(FEATURES["metrics-scrapers"])
    assert "WARNING: /metrics is plain HTTP" in notes(FEATURES["metrics-open"])
    guarded = {"metrics": {"access": "open", "networkPolicy": {"enabled": True}}}
    assert "no NetworkPolicy guards it" not in notes(guarded)
    assert "WARNING: /metrics" not in notes() + notes(FEATURES["metrics-localhost"])
