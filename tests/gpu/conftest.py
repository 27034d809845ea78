"""GPU tier: runs only where an NVIDIA GPU and cupti-python are present; skipped elsewhere
with the reason, so CI (no GPU) stays green and says what it did not run."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def gpu_missing_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no NVIDIA GPU: torch.cuda.is_available() is False (GPU tests run on the H200)"
    try:
        from cupti import cupti  # noqa: F401
    except Exception as e:
        return f"cupti-python is not usable here: {e}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = gpu_missing_reason()
    if reason is None:
        return
    for item in items:
        if _HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.skip(reason=reason))
