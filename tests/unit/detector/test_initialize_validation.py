"""Arbitrary arguments to initialize: accepted when valid, else a ValueError naming them."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pacekeeper.detector import Detector
from pacekeeper.detector.run_config import SCORE_NAMES

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)


def _try(**kwargs: Any) -> str | None:
    """None if initialize accepted the arguments, else the ValueError's message."""
    Detector.shutdown()
    try:
        Detector.initialize(kernel_timing="none", **kwargs)
    except ValueError as e:
        return str(e)
    finally:
        Detector.shutdown()
    return None


@settings(max_examples=150, deadline=None)
@given(ANY)
def test_report_time_interval_is_a_finite_number_from_zero(value: Any) -> None:
    error = _try(report_time_interval=value)
    ok = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0  # 0 as in NVRx: every max(1, profiling_interval) iterations
    )
    assert (error is None) == ok
    if error is not None:
        assert "report_time_interval" in error


@settings(max_examples=150, deadline=None)
@given(ANY)
def test_profiling_interval_is_an_integer_from_zero(value: Any) -> None:
    error = _try(profiling_interval=value)
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    assert (error is None) == ok
    if error is not None:
        assert "profiling_interval" in error


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SCORE_NAMES), st.text(max_size=12)), max_size=3))
def test_scores_to_compute_accepts_only_known_names(names: list[str]) -> None:
    error = _try(scores_to_compute=names)
    # "all" in a list means every score, as the bare string does (docs/detector.md).
    unknown = [n for n in names if n not in SCORE_NAMES and n != "all"]
    assert (error is None) == (not unknown)
    if error is not None:
        assert repr(unknown[0]) in error and "scores_to_compute" in error
