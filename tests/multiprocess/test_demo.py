"""examples/demo_ranks.py (`python examples/demo.py --detector-only`): 4 gloo CPU ranks,
rank 2 slowed, the report names it."""

from __future__ import annotations

import io

from demo_ranks import DemoConfig, run_demo
from rich.console import Console


def test_demo_names_the_slowed_rank_and_only_it() -> None:
    out = io.StringIO()
    code = run_demo(DemoConfig(slow_rank=1, slow_section="forward"), Console(file=out, width=140))
    text = out.getvalue()
    assert code == 0, text
    assert "straggler: StragglerId(rank=1, node='node0') is slow in 'forward'" in text
    assert text.count("STRAGGLER") == 1
