"""Fixtures for the real-server tier: one real kube-apiserver + etcd + controller manager.

`real_cluster` (session) is a `cluster.RealCluster` with the chart's CRDs installed and a
static token for each identity in `SERVICE_ACCOUNTS`; `real_namespace` is a fresh
namespace per test; `make_world(namespace)` gives an operator scenario its
`e2e_world.World`, taken away after the test. Off CI, missing binaries skip the tier
with the build command; on CI (`CI=true`) they fail it, so a broken build cannot pass
as skipped. See docs/testing.md.
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from binaries import BUILD_COMMAND, KubeBinaries, kube_cache_dir
from cluster import RealCluster, start_cluster
from e2e_world import World
from identities import SERVICE_ACCOUNTS

CRD_DIR = Path(__file__).resolve().parents[2] / "charts" / "pacekeeper" / "crds"


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    binaries = KubeBinaries.located()
    missing = binaries.missing()
    if missing:
        reason = (
            f"real-server binaries missing ({', '.join(map(str, missing))}); "
            f"build them (cached in {kube_cache_dir()}) with: {BUILD_COMMAND}"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must build the real-server tier first: {reason}")
        pytest.skip(reason)
    with start_cluster(
        binaries, service_accounts=SERVICE_ACCOUNTS, crds=sorted(CRD_DIR.glob("*.yaml"))
    ) as cluster:
        yield cluster


@pytest.fixture
def real_namespace(real_cluster: RealCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace named after the test; deleted (not awaited) afterwards."""
    import kubernetes

    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{stem}-{secrets.token_hex(3)}"
    real_cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    kubernetes.client.CoreV1Api(real_cluster.admin).delete_namespace(name)


@pytest.fixture
def make_world(real_cluster: RealCluster, tmp_path: Path) -> Iterator[Callable[[str], World]]:
    """`make_world(namespace)`: a scenario's world in one of identities.E2E_NAMESPACES."""
    worlds: list[World] = []

    def make(namespace: str) -> World:
        world = World(real_cluster, namespace, tmp_path / namespace)
        worlds.append(world)
        return world

    yield make
    for world in reversed(worlds):
        world.close()
