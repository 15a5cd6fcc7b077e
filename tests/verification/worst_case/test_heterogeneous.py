"""verification/worst_case/heterogeneous.py: pFedMe Theorem 2(a) with diverse clients."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from pfl_theory import pfedme
from verification.worst_case import heterogeneous as H
from verification.worst_case import problems as P

LAM, L = 3.0, 1.0
ETA = 1.0 / (75 * LAM ** 3)          # η̂₂ with β = R = 1
S = P.Setting(clients=2, rounds=2, local_rounds=1, lr=ETA, lam=LAM, beta=1.0, mu=None, L=L)


def test_clients_sharing_a_hessian_have_the_same_diversity_everywhere():
    clients, _ = H.instance(S, seed=1)
    vals = [H.diversity(clients, w, LAM) for w in np.random.default_rng(0).normal(size=(5, 4)) * 10]
    assert max(vals) == pytest.approx(min(vals), rel=1e-10) and vals[0] > 0


def test_relaxed_worst_case_sits_between_engine_and_bound_and_grows_with_diversity():
    pytest.importorskip("PEPit")
    meas, sigma_sq = H.measured(S, spread=1.0)
    small = H.worst_case(replace(S, sigma_sq=1e-6)).value
    worst = H.worst_case(replace(S, sigma_sq=sigma_sq)).value
    bound = pfedme.theorem2a(T=2, R=1, N=2, beta=1.0, lam=LAM, L=L, delta_sq=0.0,
                             sigma_F2_sq=sigma_sq, Delta_F=1.0).total
    assert meas <= worst * 1.02 and worst <= bound * 1.02
    assert worst >= small * (1 - 1e-3)       # more diversity never lowers the worst case


def test_the_heterogeneous_pep_is_only_for_the_smooth_nonconvex_class():
    with pytest.raises(ValueError, match="L-smooth"):
        H.worst_case(replace(S, mu=0.1))
