"""``peers._lowest`` (a rank's lowest score against its peers, issue 42) reads what
``np.nanmin`` over each row reads: NaN only for a row with nothing measured."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pacekeeper.controller.core.peers import _lowest


@pytest.mark.parametrize("shape", [(1, 2), (9, 3), (200, 10), (64, 17)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lowest_is_the_nanmin_of_each_row(shape: tuple[int, int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.random(shape)
    m[rng.random(shape) < 0.4] = np.nan
    m[0, :] = np.nan
    if shape[0] > 1:
        m[1, :] = 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        expected = np.nanmin(m, axis=1)
    got = _lowest(m)
    assert got.dtype == np.float64 and got.tobytes() == expected.tobytes()
    plain = [min((v for v in row if not np.isnan(v)), default=np.nan) for row in m.tolist()]
    assert np.array_equal(got, np.array(plain), equal_nan=True)
