"""``safety``: the error rate a policy states for its disruptive steps.

A disruptive step (restartRank, taintNode, drainNode, cordonNode, a Ray restart) waits
until the sequential test of ``sequential.py`` passes for the rank it is taken for; the
test's threshold comes from the rate stated here (docs/decision-rule.md derives it).
Separate from ``policy.py`` so the rule's one setting and its bounds sit beside nothing
else.
"""

from __future__ import annotations

import math
from typing import Annotated

from pydantic import AfterValidator, Strict

# Relative on purpose, as in policy.py: mypy sees PolicyModel's type only this way.
from .policy_types import PolicyModel, _bounds

MIN_RATE = 1e-6
"""Below one false disruption per million GPU-days a job never gathers the evidence in
its lifetime (the threshold grows with the log of the inverse rate, the detection delay
with the threshold)."""
MAX_RATE = 1.0
"""Above one per GPU-day the test no longer protects anything: a 1,024-GPU job would
restart a healthy rank every ~90 s on average."""
RECOMMENDED_RATE = 1e-3
"""The recommended policy's figure (docs/policies/enforce-recommended.yaml): on 1,024
GPUs about one false disruption a day at the bound, far fewer in practice."""


def _rate(v: float) -> float:
    if not math.isfinite(v) or not MIN_RATE <= v <= MAX_RATE:
        raise ValueError(
            f"must be within [{MIN_RATE:g}, {MAX_RATE:g}] false disruptions per GPU-day "
            f"(got {v:g}); {RECOMMENDED_RATE:g} is the recommended figure"
        )
    return v


Rate = Annotated[
    float, Strict(), AfterValidator(_rate), _bounds(minimum=MIN_RATE, maximum=MAX_RATE)
]


class DisruptionSafety(PolicyModel):
    """The false-disruption rate a policy promises for its disruptive steps."""

    false_disruptions_per_gpu_day: Rate | None = None
    """Disruptive steps (restartRank, taintNode, drainNode, cordonNode) only once a
    sequential test on the rank's deviation from its peers passes at this rate of false
    disruptions per GPU-day, with the noise scale learnt from the job's own reports
    (docs/decision-rule.md). null: off, the thresholds and persistence alone decide (as
    before). Recommended: 0.001. Notices are never held by it."""
