"""The per-job dashboard panels and the invalid-policy alert read metrics the
controller exports, under labels that survive a Prometheus scrape."""

from __future__ import annotations

import json
import re
from typing import Any

from chart_cases import FEATURES
from chart_render import NAMESPACE, one, render


def _dashboard() -> dict[str, Any]:
    (cm,) = [
        o
        for o in render(FEATURES["grafana-dashboard"])
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")
    ]
    return dict(json.loads(cm["data"]["pacekeeper.json"]))


def test_dashboard_has_a_job_variable_and_per_job_panels_filtered_by_it() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    job = variables["job"]
    assert "job_key" in job["definition"] and job["includeAll"] and job["multi"]
    per_job = [
        p for p in dashboard["panels"] if any("pacekeeper_job_" in t["expr"] for t in p["targets"])
    ]
    names = {
        n
        for p in per_job
        for t in p["targets"]
        for n in re.findall(r"pacekeeper_job_[a-z_]+", t["expr"])
    }
    assert {
        "pacekeeper_job_worst_score",
        "pacekeeper_job_ranks_below_act",
        "pacekeeper_job_actions_total",
    } <= names
    assert all('job_key=~"$job"' in t["expr"] for p in per_job for t in p["targets"])
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_per_job_label_is_not_the_scrape_targets_job_label() -> None:
    from pacekeeper.controller.runtime.metrics import ControllerMetrics

    m = ControllerMetrics()
    m.jobs.observe("ml/llm", report_id=1, score=lambda: (0.5, 1, 0.7))
    labels = {
        key
        for family in m.registry.collect()
        if family.name.startswith("pacekeeper_job_")
        for sample in family.samples
        for key in sample.labels
    }
    assert "job_key" in labels and "job" not in labels and "namespace" not in labels


def test_invalid_policy_alert_reads_the_policy_valid_gauge() -> None:
    rule = one(render(FEATURES["prometheus-rule"]), "PrometheusRule")
    rules = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    alert = rules["PacekeeperPolicyInvalid"]
    assert alert["expr"] == f'min(pacekeeper_policy_valid{{namespace="{NAMESPACE}"}}) == 0'
    assert alert["for"] == "5m" and alert["labels"]["severity"] == "warning"


def test_policy_valid_gauge_is_what_the_controller_serves() -> None:
    from prometheus_client import CollectorRegistry

    from pacekeeper.controller.runtime.policy_wait import policy_valid_gauge

    registry = CollectorRegistry()
    policy_valid_gauge(registry).set(0)
    assert registry.get_sample_value("pacekeeper_policy_valid") == 0
