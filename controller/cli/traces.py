"""``pacekeeper trace import`` and ``pacekeeper export``: recorded traces and live
history into ScoreReport JSONL for ``pacekeeper replay`` (docs/traces.md)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

trace_app = typer.Typer(no_args_is_help=True, help="Import recorded traces as ScoreReports.")
export_app = typer.Typer(no_args_is_help=True, help="Export live report history as JSONL.")


class TraceFormat(StrEnum):
    AUTO = "auto"
    PARQUET = "parquet"
    KINETO = "kineto"


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(2)


def _parallel(text: str) -> dict[str, int]:
    sizes = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if not name or not value.isdigit() or int(value) < 1:
            raise ValueError(f"--parallel {text!r}: expected name=size,... (e.g. tp=2,dp=4,pp=2)")
        sizes[name.strip()] = int(value)
    return sizes


@trace_app.command("import")
def import_trace(  # noqa: PLR0917 - one parameter per option
    files: Annotated[list[Path], typer.Argument(help="One parquet file, or one JSON per rank.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL of ScoreReports to write.")],
    fmt: Annotated[TraceFormat, typer.Option("--format", help="By file name if auto.")] = (
        TraceFormat.AUTO
    ),
    meta: Annotated[
        Path | None, typer.Option(help="parquet: the job's meta YAML (dp/pp/tp sizes).")
    ] = None,
    parallel: Annotated[
        str | None, typer.Option(help="kineto: sizes, fastest first: tp=2,dp=4,pp=2.")
    ] = None,
    steps_per_window: Annotated[int, typer.Option(min=1, help="Steps per report.")] = 8,
    gpus_per_node: Annotated[int, typer.Option(min=1, help="Node = rank // this.")] = 8,
    job: Annotated[str | None, typer.Option(help="Job name in the reports.")] = None,
) -> None:
    """Score a recorded trace window by window through the detector's own scoring."""
    from pacekeeper.controller.traces.parquet import TraceError, read_meta, read_parquet
    from pacekeeper.controller.traces.reports import trace_reports, write_jsonl
    from pacekeeper.controller.traces.windows import cut

    coords: Mapping[int, Mapping[str, int]] | None
    if fmt is TraceFormat.AUTO:
        parquet = all(f.suffix == ".parquet" for f in files)
        fmt = TraceFormat.PARQUET if parquet else TraceFormat.KINETO
    try:
        if fmt is TraceFormat.PARQUET:
            if len(files) != 1 or meta is None:
                raise _fail("--format parquet takes one file and --meta")
            job_meta = read_meta(meta)
            ops, coords = read_parquet(files[0], job_meta)
            world = job_meta.world_size
        else:
            from pacekeeper.controller.traces.kineto import coords_of, read_kineto

            ops, world = read_kineto(files)
            sizes = _parallel(parallel) if parallel else None
            coords = coords_of(sorted(set(ops.rank.tolist())), sizes) if sizes else None
        trace = cut(ops, steps_per_window=steps_per_window, world_size=world, coords=coords)
        name = job or files[0].stem
        reports = trace_reports(trace, source=fmt.value, job_name=name, gpus_per_node=gpus_per_node)
        n = write_jsonl(reports, out)
    except (TraceError, ValueError, OSError) as e:
        raise _fail(str(e)) from None
    typer.echo(
        f"wrote {n} reports ({len(trace.rank_ids)} ranks of {world}, {steps_per_window} steps "
        f"each, step {trace.step_s:.3g} s) to {out}; backtest: pacekeeper replay "
        f"--policy POLICY --trace {out}"
    )


@export_app.command("ray")
def export_ray(
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL to write.")],
    job: Annotated[str | None, typer.Option(help="Job key; needed when several.")] = None,
    address: Annotated[str, typer.Option(help="Ray address.")] = "auto",
) -> None:
    """The ScoreBoard's history of one job (Ray)."""
    from pacekeeper.controller.traces.export import ExportError, JsonlExport, ray_history

    try:
        import ray
    except ImportError:
        raise _fail("exporting from Ray needs ray: pip install 'pacekeeper[ray]'") from None
    from pacekeeper.detector.reporters.ray_scoreboard import get_scoreboard

    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        board = get_scoreboard(create=False)
        wires = ray_history(board, job, ray.get)
    except ExportError as e:
        raise _fail(str(e)) from None
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise _fail(f"cannot read the ScoreBoard: {e}") from None
    with out.open("w", encoding="utf-8") as fh:
        export = JsonlExport(fh, job)
        for w in wires:
            export.add(w)
    _done(export.written, export.rejected, out)


@export_app.command("kubernetes")
def export_kubernetes(  # noqa: PLR0917 - one parameter per option
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL to write.")],
    name: Annotated[str, typer.Option(help="The StragglerReport (the job's name).")],
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", help="The job's namespace (default: the context's, as kubectl)."
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="Kubeconfig file(s), ':'-separated (default: KUBECONFIG, ~/.kube/config, "
            "in-cluster, as kubectl)."
        ),
    ] = None,
    follow_s: Annotated[
        float, typer.Option(min=0, help="Keep polling this long, appending new reports.")
    ] = 0.0,
    interval_s: Annotated[float, typer.Option(min=1, help="Seconds between polls.")] = 30.0,
) -> None:
    """The StragglerReport's report, once or, with --follow-s, each new one."""
    from pacekeeper.controller.cli import kube_config
    from pacekeeper.controller.sources.kubernetes import KubernetesSource
    from pacekeeper.controller.traces.export import JsonlExport, status_reports

    try:
        found = kube_config.connect(kubeconfig)
    except kube_config.KubeConfigError as e:
        raise _fail(str(e)) from None
    source = KubernetesSource(found.api_client)
    namespace = namespace or found.namespace or "default"
    deadline = time.monotonic() + follow_s
    with out.open("w", encoding="utf-8") as fh:
        export = JsonlExport(fh, f"{namespace}/{name}")
        while True:
            obj = _read(source, namespace, name)
            for wire, incarnation in status_reports([obj] if obj else []):
                if export.add(wire, incarnation):
                    fh.flush()
            if time.monotonic() + interval_s > deadline:
                break
            time.sleep(interval_s)
    if export.written == 0 and obj is None:
        raise _fail(f"no StragglerReport {namespace}/{name}")
    _done(export.written, export.rejected, out)


def _read(source: Any, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        obj: dict[str, Any] | None = source.read_report_object(namespace, name)
    except Exception as e:  # the client raises ApiException, urllib3 errors, timeouts
        raise _fail(f"cannot read StragglerReport {namespace}/{name}: {e}") from None
    return obj


def _done(written: int, rejected: int, out: Path) -> None:
    note = f"; {rejected} invalid left out" if rejected else ""
    typer.echo(f"wrote {written} reports to {out}{note}", file=sys.stdout)
