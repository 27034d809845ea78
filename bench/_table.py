"""Shared by the benchmarks: print a table and write the figures to bench/results/<name>.json.

Usage: ``emit("detector_overhead", rows, title=..., meta={...})`` where ``rows`` is a list
of flat dicts (same keys, in column order). The JSON keeps the rows plus ``meta``,
the date, Python/platform and CPU count, so figures in docs can be traced to a run, and
a speed probe: the development VM's speed has varied six-fold from one day to the next
(docs/performance.md, the 16,384-rank decision), so a figure in ms says little without
how fast the same Python ran a fixed piece of work at the time.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def speed_probe_ms(repeats: int = 7) -> float:
    """Median time of a fixed pure-Python task (attribute reads, dict gets, a sort, a
    JSON round trip: what the controller's and detector's Python does), in ms."""
    rng = random.Random(0)
    rows = [{"a": rng.random(), "b": rng.random(), "n": str(i)} for i in range(20_000)]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        column = [r.get("a") for r in rows]
        column.sort()
        json.loads(json.dumps(rows[:2_000]))
        times.append((time.perf_counter() - t) * 1e3)
    return round(statistics.median(times), 2)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _print(title: str, columns: list[str], rows: list[dict[str, Any]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # the GPU machine's bare image: a plain table, the same cells
        print(title)
        print(" | ".join(columns))
        for row in rows:
            print(" | ".join(_cell(row.get(c, "")) for c in columns))
        return
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="left" if col == columns[0] else "right")
    for row in rows:
        table.add_row(*(_cell(row.get(c, "")) for c in columns))
    Console(width=max(120, Console().width)).print(table)


def emit(
    name: str,
    rows: list[dict[str, Any]],
    *,
    title: str,
    meta: dict[str, Any] | None = None,
    results_dir: Path | None = None,
) -> Path:
    """Print ``rows`` as a table titled ``title``; write them as JSON; return the path."""
    columns = list(rows[0]) if rows else []
    _print(title, columns, rows)

    out_dir = results_dir or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "name": name,
        "title": title,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "speed_probe_ms": speed_probe_ms(),
        },
        "meta": meta or {},
        "rows": rows,
    }
    path = out_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    tmp.replace(path)
    return path
