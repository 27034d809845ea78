"""The Ray-side runner's state in the GCS store is signed: a state another driver wrote,
edited, replayed or deleted stops the runner — no decision, no action, a recorded
reason — and stays in place as evidence. An older version's unsigned state is taken
once and signed."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from controller_helpers import (
    STATE_KEY_BYTES,
    Clock,
    placed_report,
    ray_policy,
    start_workers,
    where,
)
from ray_helpers import driver_job, register

from pacekeeper.controller.core.policy import ActionKind
from pacekeeper.controller.core.state import State
from pacekeeper.controller.sources.ray_scoreboard import (
    KV_NAMESPACE,
    KvStateStore,
    PassResult,
    RayRunner,
    ScoreBoardSource,
)
from pacekeeper.controller.sources.signed_state import seal
from pacekeeper.detector.reporters.ray_scoreboard import ScoreBoard

LADDER = {
    "notify": {"enabled": True, "timeoutS": 60},
    "taintNode": {"enabled": True, "timeoutS": 60},
}


class _Run:
    def __init__(self, badge: Any, *, accept_unsigned: bool = False) -> None:
        import ray

        self.board = ray.remote(ScoreBoard).options(num_cpus=0).remote(persist=False)
        self.token = register(self.board, badge)
        self.workers = start_workers(1)
        self.placements = where(self.workers)
        self.clock = Clock()
        self.key = f"test/state/{uuid.uuid4().hex[:6]}"
        self.store = KvStateStore(self.key, signing_key=STATE_KEY_BYTES,
                                  accept_unsigned=accept_unsigned)  # fmt: skip
        self.runner = RayRunner(ray_policy(LADDER), source=ScoreBoardSource(self.board),
                                store=self.store, clock=self.clock)  # fmt: skip
        self.seq = 0

    def step(self) -> PassResult:
        import ray

        report = placed_report(driver_job("state"), self.seq, self.clock.now, self.placements,
                               slow={2: 0.3})  # fmt: skip
        ray.get(self.board.publish.remote(report.to_json(), self.token, "a"))
        self.seq += 1
        result = self.runner.run_once()
        self.clock.advance(61)
        return result

    def raw(self) -> bytes | None:
        from ray.experimental import internal_kv

        return internal_kv._internal_kv_get(self.key, namespace=KV_NAMESPACE)  # type: ignore[no-any-return]

    def write(self, value: str | bytes | None) -> None:
        from ray.experimental import internal_kv

        if value is None:
            internal_kv._internal_kv_del(self.key, namespace=KV_NAMESPACE)
        else:
            internal_kv._internal_kv_put(self.key, value, overwrite=True, namespace=KV_NAMESPACE)

    def close(self) -> None:
        import ray

        for a in [*self.workers, self.board]:
            ray.kill(a)


def _acts(result: PassResult) -> list[ActionKind | None]:
    return [d.action for d in result.decisions if d.verdict.value == "act"]


def _edited(run: _Run, first: bytes) -> bytes:
    doc = json.loads(run.raw() or b"{}")
    body = json.loads(doc["body"])
    body["cluster"] = {}  # forget the marks and the budget spent: the point of a forgery
    doc["body"] = json.dumps(body, separators=(",", ":"), sort_keys=True)
    return json.dumps(doc).encode()


def _unsigned(run: _Run, first: bytes) -> bytes:
    return json.dumps(State().to_dict()).encode()


def _other_key(run: _Run, first: bytes) -> bytes:
    return seal(State().to_dict(), key=b"\x07" * 32, kv_key=run.key, generation=99).encode()


def _replayed(run: _Run, first: bytes) -> bytes:
    return first  # the value of the first pass, written back after the second


def _deleted(run: _Run, first: bytes) -> None:
    return None


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (_edited, "signature does not verify"),
        (_unsigned, "not signed"),
        (_other_key, "signed with key"),
        (_replayed, "went back from generation 2 to 1"),
        (_deleted, "disappeared"),
    ],
    ids=["edited", "unsigned", "other-key", "replayed", "deleted"],
)
def test_a_state_the_runner_did_not_write_stops_it_and_stays_as_evidence(
    ray_cluster: str,
    badge: Any,
    tamper: Callable[[_Run, bytes], bytes | None],
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run = _Run(badge)
    assert _acts(run.step()) == [ActionKind.NOTIFY]
    first = run.raw()
    assert first is not None and json.loads(first)["generation"] == 1
    assert _acts(run.step()) == [ActionKind.TAINT_NODE]
    forged = tamper(run, first)
    run.write(forged)
    with caplog.at_level(logging.ERROR):
        results = [run.step() for _ in range(3)]
    for result in results:
        assert result.halted is not None and reason in result.halted
        assert result.decisions == () and result.drained == result.restarted == []
    assert run.raw() == forged, "the refused value is left as it was found"
    assert run.runner.stats()["state_refused"] == 3
    said = [
        r for r in caplog.records if r.getMessage() == "controller state refused, taking no action"
    ]
    assert len(said) == 1, "said once per cause, not every pass"
    run.close()


def test_an_older_versions_unsigned_state_is_taken_once_and_signed(
    ray_cluster: str, badge: Any
) -> None:
    run = _Run(badge, accept_unsigned=True)
    legacy = json.dumps(State().to_dict())  # what a pacekeeper before signing stored
    run.write(legacy)
    assert _acts(run.step()) == [ActionKind.NOTIFY]
    stored = json.loads(run.raw() or b"{}")
    assert stored["format"] == "pacekeeper.dev/signed-state/v1"
    run.write(legacy)  # an unsigned state again: no longer an upgrade, a forgery
    result = run.step()
    assert result.halted is not None and "not signed" in result.halted
    run.close()
