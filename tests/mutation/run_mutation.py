"""``make mutation``: mutmut over named modules, with the fast unit tests that cover them.

mutmut copies the code it mutates into ``mutants/`` beside the project and puts that
folder first on ``sys.path``. Here the three code folders install as ``pacekeeper.*``
through an editable finder, so run from the repository root mutmut would mutate
``detector/…`` while the tests import ``pacekeeper.detector`` from the untouched
folder, and every mutant would "survive". So each run builds a tree of its own,
``build/mutation/work``, where the folders sit at ``pacekeeper/<folder>`` (symlinks, as
``make lint`` does for mypy): the copies mutmut makes are then found under the names the
tests import, and the mutants' names (``pacekeeper.detector.scoring.x_valid__mutmut_1``)
match the modules' ``__name__``. After the run every named module must have been
reached by its tests through the mutated copy (a trampoline hit), else the run fails:
a module reached only through the installed original would report nothing but
survivors.

The settings live in ``pyproject.toml`` under ``[tool.pacekeeper-mutation]``; the
mutants named as equivalent, with why, in ``tests/mutation/equivalent_*.toml``. Each
run starts from nothing (a cached verdict from older tests is no figure) and writes
``build/mutation/summary.json`` and ``summary.txt``: per module the counts, the score
and every survivor with its diff.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("detector", "cupti_ext", "controller")
# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), folded into the
# three outcomes a score needs. A timeout counts as killed: the mutant made a test hang.
KILLED_CODES = {1, 3, 24, -24, 152, 255, 36, 37}
SURVIVED_CODES = {0}
NO_TESTS_CODES = {5, 33}


@dataclass
class ModuleResult:
    path: str
    module: str
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[str] = field(default_factory=list)
    equivalent: dict[str, str] = field(default_factory=dict)
    stale_equivalent: list[str] = field(default_factory=list)
    total: int = 0
    killed: int = 0

    @property
    def score(self) -> float | None:
        """Killed over all mutants less those shown equivalent (they cannot be killed)."""
        denominator = self.total - len(self.equivalent)
        return None if denominator <= 0 else self.killed / denominator

    @property
    def raw_score(self) -> float | None:
        return None if self.total == 0 else self.killed / self.total


def _settings() -> dict[str, object]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    try:
        settings: dict[str, object] = data["tool"]["pacekeeper-mutation"]
    except KeyError:
        sys.exit("pyproject.toml has no [tool.pacekeeper-mutation] table")
    return settings


def _module_name(path: str) -> str:
    return "pacekeeper." + path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")


def _check_modules(modules: list[str]) -> None:
    for path in modules:
        folder = path.split("/", 1)[0]
        if folder not in FOLDERS or not path.endswith(".py"):
            sys.exit(f"module {path!r}: must be a .py file under one of {', '.join(FOLDERS)}")
        if not (ROOT / path).is_file():
            sys.exit(f"module {path!r}: no such file under {ROOT}")


def _equivalents() -> dict[str, str]:
    """Mutant name -> why it cannot be killed, from every tests/mutation/equivalent_*.toml."""
    found: dict[str, str] = {}
    for file in sorted((ROOT / "tests" / "mutation").glob("equivalent_*.toml")):
        for name, entry in tomllib.loads(file.read_text()).items():
            reason = entry.get("reason") if isinstance(entry, dict) else None
            if not isinstance(reason, str) or not reason.strip():
                sys.exit(f"{file.name}: mutant {name!r} needs a non-empty reason")
            found[name] = reason
    return found


def _toml_value(value: object) -> str:
    # Lists of strings, numbers and booleans: JSON spells them as TOML does.
    return json.dumps(value)


def _build_tree(
    work: Path, modules: list[str], tests: list[str], settings: dict[str, object]
) -> None:
    deselect: list[str] = list(settings.get("deselect", []))  # type: ignore[call-overload]
    if work.exists():
        shutil.rmtree(work)
    (work / "pacekeeper").mkdir(parents=True)
    for folder in FOLDERS:
        (work / "pacekeeper" / folder).symlink_to(ROOT / folder)
    # docs/ goes along because controller tests read docs/policy.md, docs/status.md and
    # docs/policies/*.yaml beside their own folder (Path(__file__).parents[3]).
    for name in ("tests", "examples", "docs"):
        (work / name).symlink_to(ROOT / name)
    mutmut = {
        # All three folders are copied, so every `pacekeeper.*` import resolves inside
        # mutants/ (never through the editable finder to another tree); only_mutate
        # picks the modules that get mutants.
        "source_paths": [f"pacekeeper/{f}" for f in FOLDERS],
        "only_mutate": [f"pacekeeper/{m}" for m in modules],
        "also_copy": ["examples", "docs"],
        "pytest_add_cli_args_test_selection": tests,
        "use_git_change_detection": False,
        "mutate_only_covered_lines": False,
        "pytest_add_cli_args": [a for t in deselect for a in ("--deselect", t)],
        **dict(settings.get("mutmut", {})),  # type: ignore[call-overload]
    }
    text = (ROOT / "pyproject.toml").read_text()
    text += "\n[tool.mutmut]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in mutmut.items())
    (work / "pyproject.toml").write_text(text)


def _mutmut(work: Path, *args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # Only the mutated copies under work/mutants may be importable by these names: no
    # PYTHONPATH entry into the repository (one elsewhere may hold the tools).
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    kept = [p for p in kept if not Path(p).resolve().is_relative_to(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(kept)
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=work,
        env=env,
        text=True,
        capture_output=capture,
        check=False,
    )


def _results(work: Path, modules: list[str], equivalent: dict[str, str]) -> list[ModuleResult]:
    stats = json.loads((work / "mutants" / "mutmut-stats.json").read_text())
    reached = set(stats["tests_by_mangled_function_name"])
    out: list[ModuleResult] = []
    for path in modules:
        res = ModuleResult(path=path, module=_module_name(path))
        meta_file = work / "mutants" / "pacekeeper" / (path + ".meta")
        codes: dict[str, int | None] = {}
        if meta_file.exists():
            codes = json.loads(meta_file.read_text())["exit_code_by_key"]
        if codes and not any(k.startswith(res.module + ".") for k in reached):
            sys.exit(
                f"{path}: its tests never reached the mutated copy (no trampoline hit under "
                f"{res.module}); they import the original, and every mutant would survive"
            )
        tally: Counter[str] = Counter()
        for name, code in sorted(codes.items()):
            if code in KILLED_CODES:
                tally["killed"] += 1
            elif code in SURVIVED_CODES or code in NO_TESTS_CODES:
                tally["survived" if code in SURVIVED_CODES else "no_tests"] += 1
                if name in equivalent:
                    res.equivalent[name] = equivalent[name]
                else:
                    res.survivors.append(name)
            else:
                tally["other"] += 1
                res.survivors.append(name)
        prefix = res.module + ".x"
        res.stale_equivalent = sorted(
            n for n in equivalent if n.startswith(prefix) and n not in res.equivalent
        )
        res.counts = dict(tally)
        res.total = len(codes)
        res.killed = tally["killed"]
        out.append(res)
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _write_summary(out_dir: Path, work: Path, results: list[ModuleResult], jobs: int) -> str:
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    lines = [f"mutation run {when}, {os.cpu_count()} cores, -j {jobs}"]
    lines.append(f"{'module':<36} {'mutants':>7} {'killed':>6} {'equiv':>5} {'left':>4} score")
    for r in results:
        lines.append(
            f"{r.path:<36} {r.total:>7} {r.killed:>6} {len(r.equivalent):>5} "
            f"{len(r.survivors):>4} {_pct(r.score)}"
        )
    report: list[dict[str, object]] = []
    for r in results:
        diffs = {}
        for name in r.survivors:
            shown = _mutmut(work, "show", name, capture=True)
            diffs[name] = shown.stdout
            lines.append(f"\n# {name} (survived)\n{shown.stdout.rstrip()}")
        for name in r.stale_equivalent:
            lines.append(f"\n# {name}: listed as equivalent but not a survivor here (stale entry)")
        report.append(
            {
                "module": r.path,
                "mutants": r.total,
                "killed": r.killed,
                "counts": r.counts,
                "equivalent": r.equivalent,
                "survivors": diffs,
                "stale_equivalent": r.stale_equivalent,
                "score": r.score,
                "raw_score": r.raw_score,
            }
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines) + "\n"
    (out_dir / "summary.txt").write_text(text)
    meta = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_count": os.cpu_count(),
        "jobs": jobs,
        "python": sys.version.split()[0],
        "modules": report,
    }
    (out_dir / "summary.json").write_text(json.dumps(meta, indent=2) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    settings = _settings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--modules", default="", help="space-separated, e.g. detector/scoring.py")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--fail-under", type=float, default=0.0, help="percent, per module")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "mutation")
    args = parser.parse_args(argv)
    modules = args.modules.split() or list(settings["modules"])  # type: ignore[call-overload]
    _check_modules(modules)
    tests_by_folder: dict[str, list[str]] = dict(settings["tests"])  # type: ignore[call-overload]
    tests: list[str] = []
    for folder in sorted({m.split("/", 1)[0] for m in modules}):
        if folder not in tests_by_folder:
            sys.exit(f"[tool.pacekeeper-mutation.tests] names no tests for {folder}/")
        tests += [t for t in tests_by_folder[folder] if t not in tests]
    work = args.out / "work"
    _build_tree(work, modules, tests, settings)
    run = _mutmut(work, "run", "--max-children", str(args.jobs))
    if run.returncode != 0:
        print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
        return run.returncode
    results = _results(work, modules, _equivalents())
    print(_write_summary(args.out, work, results, args.jobs), end="")
    low = [r.path for r in results if r.score is not None and 100 * r.score < args.fail_under]
    if low:
        print(f"below {args.fail_under:.0f}%: {', '.join(low)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
