"""The sympy transcription of PPFE's covering lemmas (verification/transcriptions/
ppfe_covering.py) at points worked out by hand from docs/formulas.md §C.5.6–C.5.9, and
Lemma 4's Λ against random network pairs — not against pfl_theory."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verification.transcriptions import ppfe_covering as T


def test_lemma4_by_hand():
    # widths [2, 3, 1], M = ½, B_x = 2, L_σ = 2, c_0 = 0.1:
    # A_0 = 2, A_1 = 2(2·½·2 + ½) + 0.1 = 5.1; Λ = 2(2·2 + 1)(3·½) + (3·5.1 + 1) = 31.3
    kw = dict(weight_bound=0.5, input_bound=2.0, act_lipschitz=2.0, act_at_zero=0.1)
    logs, log_lam = T.lemma4_log_constants([2, 3, 1], **kw)
    assert np.exp(logs) == pytest.approx([2.0, 5.1], rel=1e-14)
    assert math.exp(log_lam) == pytest.approx(31.3, rel=1e-14)
    assert T.fc_parameter_count([2, 3, 1]) == 13
    # ⌈½ · 31.3 / 0.1⌉ = 157 grid steps per parameter
    assert T.lemma4_log_covering([2, 3, 1], eps=0.1, **kw) == pytest.approx(13 * math.log(158),
                                                                             rel=1e-14)


def test_lemma4_lambda_bounds_random_network_pairs():
    """|f(x) − f'(x)| ≤ Λη for nets with all parameters in [−M, M] differing by ≤ η."""
    rng = np.random.default_rng(0)
    widths, M, Bx, Ls, c0, eta = [4, 6, 5, 1], 0.4, 1.5, 1.7, 0.2, 1e-3
    _, log_lam = T.lemma4_log_constants(widths, weight_bound=M, input_bound=Bx,
                                        act_lipschitz=Ls, act_at_zero=c0)

    def act(z):  # L_σ-Lipschitz with σ(0) = c_0
        return Ls * np.maximum(z, 0.0) + c0

    def net(params, x):
        a = x
        for k, (W, b) in enumerate(params):
            z = a @ W.T + b
            a = z if k == len(params) - 1 else act(z)
        return a[:, 0]

    worst = 0.0
    for _ in range(50):
        p = [(rng.uniform(-M, M, (widths[k + 1], widths[k])), rng.uniform(-M, M, widths[k + 1]))
             for k in range(len(widths) - 1)]
        q = [(np.clip(W + rng.uniform(-eta, eta, W.shape), -M, M),
              np.clip(b + rng.uniform(-eta, eta, b.shape), -M, M)) for W, b in p]
        x = rng.uniform(-Bx, Bx, (200, widths[0]))
        worst = max(worst, float(np.abs(net(p, x) - net(q, x)).max()))
    assert 0 < worst <= math.exp(log_lam) * eta


def test_lemmas_5_6_8_by_hand():
    assert T.lemma5_composition(10.0, 20.0, eps_g=0.1, eps_f=0.2, lipschitz_g=3.0) == \
        pytest.approx((0.7, 30.0), rel=1e-15)
    assert T.lemma6_cover_radius([0.1, 0.2], 0.05, coef_bound=2.0, output_bound=3.0) == \
        pytest.approx(2 * 0.3 + 2 * 3 * 0.05, rel=1e-15)
    assert T.alpha_grid_size(2.0, 0.3) == 8  # ⌈6.67⌉ + 1
    assert T.lemma6_log_cover_size([3.0, 4.0], 0.3, coef_bound=2.0) == \
        pytest.approx(7 + 2 * math.log(8), rel=1e-15)
    # sizes 2, 4, 4: n̄ = 3, N = 3
    assert T.harmonic_mean_size([2, 4, 4]) == pytest.approx(3.0, rel=1e-15)
    assert T.lemma8_deviation([2, 4, 4], loss_bound=2.0, delta=0.5) == \
        pytest.approx(2 * math.sqrt(math.log(4) / 18), rel=1e-15)


def test_union_bound_minimum_against_a_dense_grid():
    fn = lambda r: 20 * math.log1p(0.5 / r)  # noqa: E731
    kw = dict(sizes=[10, 30, 50], loss_lipschitz=2.0, loss_bound=3.0, delta=0.1)
    best, radius = T.union_bound_minimum(fn, **kw)
    dense = min(T.union_bound_at(fn, r, **kw) for r in np.geomspace(1e-4, 10, 20_001))
    assert best <= dense * (1 + 1e-12) and best == pytest.approx(dense, rel=1e-6)
    assert T.union_bound_at(fn, radius, **kw) == pytest.approx(best, rel=1e-15)
