"""``pacekeeper policy ...``: validate a policy file, export its JSON Schema, print the
reference. Mounted on the main CLI by ``cli.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pacekeeper.controller.core.policy import Mode, PolicyDocument, PolicyError, load_policy_file

policy_app = typer.Typer(no_args_is_help=True, help="Remediation policies: validate, schema, docs.")


INVALID_POLICY_EXIT = 2
"""Exit status for an invalid or unreadable policy document (``operator run``, ``simulate``
and ``replay`` exit 2 for one too)."""


@policy_app.command("validate")
def validate(
    files: Annotated[list[Path] | None, typer.Argument(help="Policy YAML file(s).")] = None,
    helm_values: Annotated[
        list[Path] | None,
        typer.Option(
            "--helm-values",
            help="A Helm values file: its policy and mode as the chart renders them, "
            "and values.schema.json.",
        ),
    ] = None,
    chart: Annotated[
        Path | None,
        typer.Option(help="Chart directory for --helm-values; default: this checkout's."),
    ] = None,
) -> None:
    """Validate policy documents; exit 2 naming the file and field of each error. Risky
    settings a document accepts (acknowledgeUnsafe) are printed as warnings."""
    out, err = Console(), Console(stderr=True)
    if not files and not helm_values:
        raise typer.BadParameter("give policy file(s) or --helm-values FILE")
    failed = 0
    for values_path in helm_values or []:
        failed += _validate_helm_values(values_path, chart, out, err)
    for path in files or []:
        try:
            doc = load_policy_file(path)
        except PolicyError as e:
            for problem in e.problems:
                _tell(err, "[bold red]invalid[/]", problem)
            failed += 1
            continue
        for warning in doc.warnings():
            _tell(err, "[bold yellow]warning[/]", f"{path}: {warning}")
        out.print(f"[bold green]valid[/] {path}", highlight=False)
        out.print(summary_table(doc))
    if failed:
        raise typer.Exit(INVALID_POLICY_EXIT)


def _validate_helm_values(path: Path, chart: Path | None, out: Console, err: Console) -> int:
    from pacekeeper.controller.cli.helm_values import check_helm_values, default_chart_dir

    check = check_helm_values(path, chart or default_chart_dir())
    for note in check.notes:
        _tell(err, "[bold yellow]note[/]", f"{path}: {note}")
    for error in check.errors:
        _tell(err, "[bold red]invalid[/]", error)
    if check.errors or check.document is None:
        return 1
    for warning in check.document.warnings():
        _tell(err, "[bold yellow]warning[/]", f"{path}: {warning}")
    out.print(f"[bold green]valid[/] {path} (Helm values)", highlight=False)
    out.print(summary_table(check.document))
    return 0


def _tell(console: Console, label: str, text: str) -> None:
    # Escaped: messages hold brackets (``acknowledgeUnsafe: [unlimitedBudgets]``) that
    # rich would otherwise take for markup and drop.
    console.print(f"{label} {escape(text)}", markup=True, highlight=False, soft_wrap=True)


@policy_app.command("schema")
def schema(
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here.")] = None,
) -> None:
    """Print (or write) the JSON Schema of the policy document."""
    from pacekeeper.controller.core.policy import policy_json_schema

    text = json.dumps(policy_json_schema(), indent=2, sort_keys=True) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")


@policy_app.command("docs")
def docs() -> None:
    """Print the policy reference (Markdown) generated from the models."""
    from pacekeeper.controller.cli.policy_docs import policy_reference

    typer.echo(policy_reference())


def summary_table(doc: PolicyDocument) -> Table:
    """What each policy would do, at a glance."""
    t = Table(title=f"mode {doc.mode.value}, default policy '{doc.default_policy}'")
    for col in ("policy", "mode", "score", "act < / recover >=", "persistence", "ladder"):
        t.add_column(col)
    for name, p in doc.policies.items():
        score = p.score.kind.value + (f"[{p.score.section}]" if p.score.section else "")
        per = []
        if p.persistence.consecutive_reports is not None:
            per.append(f"{p.persistence.consecutive_reports} reports")
        if p.persistence.below_for_s is not None:
            per.append(f"{p.persistence.below_for_s:g} s")
        joiner = " and " if p.persistence.require == "all" else " or "
        mode = Mode.lowest(doc.mode, p.mode).value
        steps = ", ".join(s.value for s in p.ladder.enabled_steps()) or "(none)"
        t.add_row(
            name,
            mode,
            score,
            f"{p.thresholds.act:g} / {p.thresholds.recover:g}",
            joiner.join(per),
            steps,
        )
    return t
