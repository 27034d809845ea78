"""A policy the controller would refuse fails before the controller starts: in
values.schema.json where JSON schema can say it, else in the pre-install/pre-upgrade
check Job (templates/policy/check-*.yaml); ``policy validate --helm-values`` says the
same offline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml
from chart_cases import ladder
from chart_render import install_dry_run, one, render
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app

HOOK = "pre-install,pre-upgrade"

# The values the issue found accepted at install and refused by the controller at start,
# with the field the refusal must name; `schema` says whether values.schema.json refuses
# it (else only the check Job and the models do).
REFUSED: dict[str, tuple[dict[str, Any], str, bool]] = {
    "recover-below-act": (
        {"policies": {"default": {"thresholds": {"act": 0.8, "recover": 0.5}}}},
        "thresholds.recover=0.5 must be above thresholds.act=0.8",
        False,
    ),
    "drain-without-taint": (
        {"policies": {"default": {"ladder": {"drainNode": {"enabled": True}}}}},
        "ladder.drainNode.enabled=true needs its prerequisite ladder.taintNode.enabled=true",
        True,
    ),
    "default-policy-not-defined": (
        {"defaultPolicy": "gpu"},
        "defaultPolicy='gpu' is not in policies",
        False,
    ),
    "section-score-without-section": (
        {"policies": {"default": {"score": {"kind": "sectionRelative"}}}},
        "score.section is required when kind is sectionRelative",
        True,
    ),
    "opt-out-with-empty-match-labels": (
        {"optOuts": {"nodeSelectors": [{"matchLabels": {}}]}},
        "optOuts.nodeSelectors[0]",
        True,
    ),
}


def hook_objects(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [o for o in render(values) if o["metadata"]["name"].endswith("-policy-check")]


def run_check_job(values: dict[str, Any], tmp_path: Path) -> Any:
    """What the Job's container would do: its command, on the ConfigMap it mounts."""
    objects = hook_objects(values)
    config_map, job = one(objects, "ConfigMap"), one(objects, "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    mount = one_mount(container, "policy")
    path = tmp_path / "policy.yaml"
    path.write_text(config_map["data"]["check.yaml"])
    command = container["command"]
    assert command[0] == "pacekeeper" and command[-1] == f"{mount}/policy.yaml"
    return CliRunner().invoke(app, [*command[1:-1], str(path)])


def one_mount(container: dict[str, Any], name: str) -> str:
    (mount,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == name]
    return str(mount)


def test_check_job_and_its_policy_run_before_everything_else() -> None:
    objects = hook_objects()
    assert sorted(o["kind"] for o in objects) == ["ConfigMap", "Job"]
    weights = {}
    for obj in objects:
        annotations = obj["metadata"]["annotations"]
        assert annotations["helm.sh/hook"] == HOOK
        assert annotations["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
        weights[obj["kind"]] = int(annotations["helm.sh/hook-weight"])
    assert weights["ConfigMap"] < weights["Job"]  # the document exists when the Job starts
    release_document = one(render(), "ConfigMap", "-policy")["data"]["policy.yaml"]
    assert one(objects, "ConfigMap")["data"] == {"check.yaml": release_document}


def test_check_job_runs_the_controller_image_in_the_controller_hardening() -> None:
    values = {"controller": {"image": {"digest": "sha256:" + "a" * 64}}}
    job = one(hook_objects(values), "Job")
    controller = one(render(values), "Deployment")["spec"]["template"]["spec"]
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == controller["containers"][0]["image"]
    assert container["image"].endswith("@sha256:" + "a" * 64)
    assert container["securityContext"] == controller["containers"][0]["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"] == controller["securityContext"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    assert container["command"][:3] == ["pacekeeper", "policy", "validate"]


def test_check_job_can_be_turned_off() -> None:
    assert hook_objects({"policyValidation": {"enabled": False}}) == []


def test_check_job_passes_a_good_policy(tmp_path: Path) -> None:
    result = run_check_job({"policy": {"policies": {"default": {"ladder": ladder()}}}}, tmp_path)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_policy_fails_the_install(case: str, tmp_path: Path) -> None:
    policy, message, by_schema = REFUSED[case]
    if by_schema:
        with pytest.raises(helm.HelmError):
            install_dry_run({"policy": policy})
        return
    # Past the schema: the check Job, run before the controller, refuses it.
    install_dry_run({"policy": policy})
    result = run_check_job({"policy": policy}, tmp_path)
    assert result.exit_code == 2, result.output
    assert message in result.output


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_validate_helm_values_refuses_naming_the_field(case: str, tmp_path: Path) -> None:
    policy, message, by_schema = REFUSED[case]
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"mode": "observe", "policy": policy}))
    result = CliRunner().invoke(app, ["policy", "validate", "--helm-values", str(values)])
    assert result.exit_code == 2, result.output
    model_lines = [line for line in result.output.splitlines() if ": policy: " in line]
    assert len(model_lines) == 1 and message in model_lines[0], result.output
    assert model_lines[0].startswith(f"invalid {values}: policy: ")
    schema_lines = [line for line in result.output.splitlines() if "values.schema.json" in line]
    assert bool(schema_lines) is by_schema, result.output


def test_validate_helm_values_renders_mode_as_the_chart_does(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("mode: dry-run\n")
    result = CliRunner().invoke(app, ["policy", "validate", "--helm-values", str(values)])
    assert result.exit_code == 0, result.output
    assert "mode dry-run, default policy 'default'" in result.output


def test_validate_helm_values_refuses_what_only_the_chart_checks(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"controller": {"replicas": 0}, "policy": {"mode": "x"}}))
    result = CliRunner().invoke(app, ["policy", "validate", "--helm-values", str(values)])
    assert result.exit_code == 2, result.output
    assert "at /controller/replicas" in result.output
    assert "policy.mode is set by the chart" in result.output
