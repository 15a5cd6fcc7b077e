"""Risk certificates (verification/estimators/certificates.py): the kl
inversions, the coverage of the test-set bound, and certificates that hold on held-out data
they never saw — and stop holding when the kl inverse is made too small."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verification.estimators import certificates as C


def test_kl_inverses_invert_kl_and_bracket_the_mean():
    for q, c in ((0.1, 0.01), (0.5, 0.2), (0.0, 0.05), (0.97, 0.001)):
        up, lo = C.kl_inverse_upper(q, c), C.kl_inverse_lower(q, c)
        assert lo <= q <= up
        if up < 1.0:
            assert C.kl_bernoulli(q, up) == pytest.approx(c, rel=1e-9, abs=1e-12)
        if lo > 0.0:
            assert C.kl_bernoulli(q, lo) == pytest.approx(c, rel=1e-9, abs=1e-12)
    # Pinsker: kl(q‖p) ≥ 2(p − q)², so the inverse is within √(c/2) of q
    assert C.kl_inverse_upper(0.3, 0.02) <= 0.3 + math.sqrt(0.01) + 1e-12
    assert C.kl_inverse_upper(0.0, math.log(20) / 100) == pytest.approx(1 - 0.05 ** 0.01)
    with pytest.raises(ValueError):
        C.kl_inverse_upper(1.5, 0.1)
    with pytest.raises(ValueError):
        C.kl_inverse_upper(0.5, -1.0)


def test_test_set_bound_covers_the_true_risk_at_its_confidence():
    rng = np.random.default_rng(0)
    p, n, delta, reps = 0.2, 200, 0.1, 400
    misses = sum(C.test_set_upper(rng.random(n) < p, delta)[0] < p for _ in range(reps))
    # at most δ of the draws may miss; a binomial(400, 0.1) exceeds 60 with prob < 1e-3
    assert misses <= 60
    # an inverse that is too small (the empirical mean itself) misses about half the time
    low = sum(np.mean(rng.random(n) < p) < p for _ in range(reps))
    assert low > 120


def test_excess_certificate_is_an_upper_minus_a_lower_bound():
    model = np.full(1000, 0.4)
    refit = np.full(1000, 0.3)
    cert = C.excess_certificate(model, refit, 0.05, scale=1.0, what="the excess")
    assert cert.value > 0.1 and cert.delta == 0.05 and "1000 fresh samples" in cert.name
    clipped = C.excess_certificate(model * 10, refit, 0.05, scale=1.0, what="x")
    assert "above the loss range" in clipped.name

