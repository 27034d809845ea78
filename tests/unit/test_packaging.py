"""The wheel installs the three folders under one `pacekeeper` namespace, and the core
installs and imports without torch, ray or kubernetes (the controller image stays small)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
    )
    (whl,) = out.glob("pacekeeper-*.whl")
    return whl


def test_wheel_maps_folders_under_the_pacekeeper_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.startswith("pacekeeper-")}
    assert tops == {"pacekeeper"}, tops
    assert "pacekeeper/detector/score_report.py" in names
    assert "pacekeeper/controller/cli/app.py" in names
    # Every source package is listed in pyproject.toml (a new folder is easy to forget).
    for top in ("detector", "cupti_ext", "controller"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.relative_to(ROOT).as_posix()
            assert f"pacekeeper/{rel}" in names, f"{rel} is missing from the wheel"
    assert "pacekeeper/cupti_ext/backend.py" in names
    # Namespace package: no __init__ at the top, so nothing shadows other installs.
    assert "pacekeeper/__init__.py" not in names


def test_wheel_carries_the_compiled_record_path_where_a_compiler_is(wheel: Path) -> None:
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler on this machine: the wheel is built without it")
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if n.startswith("pacekeeper/cupti_ext/_native")], names


@pytest.mark.slow
def test_wheel_imports_in_a_fresh_venv_without_torch(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    constraints = ROOT / "constraints.txt"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "-c", str(constraints), str(wheel)],
        check=True,
    )
    probe = (
        "import sys, importlib.util as u\n"
        "import pacekeeper.detector.score_report, pacekeeper.controller, pacekeeper.cupti_ext\n"
        "import pacekeeper.detector\n"
        "assert u.find_spec('torch') is None, 'torch must not be a core dependency'\n"
        "heavy = {'torch', 'ray', 'kubernetes', 'kopf', 'cupti'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "print(pacekeeper.detector.score_report.__file__)\n"
    )
    if shutil.which("cc") or shutil.which("gcc"):  # the wheel carries the compiled path
        probe += (
            "from pacekeeper.cupti_ext import native\n"
            "assert native.library() is not None, 'compiled record path not installed'\n"
        )
    # Run from tmp_path so the source tree is not on sys.path.
    done = subprocess.run(
        [str(py), "-c", probe], cwd=tmp_path, check=True, capture_output=True, text=True
    )
    assert str(env_dir) in done.stdout
