"""Marks every test by the folder it lives in, so `-m` selects tiers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_TIERS = {
    "unit": "unit",
    "multiprocess": "multiprocess",
    "ray": "ray",
    "k8s": "k8s",
    "chart": "chart",
    "gpu": "gpu",
    "realserver": "realserver",
}

# Local Ray must stay on loopback, and token auth breaks the CLI here.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", "2")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        try:
            rel = Path(item.path).relative_to(root)
        except ValueError:
            continue
        tier = _TIERS.get(rel.parts[0])
        if tier is None and rel.parts[0] == "unit":
            tier = "unit"
        if tier is not None:
            item.add_marker(getattr(pytest.mark, tier))
