"""The PAC-Bayes-kl certificate (verification/estimators/pac_bayes.py): Gaussian posterior
around trained weights, prior trained on a split — it holds on held-out data it never saw,
and not when the kl inverse is made too small."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from verification.estimators import certificates as C
from verification.estimators import pac_bayes as PB


def _logistic_problem(seed: int, n: int):
    g = torch.Generator().manual_seed(seed)
    w_true = torch.tensor([[2.0, -1.0, 0.5]], dtype=torch.float64)
    x = torch.randn(1, n, 3, generator=g, dtype=torch.float64)
    y = torch.sign(x @ w_true.T)[..., 0]
    y[torch.rand(y.shape, generator=g, dtype=torch.float64) < 0.1] *= -1
    return x, y


def _loss(ws, x, y):
    return torch.clamp(torch.nn.functional.softplus(-y * (x @ ws[0].T)[..., 0]), max=1.0)


def _fit(x, y, steps=200):
    w = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.05)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.softplus(-y * (x @ w.T)[..., 0]).mean().backward()
        opt.step()
    return [w.detach()]


def test_pac_bayes_certificate_holds_on_held_out_data_it_never_saw(monkeypatch):
    x, y = _logistic_problem(1, 400)
    prior, post = _fit(x[:, :200], y[:, :200]), _fit(x, y)
    xb, yb = x[:, 200:], y[:, 200:]

    def certify():
        return PB.pac_bayes_certificate(post, prior, lambda ws: _loss(ws, xb, yb).mean(1).numpy(),
                                        200, delta=0.04, delta_mc=0.01, n_mc=30, seed=0)
    cert = certify()
    x_ho, y_ho = _logistic_problem(2, 20000)          # never seen by the certificate
    g = torch.Generator().manual_seed(5)
    sigma = float(cert.name.split("σ = ")[1].split(" ")[0])
    risk_q = np.mean([float(_loss([post[0] + sigma * torch.randn(1, 3, generator=g,
                                                                 dtype=torch.float64)],
                                  x_ho, y_ho).mean()) for _ in range(50)])
    assert risk_q <= cert.value < 1.0 and cert.delta == pytest.approx(0.05)
    # mutation: a kl inverse that is too small no longer certifies the held-out risk
    monkeypatch.setattr(C, "kl_inverse_upper", lambda q, c: max(q - 0.1, 0.0))
    assert certify().value < risk_q
