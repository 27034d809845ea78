"""One real local Ray cluster per Ray test module.

Module scope, not session: a Ray left initialized in the pytest process would change
what later tests (the detector's platform detection) see."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """Starts Ray in this process; yields the GCS address other processes join with."""
    import ray

    ctx = ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024**2,
        namespace="pacekeeper-tests",
        log_to_driver=False,
    )
    try:
        yield str(ctx.address_info["gcs_address"])
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def badge(ray_cluster: str) -> Iterator[Any]:
    """A ``JobBadge`` of this test process's Ray job: what a publisher registers with."""
    import ray

    from pacekeeper.detector.reporters.ray_badge import create_badge

    handle = create_badge(timeout_s=60)
    try:
        yield handle
    finally:
        ray.kill(handle)
