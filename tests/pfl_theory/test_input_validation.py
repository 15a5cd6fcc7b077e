"""Public theory functions reject NaN / empty / out-of-range inputs with ``ValueError`` and
never return NaN/inf (or raise OverflowError, ZeroDivisionError, IndexError, MemoryError)
for finite inputs (issue 18)."""

import math

import numpy as np
import pytest

from pfl_theory import moreau, pfedme, ppfe

NAN = float("nan")

BAD = [
    ("lemma6_log_cover_size nan", lambda: ppfe.lemma6_log_cover_size([NAN], 0.1, coef_bound=1.0)),
    ("lemma6_log_cover_size -5", lambda: ppfe.lemma6_log_cover_size([-5], 0.1, coef_bound=1.0)),
    ("lemma6_log_cover_size []", lambda: ppfe.lemma6_log_cover_size([], 0.1, coef_bound=1.0)),
    ("lemma6_cover_radius []",
     lambda: ppfe.lemma6_cover_radius([], 0.1, coef_bound=1.0, output_bound=1.0)),
    ("boosting_bias_bound nan", lambda: ppfe.boosting_bias_bound(0.1, NAN)),
    ("boosting_bias_bound [1, nan]", lambda: ppfe.boosting_bias_bound(0.1, np.array([1, NAN]))),
    ("gradient_diversity []", lambda: pfedme.gradient_diversity(np.zeros((0, 3)))),
    ("gradient_diversity 1-D", lambda: pfedme.gradient_diversity(np.array([]))),
    ("select_stages kappa0=1e300",
     lambda: ppfe.select_stages(gamma=0.1, kappa0=1e300, n=100, t_max=5)),
    ("lemma1_delta_sq 1e-300", lambda: pfedme.lemma1_delta_sq(
        lam=1e-300, gamma_f_sq=1.0, batch_size=1, nu=0.1, mu=1e-300)),
    ("theorem7_terms []", lambda: ppfe.theorem7_terms([], sizes=[10], delta=0.1)),
    ("alpha_grid 1e-12", lambda: ppfe.alpha_grid(1, 1e-12)),
    ("moreau_constants kappa overflow", lambda: moreau.moreau_constants(lam=1e308, mu=1e-308)),
]


@pytest.mark.parametrize("label,call", BAD, ids=[b[0] for b in BAD])
def test_bad_or_overflowing_input_is_a_value_error(label, call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("lam,mu", [(15.0, 1.0), (1e-300, 1e-300), (1e300, 1e300),
                                    (1e300, 1.0), (1.0, 1e300)])
def test_moreau_constants_finite_at_extreme_scales(lam, mu):
    c = moreau.moreau_constants(lam=lam, mu=mu)
    # μ_F = λμ/(λ+μ) and κ_F = 1 + λ/μ, checked in exact rational form at the scale of λ, μ
    assert math.isfinite(c.mu_F) and c.mu_F > 0
    assert c.mu_F == pytest.approx(1.0 / (1.0 / lam + 1.0 / mu), rel=1e-12)
    assert c.kappa_F == pytest.approx(1.0 + lam / mu, rel=1e-12)


def test_ordinary_values_unchanged():
    assert moreau.moreau_constants(lam=15.0, mu=1.0).mu_F == pytest.approx(15.0 / 16.0)
    assert pfedme.lemma1_delta_sq(lam=15.0, gamma_f_sq=1.0, batch_size=1, nu=0.1,
                                  mu=1.0) == pytest.approx(2.0 / 16.0**2 * 1.1)
    assert ppfe.lemma6_log_cover_size([1.0, 2.0], 0.5, coef_bound=1.0) == pytest.approx(
        3.0 + 2 * math.log(3))
    assert ppfe.alpha_grid(1.0, 0.5).size == 3
