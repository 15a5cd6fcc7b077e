"""Concrete instances meet the PEP's constraints exactly (verification/worst_case/instances.py,
quadratic_clients.py): otherwise "measured <= worst case" would compare different problems."""

from __future__ import annotations

import numpy as np
import pytest

from pfl_theory import oracle_methods as om
from verification.worst_case import instances, quadratic_clients as qc
from verification.worst_case.problems import Setting


@pytest.mark.parametrize("method,sigma_sq", [("pfedme", 0.0), ("pfedme", 2.5), ("fedavg", 1.0)])
def test_instance_is_normalised_to_delta0_and_sigma(method, sigma_sq):
    s = Setting(method=method, clients=3, lam=2.0, mu=0.2, L=1.0, sigma_sq=sigma_sq, Delta0=4.0)
    clients, w_star, w0 = instances.instance(s, seed=3)
    assert ((w0 - w_star) ** 2).sum() == pytest.approx(4.0, rel=1e-12)
    grads = [om.envelope_grad(c, w_star, s.lam) if method == "pfedme" else c.grad(w_star)
             for c in clients]
    assert np.abs(np.mean(grads, 0)).max() < 1e-12                  # w* is the optimum
    assert np.mean([g @ g for g in grads]) == pytest.approx(sigma_sq, abs=1e-12)
    for c in clients:                                               # spectra in [μ, L]
        ev = np.linalg.eigvalsh(c.A)
        assert ev.min() >= 0.2 - 1e-12 and ev.max() <= 1.0 + 1e-12


def test_random_quadratics_attain_both_ends_of_the_class():
    ev = np.linalg.eigvalsh(qc.random_quadratics(1, 5, mu=0.1, L=2.0, seed=0)[0].A)
    assert ev.min() == pytest.approx(0.1) and ev.max() == pytest.approx(2.0)
