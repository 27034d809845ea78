"""The policy ConfigMap holds a document the controller's own loader accepts."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from chart_cases import FEATURES
from chart_render import one, render

from pacekeeper.controller.core.policy import (
    API_VERSION,
    KIND,
    ActionKind,
    Mode,
    PolicyDocument,
    load_policy_document,
)


def rendered_document(values: dict[str, Any] | None) -> tuple[str, PolicyDocument]:
    config_map = one(render(values), "ConfigMap", "-policy")
    text = config_map["data"]["policy.yaml"]
    return text, load_policy_document(text, "ConfigMap policy.yaml")


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_rendered_policy_passes_the_controller_validation(feature: str) -> None:
    text, document = rendered_document(FEATURES[feature])
    header = yaml.safe_load(text)
    assert (header["apiVersion"], header["kind"]) == (API_VERSION, KIND)
    assert document.mode is Mode(FEATURES[feature].get("mode", "observe"))


def test_default_policy_is_observe_and_notify_only() -> None:
    _, document = rendered_document(None)
    assert document.mode is Mode.OBSERVE
    assert document == PolicyDocument()
    _, policy = document.policy_for(None) or ("", None)
    assert policy is not None
    assert policy.ladder.enabled_steps() == (ActionKind.NOTIFY,)


def test_custom_policy_values_arrive_unchanged() -> None:
    _, document = rendered_document(FEATURES["custom-policy"])
    name, policy = document.policy_for(None) or ("", None)
    assert name == "gpu" and policy is not None
    assert (policy.thresholds.act, policy.thresholds.recover) == (0.6, 0.8)
    assert policy.ladder.enabled_steps() == (
        ActionKind.NOTIFY,
        ActionKind.TAINT_NODE,
        ActionKind.CORDON_NODE,
    )
    assert policy.budgets.nodes.max_nodes == 2
    assert document.cluster.nodes.max_percent == 5
