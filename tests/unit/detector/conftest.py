from __future__ import annotations

from collections.abc import Iterator

import pytest

from pacekeeper.detector import Detector


@pytest.fixture(autouse=True)
def _fresh_detector() -> Iterator[None]:
    """Each test starts and ends with the class-level singleton shut down."""
    Detector.shutdown()
    yield
    Detector.shutdown()
