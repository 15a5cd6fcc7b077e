"""Tests of PPFE boosting math (docs/formulas.md §C.3; checks §E.C1, E.C2)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from pfl_theory.ppfe_boosting import (adaboost_stumps, ensemble_coefficients, final_ensemble,
                                      fit_stumps, reweight, uniform_weights, weighted_error)
from pfl_theory.ppfe_bounds import adaboost_bound_chain


def _random(seed, n_clients=4, n_max=9):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(n_clients, n_max, generator=g, dtype=torch.float64) + 0.01
    mask = torch.rand(n_clients, n_max, generator=g) < 0.8
    mask[:, 0] = True
    w = torch.where(mask, w, torch.zeros_like(w))
    w = w / w.sum(-1, keepdim=True)
    s = torch.rand(n_clients, n_max, generator=g, dtype=torch.float64)
    return w, s, mask


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.0, 30.0))
def test_reweight_normalised_nonnegative_masked(seed, beta):
    w, s, mask = _random(seed)
    new = reweight(w, s, beta=beta, mask=mask)
    assert torch.all(new >= 0) and torch.allclose(new.sum(-1), torch.ones(4, dtype=torch.float64))
    assert torch.all(new[~mask] == 0)
    # scalar-loop reference of eq. (7)
    for i in range(4):
        num = [w[i, j].item() * math.exp(beta * s[i, j].item()) if mask[i, j] else 0.0
               for j in range(9)]
        assert np.allclose(new[i].numpy(), np.array(num) / sum(num))


def test_beta_zero_keeps_weights_and_monotone_in_beta():
    w, s, mask = _random(3)
    assert torch.allclose(reweight(w, s, beta=0.0, mask=mask), w)
    i = 0
    real = torch.nonzero(mask[i]).flatten()
    hi, lo = real[torch.argmax(s[i, real])], real[torch.argmin(s[i, real])]
    ratios = [(r := reweight(w, s, beta=b, mask=mask))[i, hi] / r[i, lo] for b in (0, 0.5, 1, 2, 5)]
    assert all(a < b for a, b in zip(ratios, ratios[1:]))  # high-score sample gains weight
    # and the high-score sample's weight itself grows with beta
    ws = [reweight(w, s, beta=b, mask=mask)[i, hi] for b in (0, 1, 3)]
    assert ws[0] < ws[1] < ws[2]


def test_binary_adaboost_equivalence():
    g = torch.Generator().manual_seed(0)
    y = torch.where(torch.rand(3, 20, generator=g) < 0.5, -1.0, 1.0).double()
    h = torch.where(torch.rand(3, 20, generator=g) < 0.7, y, -y)
    w = uniform_weights(torch.ones(3, 20, dtype=torch.bool))
    miss = (h != y).double()
    alpha = ensemble_coefficients(weighted_error(w, miss), rule="adaboost")
    ours = reweight(w, miss, beta=2 * alpha)
    classic = w * torch.exp(-alpha[:, None] * y * h)
    classic = classic / classic.sum(-1, keepdim=True)
    assert torch.allclose(ours, classic, atol=1e-14)


def test_coefficient_hand_values():
    e = torch.tensor([0.25, 0.5, 0.1], dtype=torch.float64)
    assert torch.allclose(ensemble_coefficients(e, rule="adaboost"), 0.5 * torch.log(torch.tensor([3.0, 1.0, 9.0], dtype=torch.float64)))
    assert torch.allclose(ensemble_coefficients(e, num_classes=10),
                          torch.log(torch.tensor([3.0, 1.0, 9.0], dtype=torch.float64)) + math.log(9))
    assert torch.allclose(ensemble_coefficients(e, num_classes=2), 2 * ensemble_coefficients(e, rule="adaboost"))
    assert torch.isfinite(ensemble_coefficients(torch.tensor([0.0, 1.0]))).all()


def test_final_ensemble_weighted_sum_and_normalize():
    out = torch.arange(2 * 3 * 4, dtype=torch.float64).reshape(2, 3, 4)
    a = torch.tensor([[1.0, 2.0, 0.5], [3.0, 1.0, 0.5]], dtype=torch.float64)
    h = final_ensemble(out, a)
    assert torch.allclose(h[1], 2.0 * out[0, 1] + 1.0 * out[1, 1])
    hn = final_ensemble(out, a, normalize=True)
    assert torch.allclose(hn[0], (1 * out[0, 0] + 3 * out[1, 0]) / 4)
    with pytest.raises(ValueError):
        final_ensemble(out, a[:, :2])


def test_fit_stumps_is_brute_force_optimal():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 15, 2, generator=g, dtype=torch.float64)
    y = torch.where(x[..., 0] + 0.5 * torch.randn(3, 15, generator=g, dtype=torch.float64) > 0, 1.0, -1.0).double()
    w = torch.rand(3, 15, generator=g, dtype=torch.float64)
    w = w / w.sum(-1, keepdim=True)
    f, thr, pol, err = fit_stumps(x, y, w)
    for i in range(3):
        best = min(
            sum(w[i, j].item() for j in range(15) if p * (1 if x[i, j, k] > t else -1) != y[i, j])
            for k in range(2) for t in [-math.inf] + x[i, :, k].tolist() for p in (1, -1))
        assert err[i].item() == pytest.approx(best, abs=1e-12)
        pred = pol[i] * torch.where(x[i, :, f[i]] > thr[i], 1.0, -1.0)
        assert (w[i] * (pred != y[i])).sum().item() == pytest.approx(best, abs=1e-12)


def test_adaboost_theorem2_chain_on_stumps():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 300, 3, generator=g, dtype=torch.float64)
    y = torch.where(x[..., 0] + x[..., 1] > 0, 1.0, -1.0).double()
    res = adaboost_stumps(x, y, num_rounds=30)
    for i in range(2):
        chain = adaboost_bound_chain(res["errors"][:, i].numpy())
        train = res["train_error"][:, i].numpy()
        assert np.all(train <= chain["product"] + 1e-12)
        assert np.all(chain["product"] <= chain["exp_sum"] + 1e-12)
        assert np.all(chain["exp_sum"] <= chain["exp_gamma"] + 1e-12)
    assert res["train_error"][-1].max() < res["train_error"][0].min()


def test_device_dtype_follow_inputs():
    w, s, mask = _random(5)
    assert reweight(w.float(), s.float(), beta=1.0, mask=mask).dtype == torch.float32


@pytest.mark.parametrize("call", [
    lambda: reweight(torch.ones(2, 3), torch.ones(2, 3), beta=-1.0),
    lambda: reweight(torch.zeros(2, 3), torch.ones(2, 3), beta=1.0),
    lambda: reweight(torch.ones(2, 3), torch.ones(2, 4), beta=1.0),
    lambda: ensemble_coefficients(torch.tensor([1.5])),
    lambda: ensemble_coefficients(torch.tensor([0.2]), rule="x"),
    lambda: uniform_weights(torch.zeros(2, 3, dtype=torch.bool)),
])
def test_validation(call):
    with pytest.raises(ValueError):
        call()
