"""The tolerance helpers the comparison tests share (tests/helpers/numerics.py) can fail."""

from types import SimpleNamespace

import numpy as np
import pytest

from helpers.numerics import (
    FLOAT32_UNIT_ROUNDOFF,
    albert_budget,
    assert_normwise_close,
    float32_budget,
    max_normwise_difference,
)


def test_budget_follows_its_formula():
    # 2 evaluations x conditioning 4 x depth 15 x sqrt(100) x u
    assert float32_budget(depth=15, width=100) == pytest.approx(2 * 4 * 15 * 10 * 2.0**-24)
    tiny = SimpleNamespace(
        num_hidden_layers=2, embedding_size=16, hidden_size=32, intermediate_size=64
    )
    # 1 (E->H) + 6 x 2 layers + 2 (pooler, head) = 15 reductions, the longest 96 long
    assert albert_budget(tiny, 96) == float32_budget(depth=15, width=96)
    assert albert_budget(tiny, 96, head=False) == float32_budget(depth=13, width=96)


def test_the_budget_separates_rounding_from_defects():
    rng = np.random.RandomState(0)
    x, w = rng.randn(64, 96).astype(np.float32), rng.randn(96, 32).astype(np.float32)
    exact = x.astype(np.float64) @ w.astype(np.float64)
    # float32 in another summation order: within the budget of one reduction
    reordered = (x[:, ::-1] @ w[::-1]).astype(np.float64)
    assert max_normwise_difference(reordered, exact) <= float32_budget(depth=1, width=96)
    # a defect (one dropped term of 96) is far outside even a deep model's budget
    dropped = x[:, 1:].astype(np.float64) @ w[1:].astype(np.float64)
    assert max_normwise_difference(dropped, exact) > 10 * float32_budget(depth=30, width=4096)


def test_normwise_comparison_reports_and_fails():
    assert_normwise_close([10.0, 1e-9], [10.0 + 1e-6, -1e-9], rtol=1e-6)  # tiny entries flip sign
    with pytest.raises(AssertionError, match=r"differ by 0.01 of their magnitude 10"):
        assert_normwise_close([10.0, 1.0], [10.0, 1.1], rtol=1e-6)
    with pytest.raises(AssertionError):
        assert_normwise_close(np.zeros(3), np.zeros(4), rtol=1.0)
    assert np.finfo(np.float32).eps / 2 == FLOAT32_UNIT_ROUNDOFF
