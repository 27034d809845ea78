"""Policy documents: defaults are safe, dangerous or contradictory ones are refused with
a message naming the field, the schema and the shipped examples agree."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.core.policy import (
    ActionKind,
    Mode,
    NodeBudget,
    PolicyDocument,
    PolicyError,
    load_policy_document,
    load_policy_file,
    parse_policy_document,
    policy_json_schema,
)

EXAMPLES = sorted((Path(__file__).parents[3] / "docs" / "policies").glob("*.yaml"))


def _doc(policy: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    return {"defaultPolicy": "gpu", "policies": {"gpu": policy or {}}, **top}


def _refusal(data: dict[str, Any]) -> str:
    with pytest.raises(PolicyError) as e:
        parse_policy_document(data, "p.yaml")
    return str(e.value)


def test_empty_document_is_safe_observe_mode_with_notify_only() -> None:
    doc = load_policy_document("{}")  # an empty file is refused (issue 40); {} is every default
    assert doc.mode is Mode.OBSERVE
    assert doc.policies["default"].ladder.enabled_steps() == (ActionKind.NOTIFY,)
    assert doc.cluster.nodes.limit(1000) == 2


@pytest.mark.parametrize(
    ("policy", "top", "message"),
    [
        ({"thresholds": {"act": 1.5}}, {}, "policy 'gpu': thresholds.act=1.5 is outside [0, 1]"),
        ({"thresholds": {"recover": -0.1}}, {}, "policy 'gpu': thresholds.recover=-0.1 is outside"),
        (
            {"thresholds": {"act": 0.8, "recover": 0.8}},
            {},
            "policy 'gpu': thresholds.recover=0.8 must be above thresholds.act=0.8",
        ),
        (
            {"ladder": {"drainNode": {"enabled": True}}},
            {},
            "policy 'gpu': ladder.drainNode.enabled=true needs its prerequisite "
            "ladder.taintNode.enabled=true",
        ),
        (
            {"ladder": {"notify": {"enabled": False}, "restartRank": {"enabled": True}}},
            {},
            "ladder.restartRank.enabled=true needs its prerequisite ladder.notify.enabled=true",
        ),
        (
            {"ladder": {"taintNode": {"enabled": True}}, "budgets": {"nodes": {"maxNodes": 0}}},
            {"mode": "enforce"},
            "policy 'gpu': budgets.nodes is zero in enforce mode",
        ),
        (
            {"ladder": {"taintNode": {"enabled": True}}},
            {"mode": "enforce", "cluster": {"nodes": {"maxPercent": 0}}},
            "cluster.nodes is zero in enforce mode while policy 'gpu' enables node actions",
        ),
        (
            {"ladder": {"restartRank": {"enabled": True}}, "budgets": {"actionsPerHour": 0}},
            {"mode": "enforce"},
            "policy 'gpu': budgets.actionsPerHour=0 in enforce mode",
        ),
        ({}, {"optOuts": {"nodeSelectors": [{"matchLabels": {}}]}}, "optOuts.nodeSelectors[0]."),
        ({}, {"optOuts": {"nodes": [""]}}, "optOuts.nodes[0]='' must not be empty"),
        ({"score": {"kind": "sectionRelative"}}, {}, "policy 'gpu': score.section is required"),
        ({"score": {"kind": "gpuRelative", "section": "x"}}, {}, "score.section='x' is only"),
        ({"thresholdz": {}}, {}, "policy 'gpu': thresholdz is not a known field"),
        (
            {"persistence": {"consecutiveReports": None}},
            {},
            "policy 'gpu': persistence.consecutiveReports or belowForS must be set",
        ),
        (
            {"ladder": {"notify": {"timeoutS": 0}}},
            {},
            "ladder.notify.timeoutS=0 must be a positive",
        ),
        ({}, {"mode": "fast"}, "mode='fast'"),
        ({}, {"defaultPolicy": "nope"}, "defaultPolicy='nope' is not in policies (gpu)"),
        ({}, {"apiVersion": "v2"}, "apiVersion='v2'"),
    ],
)
def test_dangerous_or_contradictory_config_is_refused_naming_the_field(
    policy: dict[str, Any], top: dict[str, Any], message: str
) -> None:
    msg = _refusal(_doc(policy, **top))
    assert msg.startswith("p.yaml: ")
    assert message in msg


def test_zero_budget_is_allowed_outside_enforce_mode() -> None:
    doc = parse_policy_document(
        _doc({"ladder": {"taintNode": {"enabled": True}}, "budgets": {"nodes": {"maxNodes": 0}}})
    )
    assert doc.mode is Mode.OBSERVE


@settings(max_examples=60, deadline=None)
@given(
    field=st.sampled_from(["act", "recover"]),
    value=st.one_of(
        st.floats(allow_nan=False).filter(lambda v: not 0 <= v <= 1),
        st.just(math.nan),
    ),
)
def test_any_threshold_outside_the_unit_interval_is_refused_by_name(field, value) -> None:
    msg = _refusal(_doc({"thresholds": {field: value}}))
    assert f"policy 'gpu': thresholds.{field}=" in msg


@settings(max_examples=60, deadline=None)
@given(
    path=st.sampled_from(
        [
            ("persistence", "consecutiveReports"),
            ("persistence", "minSamples"),
            ("recovery", "consecutiveReports"),
            ("budgets", "actionsPerHour"),
            ("attribution", "imbalanceHistory"),
        ]
    ),
    value=st.one_of(
        st.integers(max_value=-1),
        # Strings, digits included: "3" is refused where a count belongs.
        st.text(alphabet="abcxyz 0123456789", min_size=1, max_size=5),
        st.lists(st.none()),
    ),
)
def test_bad_values_anywhere_name_their_path(path, value) -> None:
    section, key = path
    msg = _refusal(_doc({section: {key: value}}))
    assert f"policy 'gpu': {section}.{key}" in msg


@settings(max_examples=40, deadline=None)
@given(text=st.text(max_size=80))
def test_arbitrary_text_is_a_policy_error_or_a_valid_document(text) -> None:
    try:
        doc = load_policy_document(text, "fuzz.yaml")
    except PolicyError as e:
        assert str(e).startswith("fuzz.yaml: ")
    else:
        assert isinstance(doc, PolicyDocument)


def test_percent_budget_rounds_down_but_keeps_one_node() -> None:
    assert NodeBudget(max_percent=5).limit(10) == 1
    assert NodeBudget(max_percent=5).limit(100) == 5
    assert NodeBudget(max_nodes=3, max_percent=50).limit(100) == 3
    assert NodeBudget().limit(100) is None


def test_json_schema_describes_the_document_and_accepts_the_examples() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = policy_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["mode"]["default"] == "observe"
    assert "policies" in schema["properties"]
    for path in EXAMPLES:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"policies": {"x": {"thresholdz": 1}}}, schema)


def test_shipped_example_policies_validate() -> None:
    assert len(EXAMPLES) >= 3
    for path in EXAMPLES:
        doc = load_policy_file(path)
        assert doc.policies


def test_missing_file_is_a_clear_error() -> None:
    with pytest.raises(PolicyError, match=r"nope\.yaml: cannot read"):
        load_policy_file("nope.yaml")


# --- the CLI --------------------------------------------------------------------------------


def test_cli_validate_accepts_good_files_and_shows_their_policies() -> None:
    result = CliRunner().invoke(app, ["policy", "validate", *map(str, EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output and "gpuRelative" in result.output


def test_cli_validate_refuses_a_bad_file_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("defaultPolicy: gpu\npolicies:\n  gpu:\n    thresholds: {act: 1.5}\n")
    result = CliRunner().invoke(app, ["policy", "validate", str(bad)])
    assert result.exit_code == 2  # an invalid policy, as for every command
    text = " ".join(result.output.split())
    assert f"{bad}: policy 'gpu': thresholds.act=1.5 is outside [0, 1]" in text


def test_cli_validate_refuses_unparseable_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("policies: [\n")
    result = CliRunner().invoke(app, ["policy", "validate", str(bad)])
    assert result.exit_code == 2  # an invalid policy, as for every command
    assert "broken.yaml: not valid YAML" in " ".join(result.output.split())


def test_cli_schema_writes_json_schema(tmp_path: Path) -> None:
    import json

    out = tmp_path / "schema.json"
    result = CliRunner().invoke(app, ["policy", "schema", "-o", str(out)])
    assert result.exit_code == 0
    assert json.loads(out.read_text()) == json.loads(json.dumps(policy_json_schema()))


def test_cli_docs_prints_every_policy_field() -> None:
    result = CliRunner().invoke(app, ["policy", "docs"])
    assert result.exit_code == 0
    for key in ("consecutiveReports", "holdS", "maxAttempts", "matchLabels", "openS"):
        assert f"`{key}`" in result.output


def test_policy_reference_in_docs_matches_the_models() -> None:
    from pacekeeper.controller.cli.policy_docs import policy_reference

    text = (Path(__file__).parents[3] / "docs" / "policy.md").read_text()
    begin = text.index("<!-- BEGIN GENERATED: pacekeeper policy docs -->\n")
    body = text[begin:].split("\n", 1)[1]
    body = body[: body.index("<!-- END GENERATED -->")]
    assert body.strip() == policy_reference().strip(), (
        "docs/policy.md is stale: regenerate its reference with `pacekeeper policy docs`"
    )
