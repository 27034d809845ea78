"""Core modules import none of the heavy stacks at import time (STYLE.md): each is
imported in a fresh interpreter and `sys.modules` is checked."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "ray", "kubernetes", "kopf", "cupti")

ROOT = Path(__file__).resolve().parents[2]
# Every module of the controller's core folder, found on disk: a new one is covered too.
CORE_FOLDER = sorted(
    "pacekeeper.controller.core" + ("" if p.stem == "__init__" else f".{p.stem}")
    for p in (ROOT / "controller" / "core").glob("*.py")
)
CORE_MODULES = [
    "pacekeeper.detector",
    "pacekeeper.detector.score_report",
    "pacekeeper.cupti_ext",
    "pacekeeper.controller",
    *CORE_FOLDER,
]


def test_the_core_folder_is_found() -> None:
    assert "pacekeeper.controller.core.engine" in CORE_FOLDER and len(CORE_FOLDER) >= 10


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
