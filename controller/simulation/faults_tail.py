"""Intermittent faults on a fixed period: slow ``throttle_on_s`` out of every
``throttle_on_s + throttle_off_s`` seconds (issue 38's "30% for 2 minutes in every 6").

``faults.Throttle`` draws the on/off spells from a Markov chain, so their lengths vary
(some spells last long enough for a median to see); a periodic fault is the one every
window's median hides by construction. ``PeriodicThrottle`` has ``Throttle``'s
interface and draws nothing: ``periodic(sim)`` makes a simulator's ``THROTTLING``
faults periodic (its other draws are unchanged in order; throttling's own uniform
draws are skipped).

For the simulator's owner: a sampler can draw ``throttle_on_s``/``throttle_off_s`` and
the phase (``start_s``) per run and use this instead of the chain when the scenario
names a periodic burst.
"""

from __future__ import annotations

import numpy as np

from pacekeeper.controller.simulation.faults import F64, I64, Fault, Throttle
from pacekeeper.controller.simulation.models import JobSimulator


class PeriodicThrottle(Throttle):
    """On from ``start_s`` for ``throttle_on_s``, off for ``throttle_off_s``, again."""

    def states(self, idx: I64, t: F64, f: Fault, rng: np.random.Generator) -> F64:
        del rng  # nothing random: the period is the fault
        period = f.throttle_on_s + f.throttle_off_s
        on = (t >= f.start_s) & (np.mod(t - f.start_s, period) < f.throttle_on_s)
        return np.broadcast_to(on.astype(np.float64), (idx.size, t.size)).copy()


def periodic(sim: JobSimulator) -> JobSimulator:
    """``sim`` with its throttling faults periodic (the same simulator, changed)."""
    sim._throttle = PeriodicThrottle(sim.ranks, sim.p.step_s)
    return sim
