"""pfl_theory.cgpfl_selection and the scale-free default of select_k: normalisation,
clustering path, BIC (recomputed independently), K̂ invariant to rescaling the models."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pfl_theory.cgpfl import select_k
from pfl_theory.cgpfl_selection import bic_curve, cluster_path, normalise_models
from pfl_theory.kmeans import inertia
from synthetic.contexts import planted_model_vectors


def test_normalise_models_unit_spread_and_equivariance():
    x, _ = planted_model_vectors(12, 3, 4, separation=5.0, noise=0.5, seed=1)
    w = np.arange(1, 13, dtype=float)
    a = normalise_models(x, w)
    assert np.allclose((w / w.sum()) @ a.z, 0.0, atol=1e-12)
    assert (w / w.sum()) @ (a.z ** 2).sum(1) == pytest.approx(1.0, rel=1e-12)
    b = normalise_models(-7.5 * x + 3.0, w)  # affine change of units: same z up to sign
    np.testing.assert_allclose(b.z, -a.z, atol=1e-12)
    assert b.scale == pytest.approx(7.5 * a.scale, rel=1e-12)
    zero = normalise_models(np.ones((4, 2)))
    assert zero.scale == 0.0 and not zero.z.any()


def test_cluster_path_costs():
    x, _ = planted_model_vectors(16, 3, 5, separation=6.0, noise=0.5, seed=2)
    path = cluster_path(x, k_max=8, restarts=5)
    assert path.relative_costs[0] == pytest.approx(1.0, rel=1e-12)
    assert np.all(np.diff(path.relative_costs) <= 1e-12)  # warm start: non-increasing
    total = ((x - x.mean(0)) ** 2).sum(1).mean()
    for cl, rel in zip(path.clusterings, path.relative_costs):  # centres back in x's units
        assert inertia(x, cl.labels, cl.centers) / 16 == pytest.approx(rel * total, rel=1e-9)


def test_bic_recomputed_independently():
    x, _ = planted_model_vectors(10, 2, 3, separation=4.0, noise=0.5, seed=3)
    path = cluster_path(x, k_max=5, restarts=3)
    bic = bic_curve(path, dim=3)
    z = (x - x.mean(0)) / math.sqrt(((x - x.mean(0)) ** 2).sum(1).mean())  # normalised units
    for k, cl, b in zip(path.ks, path.clusterings, bic):
        lab = np.asarray(cl.labels)
        rss = sum(((z[lab == j] - z[lab == j].mean(0)) ** 2).sum() for j in range(k))
        var = rss / (3 * (10 - k))
        nk = np.bincount(lab, minlength=k)
        ll = sum(c * math.log(c / 10) for c in nk if c) - 15 * math.log(2 * math.pi * var) - 1.5 * (10 - k)
        assert b == pytest.approx(-2 * ll + (3 * k + k) * math.log(10), rel=1e-9)
    assert int(path.ks[np.argmin(bic)]) == 2


def test_relative_default_picks_planted_and_ignores_units():
    x, _ = planted_model_vectors(30, 4, 10, separation=6.0, noise=0.5, seed=0)
    res = select_k(x, m=3000, restarts=10)
    assert res.mu_rule == "relative" and res.k_hat == 4
    big = select_k(x * 1e200, m=3000, restarts=10)
    assert big.k_hat == 4 and np.all(np.isfinite(big.e_values))
    np.testing.assert_allclose(big.e_values, res.e_values, rtol=1e-9)
    assert big.mu == pytest.approx(res.mu / 1e400 if res.mu / 1e400 > 0 else 0.0)
    # explicit μ in model units: μ·cost(1) must be representable
    with pytest.raises(ValueError, match="overflows"):
        select_k(x * 1e200, mu=1.0, m=3000)
    with pytest.raises(ValueError, match="mu"):
        select_k(x, mu="auto", m=3000)


def test_explicit_mu_is_the_paper_e_of_k():
    x, _ = planted_model_vectors(12, 2, 3, separation=4.0, noise=0.5, seed=1)
    res = select_k(x, mu=0.5, m=1200, restarts=3)
    np.testing.assert_allclose(res.e_values, res.complexity_terms + 0.5 * res.costs, rtol=1e-12)
    assert res.mu == 0.5 and res.mu_rule == "given"


@settings(max_examples=15, deadline=None)
@given(log_scale=st.floats(min_value=-150, max_value=250), seed=st.integers(0, 5),
       shift=st.floats(min_value=-1e3, max_value=1e3))
def test_k_hat_invariant_to_rescaling(log_scale, seed, shift):
    x, _ = planted_model_vectors(14, 3, 4, separation=5.0, noise=0.8, seed=seed)
    ref = select_k(x, m=1400, restarts=4, seed=seed)
    c = 10.0 ** log_scale
    res = select_k(x * c + shift * c, m=1400, restarts=4, seed=seed)
    assert res.k_hat == ref.k_hat
    assert np.all(np.isfinite(res.e_values))
    np.testing.assert_allclose(res.relative_costs, ref.relative_costs, rtol=1e-6, atol=1e-12)


def test_cluster_path_validation():
    x = np.zeros((4, 2))
    with pytest.raises(ValueError, match="k_max"):
        cluster_path(x, k_max=5)
    with pytest.raises(ValueError, match="weights"):
        normalise_models(x, weights=[1, 2, 3])
    with pytest.raises(ValueError, match="client_models"):
        normalise_models([[np.inf, 0.0]])


# ------------------------------------------------------------- bands of μ and the μ rules
from pfl_theory.cgpfl_selection import MuBand, mu_bands, relative_cap, widest_band  # noqa: E402


def _dense_choice(comp, rel, ws):
    """Independent of mu_bands: K̂ at each w of a dense grid, by brute force."""
    return np.array([int(np.argmin(comp + w * rel)) + 1 for w in ws])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.01, 1.0), min_size=2, max_size=8), st.floats(0.05, 2.0))
def test_mu_bands_agree_with_brute_force(drops, c):
    # rel non-increasing from 1, comp = c√K (the e(K) complexity shape)
    rel = np.concatenate([[1.0], 1.0 - np.cumsum(drops) / (sum(drops) * 1.01)])
    comp = c * np.sqrt(np.arange(1, rel.size + 1))
    bands = mu_bands(comp, rel)
    ws = np.geomspace(1e-4, 1e4, 4001)
    dense = _dense_choice(comp, rel, ws)
    for w, k in zip(ws, dense):
        inside = [b.k for b in bands if b.lo <= w < b.hi]
        # 1e-9 relative: a grid point closer than that to an edge may fall either side
        if not any(abs(w - e) <= 1e-9 * w for b in bands for e in (b.lo, b.hi)):
            assert inside == [k], (w, k, bands)
    assert bands[0].lo == 0.0 and np.isinf(bands[-1].hi)
    assert all(a.hi == b.lo for a, b in zip(bands, bands[1:]))


def test_widest_band_is_the_sharpest_elbow_by_hand():
    # cost drops 0.3 per K to K = 4, then 0.001 (K = 5-7), 0.04 (K = 8), 0.0005 (K = 9);
    # comp(K) = 0.01 K (linear), so a band's edges are 0.01 K-steps / cost drops:
    # K=1 [0, 1/30), K=4 [1/30, 0.04/0.043), K=8 [0.04/0.043, 20), K=9 [20, inf).
    # Bounded: K=4 (1.45 decades) and K=8 (1.33): the widest is K = 4.
    # mutations caught: narrowest band (K=8), unbounded bands allowed (K=1 or 9)
    rel = np.array([1.0, 0.7, 0.4, 0.1, 0.099, 0.098, 0.097, 0.057, 0.0565])
    comp = 0.01 * np.arange(1, 10)
    bands = mu_bands(comp, rel)
    assert [b.k for b in bands] == [1, 4, 8, 9]
    assert bands[1].lo == pytest.approx(0.01 / 0.3)
    assert bands[2].lo == pytest.approx(0.04 / 0.043) and bands[3].lo == pytest.approx(20.0)
    best = widest_band(bands)
    assert best.k == 4 and best.decades == pytest.approx(math.log10(0.04 / 0.043 * 30))
    assert widest_band((MuBand(1, 0.0, 1.0), MuBand(2, 1.0, np.inf))) is None


def test_relative_cap_by_hand():
    # c = 0.5: c(√K − 1) < 1 ⇔ √K < 3 ⇔ K < 9 -> cap 8; c = 2: √K < 1.5 -> K ≤ 2
    assert relative_cap(0.5, 20) == 8
    assert relative_cap(2.0, 20) == 2
    assert relative_cap(0.5, 5) == 5


def test_select_k_widest_band_finds_the_elbow_the_relative_mu_cannot_reach():
    # 10 well-separated planted contexts, d large against m: the relative μ is capped
    # below 10, the widest band picks 10.  mutation caught: widest_band returning the
    # widest band including K = 1's (unbounded) -> K̂ = 1
    # (c = √((d/m) log(em/d)) = 0.57 at d = 200, m = 2000: relative cap 7)
    x, _ = planted_model_vectors(40, 10, 200, separation=10.0, noise=0.1, seed=0)
    m = 2000
    rel = select_k(x, mu="relative", m=m, k_max=20)
    wide = select_k(x, mu="widest-band", m=m, k_max=20)
    assert rel.relative_cap < 10 and rel.k_hat <= rel.relative_cap and rel.cap_line()
    assert wide.k_hat == 10 and wide.mu_rule == "widest-band" and wide.cap_line() == ""
    band = next(b for b in wide.bands if b.k == 10)
    w = wide.mu * wide.scale ** 2
    assert band.lo < w < band.hi
    assert [line.startswith("K=10") for line in wide.band_lines() if "(K_hat)" in line] == [True]
