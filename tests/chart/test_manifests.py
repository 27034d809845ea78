"""Every feature renders, lints strictly, and every object matches its schema."""

from __future__ import annotations

import copy

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
from chart_cases import FEATURES, merged
from chart_render import (
    CHART_DIR,
    KUBE_VERSION,
    install_dry_run,
    is_builtin,
    one,
    render,
    validate,
)


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_every_rendered_object_matches_its_schema(feature: str) -> None:
    objects = render(FEATURES[feature])
    assert objects
    for obj in objects:
        validate(obj)


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_lint_passes_strictly(feature: str) -> None:
    report = helm.lint(CHART_DIR, FEATURES[feature], strict=True, kube_version=f"v{KUBE_VERSION}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == [] and report["errors"] == []


def test_monitoring_objects_are_checked_against_their_crd_schema() -> None:
    objects = render(merged(FEATURES["service-monitor"], FEATURES["prometheus-rule"]))
    custom = [o for o in objects if not is_builtin(o)]
    assert sorted(o["kind"] for o in custom) == ["PrometheusRule", "ServiceMonitor"]


def test_schema_check_catches_a_misspelt_field() -> None:
    # Proves the validators above are strict, not permissive.
    objects = render(merged(FEATURES["service-monitor"], FEATURES["prometheus-rule"]))
    monitor = copy.deepcopy(one(objects, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["intreval"] = "30s"
    with pytest.raises(jsonschema.ValidationError, match="intreval"):
        validate(monitor)
    deployment = copy.deepcopy(one(render(), "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment)


def test_client_dry_run_install_renders_the_release() -> None:
    release = install_dry_run()
    assert release["status"] == "pending-install"
    assert "kind: Deployment" in release["manifest"]
    assert "MODE: observe" in release["notes"]
