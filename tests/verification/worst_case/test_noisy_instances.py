"""verification.worst_case.noisy_instances: the engine's stochastic gradients are unbiased
with variance exactly γ_f²/|D| (the PEP's noise assumption), and the seeds' mean ± se.
Mutations that FAIL here: the ± pairs replaced by one-sided noise (biased), the scaling
to mean ‖z‖² = γ_f² dropped."""

from __future__ import annotations

import numpy as np
import pytest

from verification.worst_case import noisy_instances as NI
from verification.worst_case import quadratic_clients as qc
from verification.worst_case.problems import Setting

S = Setting(method="fedavg", clients=2, rounds=1, local_rounds=1, lr=0.5, mu=0.1, L=1.0,
            noise_sq=2.0)


def test_training_rows_carry_centred_noise_of_the_given_variance():
    clients = qc.random_quadratics(2, 3, mu=0.1, L=1.0, seed=0)
    fed, _ = NI.noisy_federation(clients, 2.0)
    for i, c in enumerate(clients):
        start, n = int(fed.train.offsets[i]), int(fed.train.counts[i])
        b = fed.train.x[start:start + n].reshape(n, -1)[:, 9:].numpy()
        z = b - c.b
        assert np.allclose(z.mean(0), 0.0, atol=1e-12)                 # unbiased
        assert float((z ** 2).sum(1).mean()) == pytest.approx(2.0, rel=1e-12)


def test_one_noisy_step_has_variance_eta_squared_v_over_n():
    # one round, one local step, |D| = 1, two clients: w¹ = w_det − η·mean(z_1, z_2), so
    # E‖w¹ − w_det‖² = η²V/2 (independent draws); 400 seeds: the estimate's relative sd is
    # ~ sqrt(2/400)·(kurtosis factor) < 0.15, so 4 se of slack
    clients = qc.random_quadratics(2, 3, mu=0.1, L=1.0, seed=1)
    w0 = np.ones(3)
    det = NI.trajectories(Setting(**{**S.__dict__, "noise_sq": 0.0}), clients, w0, [0])[0]
    runs = NI.trajectories(S, clients, w0, range(400))
    dev = [float(((r[-1] - det[-1]) ** 2).sum()) for r in runs]
    mean, se = NI.stats(dev)
    assert abs(mean - 0.25 * 2.0 / 2) < 4 * se
    drift = np.mean([r[-1] for r in runs], 0) - det[-1]                 # E w¹ = w_det
    assert float(np.abs(drift).max()) < 4 * np.sqrt(0.25 * 2.0 / 2 / 400)


def test_stats_are_mean_and_standard_error():
    assert NI.stats([1.0, 3.0]) == pytest.approx((2.0, 1.0))
