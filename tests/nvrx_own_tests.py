"""Run NVIDIA NVRx's own straggler unit tests against pacekeeper, imports swapped.

    .venv/bin/python tests/nvrx_own_tests.py /path/to/nvidia-resiliency-ext [pytest args]

Copies ``<checkout>/tests/straggler`` into a scratch directory outside this repository
(NVRx's code is never kept here), rewrites each import of NVRx's straggler package as
an NVRx user switching would (``from nvidia_resiliency_ext.attribution import
straggler`` -> ``from pacekeeper import detector as straggler``, and the submodule
paths likewise), and runs pytest on the copy with this interpreter. Prints pytest's
summary; the exit status is pytest's. A conftest of this runner's (not NVRx's) ends
the rank processes a failed test leaves behind (stuck in a collective whose peer died),
which would otherwise hold pytest at exit while multiprocessing joins them; on the GPU
machine, 2026-12-05 14:15 UTC, eight failed multi-rank tests (30 s each) used up the
step's time limit and looked like a hang in the next one. docs/testing.md records the
latest result and docs/detector.md names the tests of NVRx internals that are expected
to fail.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_SWAPS = (
    # The package: NVRx's current path (attribution.straggler) and its older one.
    (
        re.compile(r"from nvidia_resiliency_ext(?:\.attribution)? import straggler\b"),
        "from pacekeeper import detector as straggler",
    ),
    (re.compile(r"nvidia_resiliency_ext(?:\.attribution)?\.straggler\b"), "pacekeeper.detector"),
)


_CONFTEST = '''"""pacekeeper's runner: end the ranks a test left alive."""
import multiprocessing

import pytest


@pytest.fixture(autouse=True)
def _end_left_ranks():
    yield
    for child in multiprocessing.active_children():
        child.terminate()
        child.join(5)
        if child.is_alive():
            child.kill()
'''


def swap_imports(source: str) -> str:
    for pattern, replacement in _SWAPS:
        source = pattern.sub(replacement, source)
    return source


def prepare(checkout: Path, scratch: Path) -> Path:
    """The swapped copy of ``checkout``'s straggler tests under ``scratch``."""
    tests = checkout / "tests" / "straggler"
    if not (tests / "unit").is_dir():
        raise SystemExit(f"{checkout}: no tests/straggler/unit here (an NVRx checkout?)")
    dest = scratch / "straggler"
    shutil.copytree(tests, dest)
    for path in dest.rglob("*.py"):
        path.write_text(swap_imports(path.read_text()))
    (dest / "conftest.py").write_text(_CONFTEST)
    return dest


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    checkout, extra = Path(argv[0]).resolve(), argv[1:]
    with tempfile.TemporaryDirectory(prefix="nvrx-tests-") as tmp:
        dest = prepare(checkout, Path(tmp))
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs"]
        cmd += ["--continue-on-collection-errors", "unit", *extra]
        return subprocess.call(cmd, cwd=dest)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
