"""Rank 0 of the journey's training job, publishing as its pod does.

Run inside the pod (`ProcessKubelet.exec`): the reporter is configured by the detector's
own code from the pod's environment alone (`PACEKEEPER_REPORTER`, `PACEKEEPER_JOB_NAME`,
`POD_NAMESPACE`, `POD_NAME`, `NODE_NAME`, set by docs/opt-in.md's manifest) and talks to
the API in-cluster, as the pod's ServiceAccount. The per-rank pods and nodes are what each
rank's own `POD_NAME`/`NODE_NAME` would bring to rank 0 through the gather.

    python journey_reporter.py PODS_JSON RANKS_PER_POD SLOW_RANK SLOW_SCORE COUNT EVERY_S
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime

from pacekeeper.detector import env as detector_env
from pacekeeper.detector.reporters import make_publisher
from pacekeeper.detector.score_report import JobIdentity, Platform, RankScores, ScoreReport

HEALTHY = 0.98


def main(argv: list[str]) -> int:
    pods = json.loads(argv[0])  # [[pod, node], ...] by pod index
    per_pod, slow_rank, slow_score = int(argv[1]), int(argv[2]), float(argv[3])
    count, every_s = int(argv[4]), float(argv[5])
    publisher = make_publisher()
    if publisher is None:
        print("no reporter configured from the pod's environment", file=sys.stderr)
        return 3
    job = JobIdentity(
        platform=Platform.KUBERNETES,
        namespace=detector_env.job_namespace() or "",
        name=detector_env.job_name() or "",
    )
    for sequence in range(count):
        ranks = [
            RankScores(
                rank=r, node=pods[r // per_pod][1], pod=pods[r // per_pod][0],
                gpu_relative=slow_score if r == slow_rank else HEALTHY,
                gpu_individual=slow_score if r == slow_rank else HEALTHY,
                section_samples=100, kernel_samples=1000,
            )
            for r in range(len(pods) * per_pod)
        ]  # fmt: skip
        report = ScoreReport.build(
            job=job, sequence=sequence, generated_at=datetime.now(UTC), window_s=every_s,
            ranks=ranks,
        )  # fmt: skip
        publisher.submit(report)
        if not publisher.flush(15):
            print(f"report {sequence} not delivered in 15 s", file=sys.stderr)
        time.sleep(every_s)
    stats = publisher.stats()
    publisher.close()
    print(json.dumps({"published": stats.published, "rejected": stats.rejected,
                      "last_error": stats.last_error}))  # fmt: skip
    return 0 if stats.published == count else 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
