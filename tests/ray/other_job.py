"""Another Ray job of the test cluster (its own driver process), for the trust tests.

other_job.py bystander ADDRESS NAME
    leaves a detached actor NAME (namespace pacekeeper-tests-others) running: a real
    Ray worker of a job that is not the reporting one; prints {"pid", "node"}.
other_job.py forger ADDRESS BOARD NAMESPACE VICTIM_JOB VICTIM_ACTOR
    tries every way it has to write the victim job's reports on the named board;
    prints one JSON object {attempt: outcome}.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Callable
from typing import Any

import ray


def bystander(address: str, name: str) -> None:
    ray.init(address=address, namespace="pacekeeper-tests-others", log_to_driver=False)

    class Bystander:
        def where(self) -> tuple[int, str]:
            return os.getpid(), ray.get_runtime_context().get_node_id()

    actor: Any = ray.remote(Bystander).options(name=name, lifetime="detached", num_cpus=0)
    pid, node = ray.get(actor.remote().where.remote(), timeout=60)
    print(json.dumps({"pid": pid, "node": node, "job": ray.get_runtime_context().get_job_id()}))


def forger(address: str, board_name: str, namespace: str, victim: str, victim_actor: str) -> None:
    from pacekeeper.controller.simulation.synthetic import synthetic_report
    from pacekeeper.detector.reporters.ray_badge import create_badge
    from pacekeeper.detector.score_report import JobIdentity, Platform

    ray.init(address=address, namespace=namespace, log_to_driver=False)
    me = f"ray:{ray.get_runtime_context().get_job_id()}"
    board = ray.get_actor(board_name)
    named = ray.get_actor(victim_actor)  # any driver can get a named actor's handle
    mine = create_badge(60)
    report = synthetic_report(
        job=JobIdentity(platform=Platform.RAY, name="forged", ray_job_id=victim[4:]),
        sequence=99, slow={0: 0.1},
    ).to_json()  # fmt: skip

    def attempt(call: Callable[[], Any]) -> str:
        try:
            return f"accepted: {ray.get(call(), timeout=60)}"
        except Exception as e:  # what the board said, as the forger sees it
            cause = getattr(e, "cause", None) or e
            return f"{type(cause).__name__}: {cause}"[:400]

    own = ray.get(board.register.remote(me, mine))["token"]
    out = {
        "register_victim_with_own_badge": attempt(lambda: board.register.remote(victim, mine)),
        "register_victim_with_its_named_actor": attempt(
            lambda: board.register.remote(victim, named)
        ),
        "register_self_with_victims_named_actor": attempt(lambda: board.register.remote(me, named)),
        "publish_without_token": attempt(lambda: board.publish.remote(report)),
        "publish_with_victim_job_key": attempt(lambda: board.publish.remote(report, victim)),
        "publish_with_guessed_token": attempt(
            lambda: board.publish.remote(report, secrets.token_urlsafe(32))
        ),
        "publish_with_own_token": attempt(lambda: board.publish.remote(report, own)),
        "me": me,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    {"bystander": bystander, "forger": forger}[sys.argv[1]](*sys.argv[2:])
