"""Metrics Service, ServiceMonitor, PrometheusRule and the helm test hook."""

from __future__ import annotations

from chart_cases import FEATURES
from chart_render import NAMESPACE, RELEASE, one, render


def test_metrics_service_selects_the_controller_port() -> None:
    objects = render()
    service = one(objects, "Service")
    pod = one(objects, "Deployment")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p for p in pod["spec"]["containers"][0]["ports"]}
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    assert ports["metrics"]["containerPort"] == 8080


def test_service_monitor_selects_the_metrics_service() -> None:
    objects = render(FEATURES["service-monitor"])
    monitor = one(objects, "ServiceMonitor")
    service = one(objects, "Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    assert monitor["metadata"]["labels"]["p"] == "k"


def test_prometheus_rule_alerts_on_metrics_the_controller_exports() -> None:
    rule = one(render(FEATURES["prometheus-rule"]), "PrometheusRule")
    exprs = {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert f'job="{RELEASE}-pacekeeper-metrics"' in exprs["PacekeeperControllerDown"]
    # Names from pacekeeper.controller.runtime.metrics (counters gain _total when exported).
    assert "pacekeeper_actions_total" in exprs["PacekeeperActionsFailing"]
    assert "pacekeeper_breaker_open" in exprs["PacekeeperBreakerOpen"]
    assert "pacekeeper_leader" in exprs["PacekeeperNoLeader"]
    assert "pacekeeper_queue_longest_wait_seconds" in exprs["PacekeeperFallingBehind"]
    annotations = [r["annotations"]["summary"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert any("{{ $labels.action }}" in a for a in annotations)


def test_metric_names_in_rules_exist_in_the_controller() -> None:
    from pacekeeper.controller.runtime.metrics import ControllerMetrics

    exported = {
        sample.name
        for family in ControllerMetrics().registry.collect()
        for sample in family.samples
    } | {family.name for family in ControllerMetrics().registry.collect()}
    for name in ("pacekeeper_actions_total", "pacekeeper_breaker_open", "pacekeeper_leader"):
        assert name in exported or name.removesuffix("_total") in exported, name


def test_metrics_off_removes_service_monitoring_and_test_hook() -> None:
    objects = render(FEATURES["metrics-off"])
    assert not [o for o in objects if o["kind"] in ("Service", "ServiceMonitor", "Pod")]
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "ports" not in container and "livenessProbe" not in container


def test_no_leader_alert_only_with_leader_election() -> None:
    values = {"metrics": {"prometheusRule": {"enabled": True}}}
    values_off = values | FEATURES["no-leader-election"]
    alerts = [
        r["alert"]
        for g in one(render(values_off), "PrometheusRule")["spec"]["groups"]
        for r in g["rules"]
    ]
    assert "PacekeeperNoLeader" not in alerts


def test_helm_test_hook_scrapes_the_metrics_service() -> None:
    # With access=open (kubernetes, the default: tests/chart/test_metrics_access.py).
    pod = one(render(FEATURES["metrics-open"]), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["command"][-1]
    assert f"http://{RELEASE}-pacekeeper-metrics.{NAMESPACE}.svc:8080/metrics" in script
    assert "pacekeeper_leader" in script
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_network_policy_admits_only_scrapes_of_the_metrics_port() -> None:
    objects = render(FEATURES["metrics-network-policy"])
    policy = one(objects, "NetworkPolicy")
    pod = one(objects, "Deployment")["spec"]["template"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]  # egress to the API stays open
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    assert rule["from"] == [{"podSelector": {}}]  # default: the release namespace only
    assert "NetworkPolicy" not in [o["kind"] for o in render()]


def test_network_policy_peers_come_from_values() -> None:
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    values = {"metrics": {"networkPolicy": {"enabled": True, "from": [peer]}}}
    (rule,) = one(render(values), "NetworkPolicy")["spec"]["ingress"]
    assert rule["from"] == [peer]


def test_grafana_dashboard_reads_only_metrics_the_controller_exports() -> None:
    import json
    import re

    from pacekeeper.controller.runtime.metrics import ControllerMetrics

    assert not [
        o for o in render() if o["kind"] == "ConfigMap" and "dashboard" in o["metadata"]["name"]
    ]
    (cm,) = [
        o
        for o in render(FEATURES["grafana-dashboard"])
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")
    ]
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"  # the sidecar's default
    dashboard = json.loads(cm["data"]["pacekeeper.json"])
    assert dashboard["uid"] == "pacekeeper-controller"
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"pacekeeper_[a-z_]+", e)}
    registry = ControllerMetrics().registry
    exported = {s.name for family in registry.collect() for s in family.samples}
    # Histogram series appear once observed; their names follow from the family's.
    exported |= {
        f"{family.name}{suffix}"
        for family in registry.collect()
        if family.type == "histogram"
        for suffix in ("_bucket", "_sum", "_count")
    }
    exported |= {f"{f.name}_total" for f in registry.collect() if f.type == "counter"}
    exported |= {f.name for f in registry.collect() if f.type == "gauge"}
    assert used and used <= exported, used - exported
    # Every panel reads the templated data source and namespace.
    assert all('namespace=~"$namespace"' in e for e in exprs)
    assert {p["datasource"]["uid"] for p in dashboard["panels"]} == {"${datasource}"}
