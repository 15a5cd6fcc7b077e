"""verification.selection.stage_selectors: bound inputs, one-SE rule, noise-aware best T, records."""

import numpy as np
import pytest

from verification.selection import stage_selectors as ss


def test_fit_bound_inputs_recovers_planted_gamma_and_kappa0():
    t = np.arange(1, 7)
    g, k0, n = 0.3, 0.5, 50.0
    train = np.exp(-2 * g * g * t)
    val = train + k0 * np.sqrt(t / n)
    est = ss.fit_bound_inputs(train, val, n)
    # exact curves of the model: least squares through the origin returns the parameters
    assert est["gamma"] == pytest.approx(g, rel=1e-12)
    assert est["kappa0"] == pytest.approx(k0, rel=1e-12)
    assert ss.fit_bound_inputs(np.ones(3), np.ones(3) * 0.5, 10)["gamma"] == 0.01   # clipped
    with pytest.raises(ValueError, match="equal-length"):
        ss.fit_bound_inputs([1.0, 0.5], [1.0], 10)


def test_one_se_pick():
    rng = np.random.default_rng(0)
    base = rng.normal(size=400)
    z = rng.normal(size=400)
    z = (z - z.mean()) / z.std(ddof=1)
    # T = 3 best by 0.002 over T = 2, paired SE 0.2/√400 = 0.01; T = 1 clearly worse
    losses = np.stack([base + 1.0, base + 0.002 + 0.2 * z, base])
    assert int(np.argmin(losses.mean(1))) + 1 == 3
    assert ss.one_se_pick(losses) == 2
    # a clear gap is not bridged
    assert ss.one_se_pick(np.stack([base + 1.0 + 0.01 * rng.normal(size=400), base])) == 2
    with pytest.raises(ValueError):
        ss.one_se_pick(np.ones((3, 1)))


def test_noise_aware_best_and_records():
    loss = np.array([[2.0, 1.00, 1.02, 1.5],
                     [2.1, 1.03, 1.00, 1.6],
                     [2.2, 1.01, 1.03, 1.7]])
    best, close, se = ss.noise_aware_best(loss)
    assert best == 2 and close == [2, 3] and se[1] == 0.0
    # strict records stay strict: T̂ = 3 is not exact, but is in the noise-aware set
    _, _, recs = ss.records(loss, [{"a": 3, "b": 4, "_x": 0}] * 3, config={}, relative=True)
    by = {(r["selector"], r["seed"]): r for r in recs}
    assert len(recs) == 3 * 3 and {r["selector"] for r in recs} == {"a", "b", "oracle_seed"}
    # the reference: each seed's own best T (seed 1's is 3)
    assert [by["oracle_seed", s]["t_hat"] for s in range(3)] == [2, 3, 2]
    a, b = by["a", 0], by["b", 0]
    assert (a["exact"], a["exact_na"], a["within1"]) == (False, True, True)
    assert (b["exact_na"], b["within1_na"], b["within1"]) == (False, True, False)
    assert a["excess"] == pytest.approx(loss.mean(0)[2] / loss.mean(0)[1] - 1)
    s = ss.summarise(recs, ("a", "b"), tolerance=0.01)
    assert s["a"]["exact"] == 0 and s["a"]["exact_na"] == 1 and s["b"]["lost_le_1pt"] == 0
    assert set(s) == {"a", "b"} and s["a"]["records"] == 3
    with pytest.raises(ValueError, match="seeds >= 2"):
        ss.noise_aware_best(loss[:1])


def test_fit_bound_curve_recovers_a_planted_curve_and_its_argmin():
    from pfl_theory.ppfe_bounds import select_stages
    t = np.arange(1, 11)
    g = float(np.linspace(0.01, 0.49, 49)[29])          # 0.30, a grid value
    k0, n, c, b = 1.5, 50.0, 0.25, 2.0
    curve = c + b * (np.exp(-2 * g * g * t) + k0 * np.sqrt(t / n))
    assert 1 < int(np.argmin(curve)) + 1 < 10           # an interior minimum to find
    est = ss.fit_bound_curve(curve, n)
    # exact model curve: NNLS at the planted γ has zero residual (float64 round-off only)
    assert est["gamma"] == pytest.approx(g, abs=1e-12)
    assert (est["kappa0"], est["c"], est["b"]) == pytest.approx((k0, c, b), rel=1e-8)
    t_star = select_stages(gamma=est["gamma"], kappa0=est["kappa0"], n=n, t_max=10).t_star
    assert t_star == int(np.argmin(curve)) + 1
    assert ss.fit_bound_curve(curve, n) == est         # deterministic
    # a curve without decay: b = 0, κ̂₀ reported as large (the bound then picks T = 1)
    assert ss.fit_bound_curve(0.3 + 0.01 * np.sqrt(t), n)["kappa0"] == 1e6
    with pytest.raises(ValueError, match="curve"):
        ss.fit_bound_curve([], n)
    with pytest.raises(ValueError, match="curve"):
        ss.fit_bound_curve([1.0, np.nan], n)


def test_fit_bound_curve_mutation_without_the_constant_fails(monkeypatch):
    # the irreducible loss c matters: forcing c = 0 (dropping the constant column) misfits
    from scipy import optimize
    t = np.arange(1, 11)
    g = float(np.linspace(0.01, 0.49, 49)[29])
    curve = 0.25 + 2.0 * (np.exp(-2 * g * g * t) + 1.5 * np.sqrt(t / 50.0))
    orig = optimize.nnls
    monkeypatch.setattr(optimize, "nnls", lambda a, y: (lambda r: (np.r_[0.0, r[0]], r[1]))(orig(a[:, 1:], y)))
    est = ss.fit_bound_curve(curve, 50.0)
    assert est["gamma"] != pytest.approx(g, abs=1e-12) or est["kappa0"] != pytest.approx(1.5, rel=1e-8)
