"""Data skew against slow GPUs on the sampled space, one family or fault at a time.

``bench/detection_quality.py`` runs every family x fault cell of a contiguous index
range; this picks the scenarios of one noise family (``--family data-skew``: indices
``i % 6 == 4``) or of one fault over every family (``--fault slow-gpu``), so the
data-skew figures and slow-GPU recall of issue #38's broad GPU statistic
(docs/decision-rule.md, "Data skew against a slow GPU") can be measured on the 2-core
VM. Each scenario is simulated, really scored and judged by the given policies
(``policy_runs.judge_policies``); prints one line per policy and writes JSON.

    .venv/bin/python bench/skew_breadth.py --family data-skew --scenarios 48 --ranks 128 \
        --policy docs/policies/enforce-recommended.yaml --out /tmp/skew.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from pacekeeper.controller.core import job_window
from pacekeeper.controller.core.policy import load_policy_file
from pacekeeper.controller.simulation import sampler
from pacekeeper.controller.simulation.models import ModelParams
from pacekeeper.controller.simulation.policy_runs import judge_policies
from pacekeeper.controller.simulation.sampled_quality import RunResult


def indices(family: str | None, fault: str | None, count: int, first: int) -> list[int]:
    """The first ``count`` scenario indices (from ``first``) of the family and fault."""
    out: list[int] = []
    i = first
    while len(out) < count:
        fam = sampler.FAMILIES[i % len(sampler.FAMILIES)]
        flt = sampler.FAULTS[(i // len(sampler.FAMILIES)) % len(sampler.FAULTS)]
        if (family is None or fam == family) and (fault is None or flt == fault):
            out.append(i)
        i += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", choices=sampler.FAMILIES)
    ap.add_argument("--fault", choices=sampler.FAULTS)
    ap.add_argument("--scenarios", type=int, default=48)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--space", default="issue38")
    ap.add_argument("--ranks", type=int, default=128)
    ap.add_argument("--duration", type=float, default=1800.0)
    ap.add_argument("--policy", action="append", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--no-breadth", action="store_true", help="the test ignores gpuIndividualMedian"
    )
    args = ap.parse_args()
    if args.no_breadth:
        job_window.broad_scores = lambda judged, report, kind: judged
    policies = {Path(p).stem: load_policy_file(Path(p)) for p in args.policy}
    results: list[dict[str, object]] = []
    t0 = time.perf_counter()
    for i in indices(args.family, args.fault, args.scenarios, args.first):
        s = sampler.sample(args.space, i)
        got = judge_policies(s.scenario, args.ranks, args.duration, s.seed, policies,
                             params=ModelParams())  # fmt: skip
        for det, q in got.items():
            if det in policies:
                r = RunResult.of(det, s.family, s.fault, q).to_dict()
                results.append({"index": i, "draws": s.draws, **r})
                print(i, s.family, s.fault, det, r["actedInTime"], r["falseDisruptions"],
                      flush=True)  # fmt: skip
    summary = {}
    for det in policies:
        mine = [r for r in results if r["detector"] == det]
        faulty = [r for r in mine if r["faulty"]]
        summary[det] = {
            "runs": len(mine),
            "gpuDays": round(sum(float(str(r["gpuDays"])) for r in mine), 2),
            "falseDisruptions": sum(int(str(r["falseDisruptions"])) for r in mine),
            "faultyRuns": len(faulty),
            "actedInTime": sum(bool(r["actedInTime"]) for r in faulty),
            "foundInTime": sum(bool(r["foundInTime"]) for r in faulty),
        }
        print(det, summary[det])
    doc = {"args": vars(args) | {"out": str(args.out)}, "summary": summary,
           "wallS": round(time.perf_counter() - t0, 1), "runs": results}  # fmt: skip
    args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
