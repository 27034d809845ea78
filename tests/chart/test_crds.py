"""The CRDs the chart ships in crds/ (installed before templates, kept on uninstall)."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from chart_render import crds, render, status_object, validate

from pacekeeper.detector.score_report import RankScores


def straggler_report() -> dict[str, Any]:
    """The object a job's reporter writes: created, then its status patched."""
    return status_object(
        [
            RankScores(rank=0, node="gpu-0", pod="llama-0", gpu_relative=1.0),
            RankScores(rank=1, node="gpu-1", pod="llama-1", gpu_relative=0.42),
        ]
    )


def test_crds_are_valid_and_served_from_crds_folder() -> None:
    definitions = crds()
    names = [c["metadata"]["name"] for c in definitions]
    assert "stragglerreports.pacekeeper.dev" in names
    for crd in definitions:
        validate(crd)
        for version in crd["spec"]["versions"]:
            jsonschema.Draft4Validator.check_schema(version["schema"]["openAPIV3Schema"])
    # Helm installs crds/ before templates and never deletes them: none is a template.
    assert all(o["kind"] != "CustomResourceDefinition" for o in render())


def test_a_reporter_written_straggler_report_matches_the_crd() -> None:
    validate(straggler_report())


@pytest.mark.parametrize(
    ("path", "bad"),
    [(("status", "worstScore"), -1.0), (("spec", "job", "platform"), "slurm")],
)
def test_crd_schema_check_refuses_a_bad_straggler_report(path: tuple[str, ...], bad: Any) -> None:
    obj = copy.deepcopy(straggler_report())
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    with pytest.raises(jsonschema.ValidationError):
        validate(obj)
