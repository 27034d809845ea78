"""A rank that leaves while another still reports: both processes exit cleanly.

The detector's gloo group lives outside torch's registry, so the job's
``destroy_process_group()`` does not end it; if it were still alive when the
interpreter tears down, gloo's threads would abort the process ("terminate called
without an active exception", exit 134), which happened in about one run in four
before the detector closed its groups at exit. Several pairs, because it was a race."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

JOB = Path(__file__).with_name("early_exit_job.py")
PAIRS = 6


def test_a_rank_leaving_early_never_aborts_either_process(tmp_path: Path) -> None:
    for pair in range(PAIRS):
        store = tmp_path / f"store{pair}"
        outs = [tmp_path / f"pair{pair}-rank{r}.json" for r in (0, 1)]
        procs = [
            subprocess.Popen(
                [sys.executable, str(JOB), str(r), str(store), str(outs[r])],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for r in (0, 1)
        ]
        logs = [p.communicate(timeout=120)[0].decode(errors="replace") for p in procs]
        codes = [p.returncode for p in procs]
        assert codes == [0, 0], (
            f"pair {pair}: exit codes {codes}\n{logs[0][-1500:]}\n{logs[1][-1500:]}"
        )
        first, second = (json.loads(o.read_text()) for o in outs)
        assert first["reports"] == [True, True]  # rank 0 gathered both ranks' reports
        assert second["reports"] == [False, False]  # the others get None (NVRx's contract)
        assert second["errors"] == {}
        # Rank 1 had gone: rank 0's extra report is None, logged and counted, not raised.
        assert first["late"] is False
        assert first["errors"].get("report.gather") == 1
