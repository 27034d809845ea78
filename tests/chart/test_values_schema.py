"""values.schema.json: generated, current, and refusing bad values at install time."""

from __future__ import annotations

import importlib.util
import json
import sys
from types import ModuleType
from typing import Any

import helm_python as helm
import pytest
import yaml
from chart_cases import FEATURES, actions, ladder
from chart_render import CHART_DIR, install_dry_run, render
from pydantic import ValidationError


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pacekeeper_chart_values_schema", CHART_DIR / "values_schema.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the models' annotations through it
    spec.loader.exec_module(module)
    return module


generator = _load_generator()
DEFAULTS: dict[str, Any] = yaml.safe_load((CHART_DIR / "values.yaml").read_text())


def enforce_with_ladder(step: str) -> dict[str, Any]:
    return {
        "mode": "enforce",
        "policy": {"policies": {"default": {"ladder": ladder("notify", "taintNode", step)}}},
        "actions": actions("notify", "taintNode"),
    }


# (values, text the error must contain): each names the offending key and value.
BAD_VALUES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "unknown-mode": ({"mode": "yolo"}, ["/mode", "'observe', 'dry-run', 'enforce'"]),
    "threshold-above-one": (
        {"policy": {"policies": {"default": {"thresholds": {"act": 1.5}}}}},
        ["/policy/policies/default/thresholds/act", "1.5"],
    ),
    "negative-job-budget": (
        {"policy": {"policies": {"default": {"budgets": {"actionsPerHour": -1}}}}},
        ["/policy/policies/default/budgets/actionsPerHour", "-1"],
    ),
    "negative-node-budget": (
        {"policy": {"cluster": {"nodes": {"maxNodes": -2}}}},
        ["/policy/cluster/nodes/maxNodes", "-2"],
    ),
    "unknown-policy-field": (
        {"policy": {"policies": {"default": {"treshold": {}}}}},
        ["/policy/policies/default", "treshold"],
    ),
    "mode-inside-policy": ({"policy": {"mode": "enforce"}}, ["/policy", "mode"]),
    "unknown-top-level-key": ({"contoller": {}}, ["contoller"]),
    "zero-replicas": ({"controller": {"replicas": 0}}, ["/controller/replicas", "got 0"]),
    "replicas-without-leader-election": (
        {"controller": {"replicas": 3, "leaderElection": {"enabled": False}}},
        ["/controller/leaderElection/enabled"],
    ),
    "bad-log-format": (
        {"controller": {"logging": {"format": "xml"}}},
        ["/controller/logging/format", "'json', 'text'"],
    ),
    "service-monitor-without-metrics": (
        {"metrics": {"enabled": False, "serviceMonitor": {"enabled": True}}},
        ["/metrics/serviceMonitor/enabled"],
    ),
    "network-policy-without-metrics": (
        {"metrics": {"enabled": False, "networkPolicy": {"enabled": True}}},
        ["/metrics/networkPolicy/enabled"],
    ),
    "privileged-metrics-port": ({"metrics": {"port": 80}}, ["/metrics/port", "got 80"]),
    "negative-pdb": (
        {"podDisruptionBudget": {"minAvailable": -1}},
        ["/podDisruptionBudget/minAvailable", "got -1"],
    ),
    "existing-service-account-without-name": (
        {"serviceAccount": {"create": False}},
        ["/serviceAccount/name"],
    ),
    "reporter-rbac-without-bindings": (
        {"reporterRbac": {"enabled": True}},
        ["/reporterRbac/bindings"],
    ),
    "reporter-namespace-not-a-dns-label": (
        {
            "reporterRbac": {
                "enabled": True,
                "bindings": [{"namespace": "Team_A", "serviceAccount": "sa"}],
            }
        },
        ["/reporterRbac/bindings/0/namespace", "Team_A"],
    ),
    "reporter-binding-without-service-account": (
        {"reporterRbac": {"enabled": True, "bindings": [{"namespace": "team-a"}]}},
        ["/reporterRbac/bindings/0", "serviceAccount"],
    ),
    "reporter-binding-from-the-old-chart": (
        {"reporterRbac": {"enabled": True, "namespaces": ["team-a"]}},
        ["/reporterRbac", "namespaces"],
    ),
    "bad-cpu-quantity": (
        {"controller": {"resources": {"requests": {"cpu": "lots"}}}},
        ["/controller/resources/requests/cpu", "lots"],
    ),
    "enforced-step-without-its-action": (
        enforce_with_ladder("cordonNode"),
        ["/policy/policies/default/ladder/cordonNode/enabled"],
    ),
    "drain-without-taint": (
        {"policy": {"policies": {"default": {"ladder": {"drainNode": {"enabled": True}}}}}},
        ["/policy/policies/default/ladder", "taintNode"],
    ),
    "taint-with-notify-off": (
        {"policy": {"policies": {"default": {"ladder": ladder("taintNode")}}}},
        ["/policy/policies/default/ladder/notify/enabled"],
    ),
    "section-score-without-section": (
        {"policy": {"policies": {"default": {"score": {"kind": "sectionRelative"}}}}},
        ["/policy/policies/default/score", "section"],
    ),
    "section-with-a-gpu-score": (
        {"policy": {"policies": {"default": {"score": {"section": "forward"}}}}},
        ["/policy/policies/default/score/section"],
    ),
    "opt-out-with-empty-match-labels": (
        {"policy": {"optOuts": {"nodeSelectors": [{"matchLabels": {}}]}}},
        ["/policy/optOuts/nodeSelectors/0/matchLabels", "minProperties"],
    ),
    "policies-without-the-default-one": (
        {"policy": {"policies": {"gpu": {}}}},
        ["/policy/policies", "'default'"],
    ),
    "unknown-metrics-access": (
        {"metrics": {"access": "anyone"}},
        ["/metrics/access", "'kubernetes', 'localhost', 'open'"],
    ),
    "service-monitor-on-localhost": (
        {"metrics": {"access": "localhost", "serviceMonitor": {"enabled": True}}},
        ["/metrics/serviceMonitor/enabled"],
    ),
    "scrapers-without-authentication": (
        {
            "metrics": {
                "access": "open",
                "scrapers": [{"namespace": "monitoring", "serviceAccount": "prom"}],
            }
        },
        ["/metrics/scrapers", "maxItems"],
    ),
    "scraper-without-namespace": (
        {"metrics": {"scrapers": [{"serviceAccount": "prom"}]}},
        ["/metrics/scrapers/0", "namespace"],
    ),
    "unknown-tls-source": (
        {"tls": {"source": "vault"}},
        ["/tls/source", "'helm', 'certManager', 'secret'"],
    ),
    "tls-secret-without-name": ({"tls": {"source": "secret"}}, ["/tls/secret/name"]),
    "webhook-secret-without-ca-bundle": (
        {"webhook": {"enabled": True}, "tls": {"source": "secret", "secret": {"name": "t"}}},
        ["/tls/secret/caBundle"],
    ),
    "ca-bundle-not-base64": (
        {"tls": {"secret": {"caBundle": "-----BEGIN CERTIFICATE-----"}}},
        ["/tls/secret/caBundle"],
    ),
    "helm-certificate-too-short": (
        {"tls": {"helm": {"validityDays": 7}}},
        ["/tls/helm/validityDays", "got 7"],
    ),
    "renewal-window-too-long": (
        {"tls": {"helm": {"renewBeforeDays": 400}}},
        ["/tls/helm/renewBeforeDays", "got 400"],
    ),
    "cert-manager-duration-not-go": (
        {"tls": {"certManager": {"duration": "90 days"}}},
        ["/tls/certManager/duration", "90 days"],
    ),
    "issuer-of-an-unknown-kind": (
        {"tls": {"certManager": {"issuerRef": {"kind": "Vault", "name": "v"}}}},
        ["/tls/certManager/issuerRef/kind", "'Issuer', 'ClusterIssuer'"],
    ),
    "webhook-failure-policy": (
        {"webhook": {"failurePolicy": "Retry"}},
        ["/webhook/failurePolicy", "'Ignore', 'Fail'"],
    ),
    "webhook-timeout-too-long": (
        {"webhook": {"timeoutSeconds": 60}},
        ["/webhook/timeoutSeconds", "got 60"],
    ),
    "webhook-selector-operator": (
        {"webhook": {"objectSelector": {"matchExpressions": [{"key": "a", "operator": "Is"}]}}},
        ["/webhook/objectSelector/matchExpressions/0/operator", "'In', 'NotIn'"],
    ),
    "webhook-no-replicas": ({"webhook": {"replicas": 0}}, ["/webhook/replicas", "got 0"]),
    "no-policies": (
        {"policy": {"policies": {}, "defaultPolicy": "gpu"}},
        ["/policy/policies", "minProperties"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_fail_at_install_naming_the_value(case: str) -> None:
    values, expected = BAD_VALUES[case]
    with pytest.raises(helm.HelmError) as caught:
        install_dry_run(values)
    message = str(caught.value)
    for text in expected:
        assert text in message, message
    # `helm template` refuses them the same way.
    with pytest.raises(helm.HelmValuesError, match=expected[0]):
        render(values)


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_pydantic_models_refuse_what_the_schema_refuses(case: str) -> None:
    values, _ = BAD_VALUES[case]
    helm_values = helm.Chart.load(CHART_DIR).merge_values(values)
    with pytest.raises(ValidationError):
        generator.ChartValues.model_validate(helm_values)


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_pydantic_models_accept_every_feature(feature: str) -> None:
    helm_values = helm.Chart.load(CHART_DIR).merge_values(FEATURES[feature])
    values = generator.ChartValues.model_validate(helm_values)
    assert values.policy_document().mode.value == values.mode


def test_enforced_step_is_allowed_once_its_action_is_enabled() -> None:
    values = enforce_with_ladder("cordonNode")
    values["actions"]["cordonNode"] = {"enabled": True}
    assert render(values)
    # Observe and dry-run may rehearse any ladder: nothing is applied.
    assert render({**enforce_with_ladder("cordonNode"), "mode": "dry-run"})


def test_committed_schema_matches_the_models() -> None:
    committed = (CHART_DIR / "values.schema.json").read_text()
    assert committed == generator.render_schema(), (
        "values.schema.json is stale: run python charts/pacekeeper/values_schema.py"
    )
    assert generator.main(["--check"]) == 0


def test_check_mode_fails_on_drift(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "values.schema.json"
    stale.write_text(json.dumps({"type": "object"}))
    monkeypatch.setattr(generator, "SCHEMA_PATH", stale)
    assert generator.main(["--check"]) == 1
    assert generator.main([]) == 0
    assert stale.read_text() == generator.render_schema()


def test_schema_embeds_the_controller_policy_schema() -> None:
    from pacekeeper.controller.core.policy import policy_json_schema

    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    policy = schema["properties"]["policy"]
    expected = set(policy_json_schema()["properties"]) - {"apiVersion", "kind", "mode"}
    assert set(policy["properties"]) == expected
    assert policy["additionalProperties"] is False


def test_every_values_key_is_documented() -> None:
    comments = generator.value_comments((CHART_DIR / "values.yaml").read_text())

    def leaves(node: dict[str, Any], path: tuple[str, ...]) -> list[tuple[str, ...]]:
        out = []
        for key, value in node.items():
            here = (*path, key)
            if here in comments:
                continue
            if isinstance(value, dict) and value and here[0] != "policy":
                out += leaves(value, here)
            else:
                out.append(here)
        return out

    assert leaves(DEFAULTS, ()) == []


def test_schema_descriptions_come_from_values_comments() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    mode = schema["properties"]["mode"]
    assert mode["enum"] == ["observe", "dry-run", "enforce"]
    assert "observe | dry-run | enforce" in mode["description"]
    drain = schema["properties"]["actions"]["properties"]["drainNode"]["properties"]["enabled"]
    notify = schema["properties"]["actions"]["properties"]["notify"]["properties"]["enabled"]
    assert "pods/eviction" in drain["description"] and "Events" in notify["description"]


def test_defaults_are_safe() -> None:
    assert DEFAULTS["mode"] == "observe"
    assert [a for a, t in DEFAULTS["actions"].items() if t["enabled"]] == ["notify"]
    generator.ChartValues.model_validate(DEFAULTS)
