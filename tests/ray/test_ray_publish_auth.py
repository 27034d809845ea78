"""A job writes only its own reports on the ScoreBoard: another job (a second driver of
the same cluster) can neither register as it nor publish for it, and history planted in
the GCS store is never restored."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import driver_job, register

from pacekeeper.controller.simulation.synthetic import synthetic_report
from pacekeeper.detector.reporters.publish_tokens import PublishRefused, UnknownToken
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

HERE = Path(__file__).parent


def test_another_job_can_neither_register_nor_publish_for_this_job(
    ray_cluster: str, badge: Any
) -> None:
    import ray

    name = f"auth-board-{uuid.uuid4().hex[:6]}"
    board = ray.remote(ScoreBoard).options(name=name, num_cpus=0).remote(persist=False)
    token = register(board, badge)
    job = driver_job("victim")
    good = synthetic_report(job=job, sequence=0)
    ray.get(board.publish.remote(good.to_json(), token, "a"))

    class Named:  # a named actor of this job: any driver may get its handle
        def ping(self) -> bool:
            return True

    named_name = f"victim-named-{uuid.uuid4().hex[:6]}"
    named: Any = ray.remote(Named).options(name=named_name, num_cpus=0).remote()
    ray.get(named.ping.remote())
    done = subprocess.run(
        [sys.executable, str(HERE / "other_job.py"), "forger", ray_cluster, name,
         "pacekeeper-tests", job.key, named_name],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    me = out.pop("me")
    assert me != job.key
    assert all(v.startswith(("PublishRefused:", "UnknownToken:")) for v in out.values()), out
    assert "a job registers only itself" in out["register_victim_with_own_badge"]
    for key in ("register_victim_with_its_named_actor", "register_self_with_victims_named_actor"):
        assert "not a JobBadge" in out[key] and "named actor" in out[key], out[key]
    assert "needs the token" in out["publish_without_token"]
    assert "older than the board" in out["publish_with_victim_job_key"]
    assert out["publish_with_guessed_token"].startswith("UnknownToken:")
    assert f"registered for {me!r}, report.job is {job.key!r}" in out["publish_with_own_token"]
    # Nothing of it landed: the victim's history is its one report, its token still works.
    assert ray.get(board.window.remote(job.key)) == [good.to_wire()]
    stats = ray.get(board.stats.remote())
    assert stats["refused"] == 4 and stats["registration_refused"] == 3
    assert stats["registered"] == 2  # the victim, and the forger as itself
    later = synthetic_report(job=job, sequence=1)
    assert ray.get(board.publish.remote(later.to_json(), token, "a"))["outcome"] == "accepted"
    ray.kill(named)
    ray.kill(board)


def test_a_publish_without_this_jobs_current_token_is_refused(ray_cluster: str, badge: Any) -> None:
    import ray

    board = ray.remote(ScoreBoard).options(num_cpus=0).remote(persist=False)
    job = driver_job("self")
    report = synthetic_report(job=job, sequence=0).to_json()
    with pytest.raises(UnknownToken):  # never registered
        ray.get(board.publish.remote(report, "a" * 43))
    first = register(board, badge)
    second = register(board, badge)  # a registration replaces the token
    with pytest.raises(UnknownToken):
        ray.get(board.publish.remote(report, first))
    with pytest.raises(PublishRefused, match="needs the token"):
        ray.get(board.publish.remote(report, None))
    assert ray.get(board.publish.remote(report, second))["outcome"] == "accepted"
    assert ray.get(board.stats.remote())["refused"] == 3
    ray.kill(board)


def test_history_planted_in_the_gcs_store_is_never_restored(ray_cluster: str, badge: Any) -> None:
    """Any driver can write the GCS store: a report planted under the board's keys (or
    a stored value edited) is dropped when the board reloads, and counted."""
    import ray
    from ray.experimental import internal_kv

    prefix = f"plant-{uuid.uuid4().hex[:6]}/"
    key = uuid.uuid4().hex * 2
    actor = ray.remote(ScoreBoard).options(num_cpus=0)
    board = actor.remote(store_prefix=prefix, store_key=key)
    job = driver_job("planted")
    token = register(board, badge)
    for seq in range(2):
        ray.get(board.publish.remote(synthetic_report(job=job, sequence=seq).to_json(), token))
    ray.kill(board)
    forged = synthetic_report(job=job, sequence=2, slow={0: 0.05})
    entry = {"job": job.key, "counter": 2, "incarnation": None, "sequence": 2,
             "generatedAt": forged.generated_at.isoformat(), "receivedAt": 0.0, "size": 1,
             "report": forged.to_wire()}  # fmt: skip
    kv_key = f"{prefix}{job.key}\x00entry/2"
    for value in (json.dumps(entry), json.dumps({"mac": "0" * 64, "value": json.dumps(entry)})):
        internal_kv._internal_kv_put(kv_key, value, overwrite=True, namespace="pacekeeper")
        reborn = actor.remote(store_prefix=prefix, store_key=key)
        assert [w["sequence"] for w in ray.get(reborn.window.remote(job.key))] == [0, 1]
        assert ray.get(reborn.stats.remote())["restore_refused"] == 1
        assert internal_kv._internal_kv_get(kv_key, namespace="pacekeeper") is None
        ray.kill(reborn)
    other_key = actor.remote(store_prefix=prefix, store_key=uuid.uuid4().hex * 2)
    assert ray.get(other_key.window.remote(job.key)) == [], "another key restores nothing"
    ray.kill(other_key)
