"""``confirm: probe``: no node action without the job's confirmation probe singling out
the node's slow ranks.

Scores say a rank is slower than its peers, not why. Before its first node step in an
episode the controller asks the job (the StragglerReport's ``spec.control.probe``, the
ScoreBoard's control on Ray) to run the probe on every rank: the same fixed GEMM,
memory-copy and host-to-device work (``detector.probe``), at the job's next report,
which carries every rank's throughputs. The node's suspect ranks are compared with the
job's other ranks on the same device kind: a suspect below ``probe.slowerThan`` of their
median on any part confirms the hardware, and the ladder goes on; none below clears it
(the slowness is the rank's share of the work), and the episode takes no node action.
Unanswered after ``probe.timeoutS`` (a job without runtime control), the request is made
again under a new id; no node action meanwhile. In observe and dry-run modes nothing is
asked and the would-be steps are recorded as if confirmed, so a preview still shows
the ladder.

The answer is the job's word, like its scores: it can only ever move the ladder of a
node the job's own pods run on (nodes come from the API).

Pure: the engine passes the ladder, the report and the time.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from pacekeeper.controller.core.decisions import Reason
from pacekeeper.controller.core.policy_hardware import ProbeCheck
from pacekeeper.controller.core.state import LadderState
from pacekeeper.detector.score_report import ProbeEvidence, ScoreReport

PARTS = ("gemm_tflops", "memory_gbps", "h2d_gbps", "cpu_gflops")
"""The probe's rates, each compared on its own (a slow link shows in one part only)."""


@dataclass(frozen=True, slots=True)
class Gate:
    """What the probe lets the ladder do now."""

    proceed: bool
    ladder: LadderState
    evidence: dict[str, Any] = field(default_factory=dict)
    reason: Reason | None = None
    """Why not (``AwaitingProbe``, ``ProbeCleared``)."""
    recheck: datetime | None = None


def probe_id(job: str, node: str, at: datetime) -> str:
    """A request id the CRD accepts (letters, digits, '.', '_', '-'; at most 64), the
    same for the same job, node and time: a repeated decision asks the same question."""
    digest = hashlib.sha256(f"{job}\0{node}\0{at.isoformat()}".encode()).hexdigest()[:16]
    return f"p{at.strftime('%Y%m%dT%H%M%S')}-{digest}"


def gate(
    lad: LadderState,
    report: ScoreReport,
    suspects: Sequence[int],
    check: ProbeCheck,
    *,
    job: str,
    node: str,
    now: datetime,
    factors: Mapping[int, float] | None = None,
    spread: float = 0.0,
) -> Gate:
    """Whether the node step may be taken; the ladder with the request or answer."""
    if lad.probe_confirmed is not None and lad.probe_id is not None:
        ev = {"probe": {"id": lad.probe_id, "confirmed": lad.probe_confirmed}}
        if lad.probe_confirmed:
            return Gate(True, lad, ev)
        return Gate(False, lad, ev, Reason.PROBE_CLEARED)
    asked_at = lad.probe_asked_at
    if lad.probe_id is not None and asked_at is not None:
        answers = {
            r.rank: r.probe
            for r in report.ranks
            if r.probe is not None and r.probe.id == lad.probe_id
        }
        if answers:
            confirmed, figures = judge(answers, suspects, check.slower_than, factors, spread)
            if confirmed is not None:
                lad = replace(lad, probe_confirmed=confirmed)
                ev = {"probe": {"id": lad.probe_id, "confirmed": confirmed, **figures}}
                return Gate(confirmed, lad, ev, None if confirmed else Reason.PROBE_CLEARED)
        due = asked_at + timedelta(seconds=check.timeout_s)
        if now < due:
            ev = {"probe": {"request": lad.probe_id, "askedAt": asked_at.isoformat()}}
            return Gate(False, lad, ev, Reason.AWAITING_PROBE, due)
    # Not asked yet, or unanswered in time: ask (again, under a new id).
    lad = replace(lad, probe_id=probe_id(job, node, now), probe_asked_at=now)
    assert lad.probe_id is not None
    ev = {"probe": {"request": lad.probe_id, "askedAt": now.isoformat()}}
    if asked_at is not None:
        ev["probe"]["unansweredSince"] = asked_at.isoformat()
    due = now + timedelta(seconds=check.timeout_s)
    return Gate(False, lad, ev, Reason.AWAITING_PROBE, due)


GPU_PARTS = frozenset({"gemm_tflops", "memory_gbps"})
"""The parts a GPU's learned speed factor explains (its clocks, its memory)."""


def judge(
    answers: Mapping[int, ProbeEvidence],
    suspects: Sequence[int],
    slower_than: float,
    factors: Mapping[int, float] | None = None,
    spread: float = 0.0,
) -> tuple[bool | None, dict[str, Any]]:
    """(confirmed, figures): each suspect's rate over its peers' median, per part; None
    when no suspect can be compared (none answered, or no other rank of its device
    kind did: a one-node job has nobody to tell its hardware from).

    GPUs of one model differ by up to ``spread`` on identical work, always the same way.
    So a GPU part of a rank whose GPU has a learned factor (``factors``: rank -> factor,
    from the memory of hardware) is divided by it, peers' too, and confirms below
    ``slower_than``; any other part confirms only below ``1 - spread`` as well: a healthy
    GPU at the slow end of the spread is no hardware fault (the simulator found one of a
    slow host's eight GPUs always confirming its node at 0.9 without this)."""
    known = factors or {}
    suspect_set = set(suspects)
    ratios: dict[str, dict[str, float]] = {}
    peers_of: dict[str, int] = {}
    confirmed = False
    unseen_bar = min(slower_than, 1.0 - spread)

    def rate(rank: int, p: ProbeEvidence, part: str) -> float | None:
        value: float | None = getattr(p, part)
        if value is None or part not in GPU_PARTS or rank not in known:
            return value
        return float(value) / known[rank]

    for rank in sorted(suspect_set & answers.keys()):
        mine = answers[rank]
        peers = [
            (r, p) for r, p in answers.items() if r not in suspect_set and p.device == mine.device
        ]
        peers_of[mine.device] = len(peers)
        row: dict[str, float] = {}
        for part in PARTS:
            value = rate(rank, mine, part)
            theirs = [v for r, p in peers if (v := rate(r, p, part))]
            if value is None or not theirs:
                continue
            ratio = row[part] = round(value / statistics.median(theirs), 4)
            bar = slower_than if part in GPU_PARTS and rank in known else unseen_bar
            confirmed = confirmed or ratio < bar
        if row:
            ratios[str(rank)] = row
    figures: dict[str, Any] = {
        "ratios": ratios,
        "peers": peers_of,
        "slowerThan": slower_than,
        "unseenBelow": round(unseen_bar, 4),
        "calibrated": sorted(str(r) for r in suspect_set & known.keys()),
    }
    if not ratios:
        return None, figures
    figures["worst"] = min(min(row.values()) for row in ratios.values())
    return confirmed, figures
