"""algorithms/engine/model_base.py: the dense layer and the torch.nn-default initialisation
every built-in network uses."""

import math

import torch

from algorithms.engine.model_base import _dense, _uniform


def test_dense_is_x_w_plus_b_per_client():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 4, generator=gen, dtype=torch.float64)
    w = torch.randn(3, 4, 2, generator=gen, dtype=torch.float64)
    b = torch.randn(3, 2, generator=gen, dtype=torch.float64)
    out = _dense(x, w, b)
    for i in range(3):   # float64, 4-term sums in another order
        torch.testing.assert_close(out[i], x[i] @ w[i] + b[i], rtol=0, atol=1e-14)


def test_uniform_is_bounded_by_one_over_sqrt_fan_in_and_seeded():
    a = _uniform((2000,), 25, torch.Generator().manual_seed(1))
    assert float(a.abs().max()) <= 1 / math.sqrt(25)
    assert float(a.abs().max()) > 0.9 / math.sqrt(25)      # fills the interval
    assert torch.equal(a, _uniform((2000,), 25, torch.Generator().manual_seed(1)))
