"""Refusals a person can act on: every problem at once, one a line, each naming file,
policy and field; a guess for a mistyped field; plain words instead of pydantic's; and
every cross-field rule saying why, in ``policy validate`` and ``--helm-values`` alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app
from pacekeeper.controller.cli.helm_values import check_helm_values, default_chart_dir
from pacekeeper.controller.core.policy import PolicyError, parse_policy_document

SRC = "p.yaml"


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(PolicyError) as e:
        parse_policy_document(data, SRC)
    lines = str(e.value).splitlines()
    assert lines == e.value.problems
    assert all(line.startswith(f"{SRC}: ") for line in lines), lines
    return [line.removeprefix(f"{SRC}: ") for line in lines]


def _gpu(policy: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"defaultPolicy": "gpu", "policies": {"gpu": policy}, **top}


# --- all at once, one a line -----------------------------------------------------------


def test_every_field_problem_is_reported_on_its_own_line_none_cut_off() -> None:
    bad = {f"p{i}": {"thresholds": {"act": 2.0 + i}} for i in range(8)}
    problems = _problems({"defaultPolicy": "p0", "policies": bad})
    assert problems == [
        f"policy 'p{i}': thresholds.act={2.0 + i} is outside [0, 1]" for i in range(8)
    ]


def test_every_broken_prerequisite_of_one_ladder_is_reported() -> None:
    ladder = {
        "notify": {"enabled": False},
        "restartRank": {"enabled": True},
        "taintNode": {"enabled": True},
    }
    problems = _problems(_gpu({"ladder": ladder}))
    assert [p.split(" needs ")[0] for p in problems] == [
        "policy 'gpu': ladder.restartRank.enabled=true",
        "policy 'gpu': ladder.taintNode.enabled=true",
    ]


def test_every_zero_budget_and_unaccepted_risk_of_the_document_is_reported() -> None:
    acting = {"ladder": {"restartRank": {"enabled": True}}, "budgets": {"actionsPerHour": 0}}
    doc = {
        "mode": "enforce",
        "defaultPolicy": "a",
        "policies": {"a": acting, "b": acting},
        "cluster": {"breaker": {"maxActions": 6000}},
    }
    problems = _problems(doc)
    assert problems[0].startswith("policy 'a': budgets.actionsPerHour=0 in enforce mode")
    assert problems[1].startswith("policy 'b': budgets.actionsPerHour=0 in enforce mode")
    assert problems[2].startswith("cluster.breaker.maxActions=6000 can never trip")
    assert len(problems) == 3


def test_a_missing_default_policy_is_reported_beside_field_problems() -> None:
    doc = {"defaultPolicy": "gpuu", "policies": {"gpu": {"thresholds": {"act": 1.5}}}}
    problems = _problems(doc)
    assert problems[0] == "policy 'gpu': thresholds.act=1.5 is outside [0, 1]"
    assert problems[1].startswith("defaultPolicy='gpuu' is not in policies (gpu): jobs without")
    assert problems[1].endswith("; did you mean 'gpu'?")


def test_validate_prints_each_problem_on_its_own_line_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        yaml.safe_dump(_gpu({"thresholds": {"act": 1.5}, "budgets": {"actionsPerHour": -1}}))
    )
    result = CliRunner().invoke(app, ["policy", "validate", str(path)], terminal_width=400)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("invalid ")]
    assert lines == [
        f"invalid {path}: policy 'gpu': thresholds.act=1.5 is outside [0, 1]",
        f"invalid {path}: policy 'gpu': budgets.actionsPerHour=-1 must be ≥ 0 "
        "(null means unlimited)",
    ]
    assert ";" not in "".join(lines)


# --- did you mean ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            _gpu({"thresholds": {"recovr": 0.9}}),
            "policy 'gpu': thresholds.recovr is not a known field; did you mean 'recover'?",
        ),
        (
            _gpu({"persistence": {"ConsecutiveReport": 2}}),
            "policy 'gpu': persistence.ConsecutiveReport is not a known field; "
            "did you mean 'consecutiveReports'?",
        ),
        (
            _gpu({"ladder": {"taintNode": {"enabled": True, "efect": "NoSchedule"}}}),
            "policy 'gpu': ladder.taintNode.efect is not a known field; did you mean 'effect'?",
        ),
        (
            {"polices": {}},
            "polices is not a known field; did you mean 'policies'?",
        ),
        (
            {"cluster": {"breaker": {"maxActionz": 3}}},
            "cluster.breaker.maxActionz is not a known field; did you mean 'maxActions'?",
        ),
    ],
)
def test_an_unknown_field_gets_the_closest_known_one(data: dict[str, Any], expected: str) -> None:
    assert expected in _problems(data)


def test_an_unknown_field_with_nothing_close_lists_the_known_ones() -> None:
    problems = _problems(_gpu({"thresholds": {"zzz": 1}}))
    assert problems == ["policy 'gpu': thresholds.zzz is not a known field (known: act, recover)"]


def test_a_mistyped_choice_names_the_choices_and_the_closest() -> None:
    problems = _problems(_gpu({}, mode="enforc"))
    assert problems == [
        "mode='enforc' must be one of observe, dry-run, enforce; did you mean 'enforce'?"
    ]


# --- plain words -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "top", "expected"),
    [
        (
            {"budgets": {"actionsPerHour": -1}},
            {},
            "policy 'gpu': budgets.actionsPerHour=-1 must be ≥ 0 (null means unlimited)",
        ),
        (
            {"persistence": {"consecutiveReports": 0}},
            {},
            "policy 'gpu': persistence.consecutiveReports=0 must be ≥ 1 (null means not used)",
        ),
        (
            {"ladder": {"notify": {"maxAttempts": 11}}},
            {},
            "policy 'gpu': ladder.notify.maxAttempts=11 is outside [1, 10]",
        ),
        (
            {"score": {"minDeviations": 200}},
            {},
            "policy 'gpu': score.minDeviations=200 is outside [0, 100] (null means no such test)",
        ),
        (
            {},
            {"cluster": {"nodes": {"maxNodes": -2}}},
            "cluster.nodes.maxNodes=-2 must be ≥ 0 (null means no count limit)",
        ),
        (
            {"ladder": {"notify": []}},
            {},
            "policy 'gpu': ladder.notify must be a mapping, not a list",
        ),
        (
            {"thresholds": {"act": None}},
            {},
            "policy 'gpu': thresholds.act must be a number, not null",
        ),
    ],
)
def test_bounds_and_types_are_said_in_plain_words(
    policy: dict[str, Any], top: dict[str, Any], expected: str
) -> None:
    assert _problems(_gpu(policy, **top)) == [expected]


COUNTS = [
    ("persistence", "consecutiveReports"),
    ("persistence", "minSamples"),
    ("recovery", "consecutiveReports"),
    ("budgets", "actionsPerHour"),
    ("attribution", "imbalanceHistory"),
    ("ladder", "notify"),
]


@settings(max_examples=80, deadline=None)
@given(
    where=st.sampled_from(COUNTS),
    value=st.one_of(
        st.integers(max_value=-1),
        st.integers(min_value=65),
        st.text(max_size=4),
        st.floats(allow_nan=False),
        st.lists(st.integers(), max_size=2),
        st.none(),
    ),
)
def test_no_refusal_speaks_pydantic(where: tuple[str, str], value: Any) -> None:
    section, key = where
    try:
        parse_policy_document(_gpu({section: {key: value}}), SRC)
    except PolicyError as e:
        assert "Input should" not in str(e), str(e)
        assert f"policy 'gpu': {section}.{key}" in str(e)


# --- cross-field rules say why ---------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (_gpu({"thresholds": {"act": 0.9, "recover": 0.8}}), "marking and unmarking the node"),
        (_gpu({"persistence": {"consecutiveReports": None}}), "nothing says how long"),
        (_gpu({"score": {"kind": "sectionRelative"}}), "names the section"),
        (_gpu({"score": {"kind": "gpuRelative", "section": "x"}}), "silently ignored"),
        (
            _gpu({"ladder": {"notify": {"enabled": False}, "restartRank": {"enabled": True}}}),
            "announced first",
        ),
        (
            _gpu({"attribution": {"imbalanceHistory": 3, "imbalanceMinDistinct": 4}}),
            "ever count as imbalanced",
        ),
        (
            _gpu({}, hardwareMemory={"halfLifeS": 100.0, "maxAgeS": 10.0}),
            "forgotten before",
        ),
        ({"defaultPolicy": "x", "policies": {"gpu": {}}}, "would have no policy"),
    ],
)
def test_every_cross_field_rule_says_why(data: dict[str, Any], why: str) -> None:
    (problem,) = _problems(data)
    assert why in problem, problem


def test_drain_without_taint_says_replacements_land_back_on_the_node() -> None:
    ladder = {"drainNode": {"enabled": True}}
    (problem,) = _problems(_gpu({"ladder": ladder}))
    assert problem == (
        "policy 'gpu': ladder.drainNode.enabled=true needs its prerequisite "
        "ladder.taintNode.enabled=true: without our taint the drained pods' replacements are "
        "scheduled right back onto the suspect node"
    )


# --- --helm-values ---------------------------------------------------------------------

CHART = default_chart_dir()
needs_chart = pytest.mark.skipif(CHART is None, reason="no chart beside this checkout")


def _helm_errors(tmp_path: Path, values: dict[str, Any]) -> list[str]:
    pytest.importorskip("jsonschema")
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    check = check_helm_values(path, CHART)
    return [e.removeprefix(f"{path}: ") for e in check.errors]


@needs_chart
@pytest.mark.parametrize(
    ("values", "why"),
    [
        (
            {"controller": {"replicas": 2, "leaderElection": {"enabled": False}}},
            "two active controllers would act twice",
        ),
        (
            {
                "mode": "enforce",
                "actions": {"taintNode": {"enabled": False}},
                "policy": {"policies": {"default": {"ladder": {"taintNode": {"enabled": True}}}}},
            },
            "ladder.taintNode.enabled=true in enforce mode needs actions.taintNode.enabled=true: "
            "without it the chart grants the controller no RBAC",
        ),
        (
            {"serviceAccount": {"create": False, "name": ""}},
            "the existing account the controller runs as",
        ),
    ],
)
def test_helm_values_cross_field_rules_say_why(
    tmp_path: Path, values: dict[str, Any], why: str
) -> None:
    errors = _helm_errors(tmp_path, values)
    assert any(why in e for e in errors), errors
    assert not any("was expected" in e for e in errors), errors


@needs_chart
def test_helm_values_policy_rules_say_why_in_the_schema_line_and_the_models_line(
    tmp_path: Path,
) -> None:
    ladder = {"notify": {"enabled": False}, "restartRank": {"enabled": True}}
    errors = _helm_errors(tmp_path, {"policy": {"policies": {"default": {"ladder": ladder}}}})
    why = (
        "ladder.restartRank.enabled=true needs its prerequisite ladder.notify.enabled=true: "
        "every disruptive step is announced first (Event, condition), so that people see why "
        "before their job is touched"
    )
    assert errors == [
        f"values.schema.json: at /policy/policies/default/ladder/notify/enabled: {why}",
        f"policy: policy 'default': {why}",
    ]
