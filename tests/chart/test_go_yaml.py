"""Everything we ship as YAML reads the same to Go (helm, kubectl) as to PyYAML.

Our tests read manifests with PyYAML (YAML 1.2-like for plain scalars); Helm and kubectl
read them with sigs.k8s.io/yaml (YAML 1.1: `n`, `y`, `no`, `off` are booleans). A
difference is a manifest that passes here and fails, or means something else, for users.
"""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml
from chart_cases import FEATURES
from chart_render import CHART_DIR, KUBE_VERSION, OLDEST_KUBE_VERSION, REPO, chart, render_files
from go_yaml import ambiguous_booleans, documents, go_load, problems, stream_differences

YAML_BLOCK = re.compile(r"```ya?ml\n(.*?)```", re.S)


def _tracked(*patterns: str) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *patterns], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    # Templates are not YAML until rendered; their renderings are checked below.
    return sorted(p for p in listed if not p.startswith("charts/pacekeeper/templates/"))


YAML_FILES = _tracked("*.yaml", "*.yml")
MARKDOWN_FILES = _tracked("*.md")


def _doc_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in MARKDOWN_FILES:
        for i, block in enumerate(YAML_BLOCK.findall((REPO / path).read_text())):
            blocks.append((f"{path}#{i}", block))
    return blocks


DOC_BLOCKS = _doc_blocks()


def test_the_go_reader_is_yaml_1_1_so_the_comparison_has_teeth() -> None:
    go = go_load("required: [median, n]\nn: {type: integer}\nok: on\nanswer: 'n'\n")
    assert go == {"required": ["median", False], "false": {"type": "integer"}, "ok": True,
                  "answer": "n"}  # fmt: skip
    assert stream_differences("a: 1\nn: 2\n---\nb: y\n") == [
        "document 0/false: only go has this key",
        "document 0/n: only pyyaml has this key",
        "document 1/b: go=True pyyaml='y'",
    ]
    assert ambiguous_booleans("on: 1\nx: [yes, 'no', \"off\", n]\n") == [
        "line 1: on",
        "line 2: yes",
        "line 2: n",
    ]


def test_what_is_checked_covers_the_chart_the_docs_and_the_manifests() -> None:
    assert "charts/pacekeeper/crds/stragglerreports.pacekeeper.dev.yaml" in YAML_FILES
    assert "charts/pacekeeper/values.yaml" in YAML_FILES
    assert any(p.startswith("docs/manifests/") for p in YAML_FILES)
    assert any(p.startswith("docs/policies/") for p in YAML_FILES)
    names = {name.split("#")[0] for name, _ in DOC_BLOCKS}
    assert {"docs/install.md", "docs/opt-in.md"} <= names


@pytest.mark.parametrize("path", YAML_FILES)
def test_every_yaml_file_we_ship_reads_the_same_to_helm(path: str) -> None:
    assert problems((REPO / path).read_text()) == []


@pytest.mark.parametrize(("name", "block"), DOC_BLOCKS, ids=[n for n, _ in DOC_BLOCKS])
def test_every_yaml_block_in_the_docs_reads_the_same_to_helm(name: str, block: str) -> None:
    assert list(documents(block)), f"{name} holds no YAML"
    assert problems(block) == []


def test_the_crds_helm_installs_read_the_same_to_helm() -> None:
    crds = chart().crds
    assert [c["filename"] for c in crds] == [
        "pacekeeper/crds/" + p.name for p in sorted((CHART_DIR / "crds").glob("*.yaml"))
    ]
    for crd in crds:
        assert problems(crd["data"]) == [], crd["filename"]


@pytest.mark.parametrize("kube_version", [OLDEST_KUBE_VERSION, KUBE_VERSION])
@pytest.mark.parametrize("feature", FEATURES)
def test_every_rendered_manifest_reads_the_same_to_helm(feature: str, kube_version: str) -> None:
    files = render_files(FEATURES[feature], kube_version=kube_version)
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            continue
        assert problems(text) == [], path


def test_the_spread_fields_of_the_crd_are_named_and_required_as_strings() -> None:
    """The bug this file exists for: `n` read as false, so the CRD could not be created."""
    text = (CHART_DIR / "crds" / "stragglerreports.pacekeeper.dev.yaml").read_text()
    schema = go_load(text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    report = schema["properties"]["status"]["properties"]["report"]["properties"]
    peers = report["summary"]["properties"]["peers"]["items"]["properties"]
    spread = peers["spreads"]["additionalProperties"]
    assert spread["required"] == ["median", "mad", "n"]
    assert set(spread["properties"]) == {"median", "mad", "n"}
    assert yaml.safe_load(text) == go_load(text)
