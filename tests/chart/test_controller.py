"""The controller Deployment: hardened pod, the operator's command line, rollouts."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest
from chart_cases import FEATURES, GPU_POLICY
from chart_render import (
    NAMESPACE,
    PUSHED_IMAGE,
    RELEASE,
    chart,
    install_dry_run,
    notes,
    one,
    pod_specs,
    render,
    render_files,
)

LOCAL_IMAGE = "localhost/pacekeeper-controller"

RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}


def controller_pod(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return one(render(values), "Deployment")["spec"]["template"]


def command(values: dict[str, Any] | None = None) -> list[str]:
    spec = controller_pod(values)["spec"]
    return [str(part) for part in spec["containers"][0]["command"]]


def test_default_command_is_the_documented_operator_contract() -> None:
    assert command() == [
        "pacekeeper",
        "operator",
        "run",
        "--policy",
        "/etc/pacekeeper/policy.yaml",
        "--mode",
        "observe",
        "--leader-election",
        "--metrics-port",
        "8080",
        # Scrapes carry a token the API checks, over TLS (tests/chart/test_metrics_access.py).
        "--metrics-access",
        "kubernetes",
        "--metrics-tls-dir",
        "/var/run/secrets/pacekeeper.dev/tls",
        "--log-format",
        "json",
        # A policy edited into something invalid keeps the pod up, deciding nothing and
        # saying why (docs/install.md), instead of a crash loop.
        "--on-invalid-policy",
        "wait",
    ]


@pytest.mark.parametrize(
    ("values", "flag", "expected"),
    [
        ({"mode": "enforce"}, "--mode", "enforce"),
        ({"mode": "dry-run"}, "--mode", "dry-run"),
        ({"metrics": {"port": 9100}}, "--metrics-port", "9100"),
        ({"metrics": {"enabled": False}}, "--metrics-port", "0"),
        (FEATURES["text-logs"], "--log-format", "text"),
    ],
)
def test_command_follows_values(values: dict[str, Any], flag: str, expected: str) -> None:
    cmd = command(values)
    assert cmd[cmd.index(flag) + 1] == expected


def test_leader_election_can_be_turned_off() -> None:
    cmd = command(FEATURES["no-leader-election"])
    assert "--no-leader-election" in cmd and "--leader-election" not in cmd


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_every_pod_is_hardened(feature: str) -> None:
    specs = [s for o in render(FEATURES[feature]) for s in pod_specs(o)]
    assert specs
    for spec in specs:
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in spec["containers"]:
            context = container["securityContext"]
            assert {k: context[k] for k in RESTRICTED_CONTAINER} == RESTRICTED_CONTAINER
            assert container["resources"]["requests"]
            assert container["resources"]["limits"]["memory"]


def test_policy_is_mounted_read_only_and_tmp_is_writable() -> None:
    spec = controller_pod()["spec"]
    mounts = {m["mountPath"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["/etc/pacekeeper"]["readOnly"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["policy"]["configMap"]["name"] == f"{RELEASE}-pacekeeper-policy"
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]


def test_environment_names_the_lease_and_the_pod() -> None:
    env = {e["name"]: e for e in controller_pod()["spec"]["containers"][0]["env"]}
    assert env["PACEKEEPER_LEASE_NAME"]["value"] == f"{RELEASE}-pacekeeper-leader"
    assert env["PACEKEEPER_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.namespace"
    )
    assert env["PACEKEEPER_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["PACEKEEPER_LOG_LEVEL"]["value"] == "info"


def test_policy_change_rolls_the_pods_and_other_changes_do_not() -> None:
    def checksum(values: dict[str, Any] | None) -> str:
        return str(controller_pod(values)["metadata"]["annotations"]["checksum/policy"])

    base = checksum(None)
    assert checksum({"policy": GPU_POLICY}) != base
    assert checksum({"mode": "enforce"}) != base  # the mode is part of the document
    assert checksum({"controller": {"replicas": 2}}) == base


def test_high_availability_renders_replicas_and_budget() -> None:
    objects = render(FEATURES["high-availability"])
    assert one(objects, "Deployment")["spec"]["replicas"] == 2
    budget = one(objects, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert not [o for o in render() if o["kind"] == "PodDisruptionBudget"]


def test_scheduling_values_reach_the_pod() -> None:
    values = FEATURES["scheduling"]["controller"]
    pod = controller_pod(FEATURES["scheduling"])
    spec = pod["spec"]
    assert spec["nodeSelector"] == values["nodeSelector"]
    assert spec["tolerations"] == values["tolerations"]
    assert spec["affinity"] == values["affinity"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["metadata"]["annotations"]["team"] == "ml-platform"
    assert pod["metadata"]["labels"]["cost-center"] == "ml"


def test_a_pushed_image_is_tagged_with_the_app_version_unless_a_tag_is_given() -> None:
    container = controller_pod()["spec"]["containers"][0]
    repository = PUSHED_IMAGE["controller"]["image"]["repository"]
    assert container["image"] == f"{repository}:0.1.0"
    tagged = controller_pod({"controller": {"image": {"tag": "v9"}}})["spec"]["containers"][0]
    assert tagged["image"] == f"{repository}:v9"


def test_the_unpushed_default_image_is_refused_naming_the_value_to_set() -> None:
    """The default is what `make image` leaves on the build machine (tests/image/build.sh);
    installed as it is, the pre-install policy check would wait 300 s on a pull that cannot
    succeed and fail without saying why."""
    assert chart().values["controller"]["image"]["repository"] == LOCAL_IMAGE
    for attempt in (
        lambda: render_files(pushed_image=False),
        lambda: install_dry_run(pushed_image=False),
        lambda: render_files({"webhook": {"enabled": True}, "policyValidation": {"enabled": False}},
                             pushed_image=False),
    ):  # fmt: skip
        with pytest.raises(helm.HelmError, match=r"controller\.image\.repository is localhost/"):
            attempt()


def test_the_local_image_is_accepted_when_it_is_on_the_nodes_already() -> None:
    """kind load / podman on the node: pullPolicy Never says the image is there."""
    values = {"controller": {"image": {"repository": LOCAL_IMAGE, "pullPolicy": "Never"}}}
    container = controller_pod(values)["spec"]["containers"][0]
    assert container["image"] == f"{LOCAL_IMAGE}:0.1.0"  # what `make image` tags
    assert container["imagePullPolicy"] == "Never"


def test_a_digest_pins_the_image_and_the_tag_is_ignored() -> None:
    values = FEATURES["image-digest"]
    image = values["controller"]["image"]
    container = controller_pod(values)["spec"]["containers"][0]
    assert container["image"] == f"{image['repository']}@{image['digest']}"


@pytest.mark.parametrize(
    "digest", ["latest", "sha256:abc", "sha512:" + "0" * 128, "SHA256:" + "A" * 64]
)
def test_a_digest_that_is_not_sha256_hex_fails_at_install(digest: str) -> None:
    with pytest.raises(helm.HelmValuesError, match="/controller/image/digest"):
        render({"controller": {"image": {"digest": digest}}})


@pytest.mark.parametrize("mode", ["observe", "dry-run", "enforce"])
def test_notes_state_the_mode_and_how_to_opt_in(mode: str) -> None:
    text = notes({"mode": mode})
    assert f"MODE: {mode}" in text
    assert 'pacekeeper.dev/detect: "true"' in text
    assert "pacekeeper.dev/policy" in text and "pacekeeper.dev/mode" in text
    assert f"kubectl logs -n {NAMESPACE} deploy/{RELEASE}-pacekeeper" in text


def test_notes_list_enabled_actions_and_reporter_namespaces() -> None:
    assert "Actions enabled: notify" in notes()
    text = notes(FEATURES["reporter-rbac"] | {"actions": {"taintNode": {"enabled": True}}})
    assert "Actions enabled: notify, taintNode" in text
    assert "team-a/llama: reports llama" in text
    assert "team-b/trainers: every report of the namespace" in text


def test_notes_warn_about_a_budget_on_a_single_replica() -> None:
    assert "WARNING" in notes({"podDisruptionBudget": {"enabled": True}})
    assert "WARNING" not in notes(FEATURES["high-availability"])


def test_notes_name_the_chart_default_policy_and_the_document_kind() -> None:
    assert "pacekeeper.dev/policy: default " in notes()
    text = notes({"policy": GPU_POLICY})
    assert "pacekeeper.dev/policy: gpu " in text
    assert "RemediationPolicies" in text
    assert "PolicySet" not in text
