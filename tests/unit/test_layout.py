"""The house as ARCHITECTURE.md draws it, computed from the source: no module of the
three code folders over 600 lines, no import cycle among the project's modules, and the
controller's core folder importing nothing that does I/O.

Imports are read with ``ast`` (function-level ones too: a cycle hidden inside a function
is still a cycle a reader has to hold in their head). ``from pkg import name`` counts as
an import of ``pkg.name`` when that is a module, else of ``pkg``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("detector", "cupti_ext", "controller")
MAX_LINES = 600
CORE = ROOT / "controller" / "core"
# What the core may import from outside itself: the standard library, pydantic, numpy,
# yaml and the torch-free score report. Anything else (clients, runtimes) is a shell's.
CORE_ALLOWED_PROJECT = {"pacekeeper.controller.core", "pacekeeper.detector.score_report"}
CORE_FORBIDDEN = ("kubernetes", "kopf", "ray", "torch", "cupti", "prometheus_client", "requests")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for top in FOLDERS:
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(["pacekeeper", *parts])] = path
    return mods


MODULES = _modules()


def _imported(module: str, path: Path) -> Iterator[str]:
    """Every module name ``module`` imports, resolved to absolute names."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
            yield from subs if len(subs) == len(node.names) else [target, *subs]


def _graph() -> dict[str, set[str]]:
    return {m: {t for t in _imported(m, p) if t in MODULES and t != m} for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, edges in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(edges)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_among_the_projects_modules() -> None:
    assert _cycles(_graph()) == []


def test_no_module_is_over_600_lines() -> None:
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in MODULES.values()}
    too_big = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert too_big == {}


def test_the_layout_has_its_core_runtime_and_cli_folders() -> None:
    for folder in ("core", "runtime", "cli", "sources", "actuators", "simulation"):
        assert (ROOT / "controller" / folder / "__init__.py").is_file(), folder
    assert {p.name for p in (ROOT / "controller").glob("*.py")} == {"__init__.py"}


CORE_MODULES = sorted(m for m, p in MODULES.items() if p.is_relative_to(CORE))


@pytest.mark.parametrize("module", CORE_MODULES)
def test_a_core_module_imports_only_the_core_the_report_schema_and_plain_libraries(
    module: str,
) -> None:
    imported = set(_imported(module, MODULES[module]))
    project = {
        name
        for name in imported
        if name.startswith("pacekeeper.")
        and not any(name == a or name.startswith(a + ".") for a in CORE_ALLOWED_PROJECT)
    }
    heavy = {name for name in imported if name.split(".")[0] in CORE_FORBIDDEN}
    assert project == set() and heavy == set()
