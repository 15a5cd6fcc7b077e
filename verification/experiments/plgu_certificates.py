"""Certificates beside PLGU's vacuous generalization bounds (verification/checks/bounds_plgu.py):
for the trained nets of Theorems 1–3, what a held-out test-set bound and a PAC-Bayes-kl bound
certify about their gap at the same sample size (verification/estimators/certificates.py,
pac_bayes.py).  Each returns the ``{"value", "name", "delta"}`` record results.json stores."""

from __future__ import annotations

from typing import Callable

import torch

from verification.estimators import certificates, pac_bayes

__all__ = ["raw_gap", "test_set_gap", "pac_bayes_gap"]

Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def raw_gap(loss: Loss, f_tr, y_tr, f_ho, y_ho) -> float:
    """held-out − training mean loss, unadjusted (what a certificate of the gap bounds)."""
    return float(loss(f_ho, y_ho).mean() - loss(f_tr, y_tr).mean())


def test_set_gap(loss: Loss, f_tr, y_tr, f_ce, y_ce, label: str, per_client: int,
                 delta: float) -> dict:
    """Langford's held-out bound on the mean client risk (losses in [0, 1], ``per_client``
    fresh samples per client never seen by training or by the measurement) minus the
    training loss: a certificate of the gap."""
    upper, _ = certificates.test_set_upper(loss(f_ce, y_ce).numpy(), delta)
    train = float(loss(f_tr, y_tr).mean())
    return certificates.Certificate(
        upper - train, f"held-out kl bound on the {label} model's mean client risk (Langford "
                       f"test-set bound, {per_client} fresh samples per client) minus its "
                       f"training loss", delta).as_dict()


def pac_bayes_gap(loss: Loss, train: Callable[[list, Callable], None],
                  forward: Callable[[list, torch.Tensor], torch.Tensor], init: list,
                  trained: list, x_tr, y_tr, *, seed: int, delta: float) -> dict:
    """PAC-Bayes-kl certificate of a personalized net's gap: the prior trained by ``train``
    from the same initialisation ``init`` on the first half of each client's data, the bound
    on the second half, Q around the ``trained`` weights, minus their training loss
    (δ split 0.8 / 0.2 between the PAC-Bayes and the Monte-Carlo inequality)."""
    half = x_tr.shape[1] // 2
    prior = [w.clone() for w in init]
    train(prior, lambda: torch.nn.functional.softplus(
        -y_tr[:, :half] * forward(prior, x_tr[:, :half])).mean())
    x_b, y_b = x_tr[:, half:], y_tr[:, half:]
    with torch.no_grad():
        cert = pac_bayes.pac_bayes_certificate(
            trained, prior, lambda ws: loss(forward(ws, x_b), y_b).mean(1).numpy(),
            x_b.shape[1], delta=0.8 * delta, delta_mc=0.2 * delta, n_mc=30, seed=seed)
        train_loss = float(loss(forward(trained, x_tr), y_tr).mean())
    return certificates.Certificate(cert.value - train_loss, f"{cert.name}, minus the trained "
                                    f"net's training loss", cert.delta).as_dict()
