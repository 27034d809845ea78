"""Core modules import none of the heavy stacks at import time (STYLE.md): each is
imported in a fresh interpreter and `sys.modules` is checked."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

HEAVY = ("torch", "ray", "kubernetes", "kopf", "cupti")

CORE_MODULES = [
    "pacekeeper.detector",
    "pacekeeper.detector.score_report",
    "pacekeeper.cupti_ext",
    "pacekeeper.controller",
    "pacekeeper.controller.policy",
    "pacekeeper.controller.engine",
    "pacekeeper.controller.decisions",
    "pacekeeper.controller.state",
    "pacekeeper.controller.budgets",
    "pacekeeper.controller.ladder",
    "pacekeeper.controller.attribution",
    "pacekeeper.controller.observations",
]


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_imports_no_heavy_stack(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is part of the layout and must exist")
    probe = (
        f"import sys, {module}\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "", f"{module} imported {done.stdout.strip()}"
