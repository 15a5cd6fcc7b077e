"""Oracle building blocks (verification/oracles/common.py) against hand-computed values."""

import torch

from algorithms.engine.models import MLR
from verification.oracles import common as o


def test_mean_is_the_weighted_average_of_the_list():
    a = {"w": torch.tensor([[1.0, 2.0]], dtype=torch.float64)}
    b = {"w": torch.tensor([[3.0, 6.0]], dtype=torch.float64)}
    assert torch.equal(o.mean([a, b])["w"], torch.tensor([[2.0, 4.0]], dtype=torch.float64))
    assert torch.allclose(o.mean([a, b], [1, 3])["w"],
                          torch.tensor([[2.5, 5.0]], dtype=torch.float64), rtol=0, atol=1e-15)


def test_grad_is_the_softmax_regression_gradient():
    model = MLR(2, 3)
    p = {"fc.weight": torch.zeros(1, 2, 3, dtype=torch.float64),
         "fc.bias": torch.zeros(1, 3, dtype=torch.float64)}
    x = torch.tensor([[[1.0, 2.0]]], dtype=torch.float64)
    y = torch.tensor([[2]])
    g = o.grad(model, p, x, y)
    # at zero logits: (softmax − onehot) = (1/3, 1/3, −2/3); ∇W = x ⊗ that, ∇b = that
    r = torch.tensor([1 / 3, 1 / 3, -2 / 3], dtype=torch.float64)
    assert torch.allclose(g["fc.bias"][0], r, atol=1e-15)
    assert torch.allclose(g["fc.weight"][0], torch.outer(x[0, 0], r), atol=1e-15)
    assert set(o.grad(model, p, x, y, keys=["fc.bias"])) == {"fc.bias"}


def test_sgd_steps_only_the_named_keys():
    fed, model = o.default_setting(0)
    p = o.row(model.init(1, seed=0, dtype=torch.float64), 0)
    batches = fed.sample_batches(2, 4, torch.Generator().manual_seed(0))
    q = o.sgd(model, p, fed, batches, range(2), 0, 0.1, keys=["fc2.bias"])
    assert torch.equal(q["fc1.weight"], p["fc1.weight"])
    assert not torch.equal(q["fc2.bias"], p["fc2.bias"])
