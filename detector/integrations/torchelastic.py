"""torchrun / TorchElastic: what a restart keeps and what it changes in a job's identity.

torchrun restarts every worker of a job when one fails (``--max-restarts``), in new
processes with the same ``TORCHELASTIC_RUN_ID`` and ``TORCHELASTIC_RESTART_COUNT`` one
higher; ranks, and the host that is rank 0, may change. The detector needs no code for
it, and this module only says what it does (``describe`` shows it for this process):

* **job**: unchanged across restarts. The name comes from ``PACEKEEPER_JOB_NAME`` (or
  the platform's job-name variables), else, on a machine outside Kubernetes and Ray, the
  run id (``identity.default_job``), so every attempt reports as one job;
* **incarnation**: new at every restart, ``<base>.r<restart count>`` where ``base`` is
  ``PACEKEEPER_INCARNATION`` or a fresh time-and-random id (``identity.elastic_incarnation``).
  The report sequence starts again at 0 in the new processes; the receivers (the
  StragglerReport status, the ScoreBoard) take a new incarnation as a restart and keep
  its reports, where an unchanged one would make them drop the reports as duplicates;
* **ranks**: read at every report (``initialize`` may run before ``init_process_group``),
  so the restarted world's ranks and size are the ones reported;
* **the reporting rank**: the process whose ``RANK`` is 0 in the new attempt.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import env, identity


@dataclass(frozen=True, slots=True)
class ElasticAttempt:
    """This process's torchrun attempt as the detector sees it."""

    run_id: str | None
    restart_count: int | None
    job_key: str
    incarnation: str | None
    """What the reporter will use (None outside torchrun: the reporter's own default)."""


def describe() -> ElasticAttempt:
    """The job key and incarnation a Detector started now would report with (outside Ray;
    a new incarnation at each call unless ``PACEKEEPER_INCARNATION`` is set)."""
    return ElasticAttempt(
        run_id=env.elastic_run_id(),
        restart_count=env.elastic_restart_count(),
        job_key=identity.default_job(None).key,
        incarnation=identity.elastic_incarnation(),
    )
