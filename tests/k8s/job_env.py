"""What a training pod's environment looks like to the detector, pointed at the API
harness: for the tests that run torchrun jobs against it."""

from __future__ import annotations

import json
import os
from pathlib import Path


def pod_env(tmp_path: Path, url: str, job: str) -> dict[str, str]:
    """The process environment with a pod's variables, a kubeconfig for ``url`` (no token
    file here, so the client falls back to it) and the reporter on for ``job``."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({  # JSON is YAML: kubeconfig reads it
        "apiVersion": "v1", "kind": "Config", "current-context": "h",
        "clusters": [{"name": "harness", "cluster": {"server": url}}],
        "users": [{"name": "trainer", "user": {"token": "t"}}],
        "contexts": [{"name": "h", "context": {"cluster": "harness", "user": "trainer"}}],
    }))  # fmt: skip
    return os.environ | {
        "OMP_NUM_THREADS": "1",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": "1",
        "KUBECONFIG": str(kubeconfig),
        "PACEKEEPER_REPORTER": "auto",
        "PACEKEEPER_JOB_NAME": job,
        "PACEKEEPER_JOB_NAMESPACE": "default",
        "OUT_DIR": str(tmp_path),
    }
