"""Where tests/realserver/build.sh leaves the Kubernetes binaries, and Debian's etcd.

Separate so that conftest.py can decide "skip or fail" without importing the cluster code.
The cache path must match build.sh's: `${PACEKEEPER_KUBE_CACHE:-$HOME/.cache/pacekeeper-kube}`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

KUBE_VERSION = "1.20.2"
BUILD_COMMAND = "bash tests/realserver/build.sh"
_DEBIAN_ETCD = Path("/usr/bin/etcd")


def kube_cache_dir() -> Path:
    root = os.environ.get("PACEKEEPER_KUBE_CACHE") or str(
        Path.home() / ".cache" / "pacekeeper-kube"
    )
    return Path(root) / KUBE_VERSION


@dataclass(frozen=True, slots=True)
class KubeBinaries:
    kube_apiserver: Path
    kube_controller_manager: Path
    etcd: Path

    @classmethod
    def located(cls) -> KubeBinaries:
        """The paths build.sh installs to; they may not exist (see `missing`)."""
        bin_dir = kube_cache_dir() / "bin"
        etcd = shutil.which("etcd")
        return cls(
            kube_apiserver=bin_dir / "kube-apiserver",
            kube_controller_manager=bin_dir / "kube-controller-manager",
            etcd=Path(etcd) if etcd else _DEBIAN_ETCD,
        )

    def missing(self, controller_manager: bool = True) -> list[Path]:
        """The binaries not there; without `controller_manager`, only the server's."""
        wanted = (self.kube_apiserver, self.etcd)
        if controller_manager:
            wanted += (self.kube_controller_manager,)
        return [path for path in wanted if not (path.is_file() and os.access(path, os.X_OK))]
