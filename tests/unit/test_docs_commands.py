"""Every ``pacekeeper ...`` command line in docs/*.md and README.md code blocks names a real
command and only options it has (its ``--help`` runs); the cheap ones run for real."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from pacekeeper.controller.cli.app import app

REPO = Path(__file__).parents[2]
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]


SHELL = {"", "bash", "sh", "shell", "console"}


def doc_commands() -> list[tuple[str, str]]:
    """(file, command line) for each ``pacekeeper`` line of a fenced shell block (``text``
    blocks are program output), continuation lines joined, comments and ``[optional]``
    parts dropped."""
    out = []
    for doc in DOCS:
        for lang, block in re.findall(r"```([a-z]*)\n(.*?)```", doc.read_text(), flags=re.S):
            if lang not in SHELL:
                continue
            for line in block.replace("\\\n", " ").splitlines():
                text = re.sub(r"\s#.*$", "", line.strip().removeprefix("$ ").strip())
                text = re.sub(r"\[[^\]]*\]", "", text)
                if text.startswith("pacekeeper "):
                    out.append((doc.name, text))
    return out


COMMANDS = doc_commands()


def resolve(words: list[str]) -> tuple[list[str], Any]:
    """The subcommand path at the start of ``words`` and the command it names (typer
    carries its own click: groups are told by their ``commands``)."""
    cmd: Any = typer.main.get_command(app)
    path: list[str] = []
    for w in words:
        if w not in getattr(cmd, "commands", {}):
            break
        cmd = cmd.commands[w]
        path.append(w)
    return path, cmd


def test_the_docs_show_commands() -> None:
    shown = {" ".join(resolve(shlex.split(c)[1:])[0]) for _, c in COMMANDS}
    assert {"simulate", "replay", "policy validate", "status kubernetes", "ray-controller"} <= shown


@pytest.mark.parametrize(("doc", "line"), COMMANDS, ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_each_documented_command_exists_with_the_options_it_shows(doc: str, line: str) -> None:
    words = shlex.split(line)[1:]
    path, cmd = resolve(words)
    runs_alone = not hasattr(cmd, "commands") or cmd.invoke_without_command  # `status`
    assert runs_alone, f"{doc}: {line!r} names no command"
    known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    used = {w.split("=")[0] for w in words[len(path) :] if w.startswith("-")}
    assert used <= known, f"{doc}: {line!r} uses {sorted(used - known)}"
    res = CliRunner().invoke(app, [*path, "--help"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("policy", sorted((REPO / "docs" / "policies").glob("*.yaml")))
def test_the_documented_policies_validate(policy: Path) -> None:
    res = CliRunner().invoke(app, ["policy", "validate", str(policy)])
    assert res.exit_code == 0, res.output


def test_the_cheap_documented_commands_run(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["policy", "docs"]).exit_code == 0
    schema = tmp_path / "policy.schema.json"
    assert runner.invoke(app, ["policy", "schema", "-o", str(schema)]).exit_code == 0
    assert schema.stat().st_size > 1000
    trace = tmp_path / "reports.jsonl"
    sim = ["simulate", "--ranks", "8", "--duration", "600", "--trace", str(trace)]
    assert runner.invoke(app, sim).exit_code == 0
    policy = REPO / "docs" / "policies" / "enforce-gpu.yaml"
    res = runner.invoke(app, ["replay", "--policy", str(policy), "--trace", str(trace)])
    assert res.exit_code == 0, res.output
