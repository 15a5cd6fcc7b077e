"""Tests of PPFE theory (docs/formulas.md §C.5, checks §E.C3–C.9, C.11)."""

import functools
import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from pfl_theory import ppfe


# ---------- Lemma 4 ----------------------------------------------------------------------
def _net(params, x, act=np.tanh):
    """Independent forward pass: a_l = act(W a + b), linear last layer. x [m, d0]."""
    a = x
    for k, (w, b) in enumerate(params):
        z = a @ w.T + b
        a = act(z) if k < len(params) - 1 else z
    return a[:, 0]


def _direct_lambda(widths, m, bx):
    """Scalar-loop Λ (not in log space), tanh: L_σ = 1, c_0 = 0."""
    depth = len(widths) - 1
    a = [bx]
    for l in range(1, depth):
        a.append(1.0 * (widths[l - 1] * m * a[-1] + m) + 0.0)
    lam = 0.0
    for l in range(1, depth + 1):
        prod = 1.0
        for k in range(l + 1, depth + 1):
            prod *= (1.0 if k == depth else 1.0) * widths[k - 1] * m
        lam += (widths[l - 1] * a[l - 1] + 1) * prod
    return a, lam


def test_lemma4_constants_match_scalar_loop():
    widths, m, bx = [3, 4, 5, 1], 0.7, 2.0
    log_a, log_lam = ppfe.lemma4_log_constants(widths, weight_bound=m, input_bound=bx)
    a, lam = _direct_lambda(widths, m, bx)
    assert np.allclose(np.exp(log_a), a) and math.isclose(math.exp(log_lam), lam, rel_tol=1e-12)
    # hand value, one hidden layer d=[1,1,1], M=1, B=1: A1 = 2, Λ = (1*1+1)*1 + (1*2+1) = 5
    assert math.isclose(math.exp(ppfe.lemma4_log_constants([1, 1, 1], weight_bound=1,
                                                           input_bound=1)[1]), 5.0)


def test_lemma4_log_covering_hand_value_and_huge_sizes():
    # d=[1,1]: P = 2, Λ = 1*(1*1+1) = 2 -> 2 log(1 + ceil(1*2/0.5)) = 2 log 5
    assert math.isclose(ppfe.lemma4_log_covering([1, 1], eps=0.5, weight_bound=1, input_bound=1),
                        2 * math.log(5))
    big = ppfe.lemma4_log_covering([10 ** 6] * 3 + [1], eps=1e-3, weight_bound=1, input_bound=1)
    assert ppfe.fc_parameter_count([10 ** 6] * 3 + [1]) > 1e12 and math.isfinite(big)
    deep = ppfe.lemma4_log_covering([16] * 5001, eps=1e-3, weight_bound=2, input_bound=1)
    assert math.isfinite(deep) and deep > 0


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(1, 6), min_size=1, max_size=3))
def test_lemma4_perturbation_bound_never_exceeded(seed, hidden):
    rng = np.random.default_rng(seed)
    widths, m, bx = [rng.integers(1, 5)] + hidden + [1], 1.0, 1.0
    eta = 10.0 ** rng.uniform(-4, -1)
    p1 = [(rng.uniform(-m, m, (widths[l], widths[l - 1])), rng.uniform(-m, m, widths[l]))
          for l in range(1, len(widths))]
    # perturb by at most eta (adversarially: +-eta on each entry), staying in [-M, M]
    p2 = [(np.clip(w + eta * rng.choice([-1, 1], w.shape), -m, m),
           np.clip(b + eta * rng.choice([-1, 1], b.shape), -m, m)) for w, b in p1]
    x = np.vstack([rng.uniform(-bx, bx, (300, widths[0])),
                   rng.choice([-bx, bx], (200, widths[0]))])  # random + box corners
    gap = np.max(np.abs(_net(p1, x) - _net(p2, x)))
    lam = math.exp(ppfe.lemma4_log_constants(widths, weight_bound=m, input_bound=bx)[1])
    assert gap <= lam * eta * (1 + 1e-12)


# ---------- Lemma 5 ----------------------------------------------------------------------
def test_lemma5_composition_inequality_on_random_nets():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (500, 3))
    f = lambda w: np.tanh(x @ w)  # noqa: E731  f: R^3 -> R^2
    w1 = rng.normal(size=(3, 2))
    w2 = w1 + 0.05 * rng.normal(size=(3, 2))
    v1, v2 = rng.normal(size=2), rng.normal(size=2)
    lg = np.abs(v1).sum()  # g(z) = v.z is ||v||_1-Lipschitz w.r.t. ||.||_inf
    f1, f2 = f(w1), f(w2)
    lhs = np.max(np.abs(f1 @ v1 - f2 @ v2))
    eps_f = np.max(np.abs(f1 - f2))
    # sup of |g - g'| on the range of f (|z| <= 1 entrywise): ||v1 - v2||_1
    eps_g = np.abs(v1 - v2).sum()
    radius, log_n = ppfe.lemma5_composition(2.0, 3.0, eps_g=eps_g, eps_f=eps_f, lipschitz_g=lg)
    assert lhs <= radius + 1e-12 and math.isclose(radius, eps_g + lg * eps_f) and log_n == 5.0


# ---------- Lemma 6 ----------------------------------------------------------------------
def _greedy_cover(funcs, eps):
    centres = []
    for f in funcs:
        if not any(np.max(np.abs(f - c)) <= eps for c in centres):
            centres.append(f)
    return centres


def test_lemma6_product_cover_on_finite_classes():
    rng = np.random.default_rng(1)
    t_stages, a_bound, bh = 2, 1.5, 1.0
    classes = [rng.uniform(-bh, bh, (15, 4)) for _ in range(t_stages)]  # functions on 4 points
    eps_t, eps_a = [0.6, 0.8], 0.2
    covers = [_greedy_cover(c, e) for c, e in zip(classes, eps_t)]
    grid = ppfe.alpha_grid(a_bound, eps_a)
    assert grid.size == math.ceil(a_bound / eps_a) + 1
    radius = ppfe.lemma6_cover_radius(eps_t, eps_a, coef_bound=a_bound, output_bound=bh)
    assert math.isclose(radius, a_bound * sum(eps_t) + t_stages * bh * eps_a)
    cover = [sum(al * c for al, c in zip(als, cs))
             for cs in itertools.product(*covers) for als in itertools.product(grid, repeat=t_stages)]
    log_size = ppfe.lemma6_log_cover_size([math.log(len(c)) for c in covers], eps_a, coef_bound=a_bound)
    assert math.isclose(math.log(len(cover)), log_size)
    cover = np.array(cover)
    for _ in range(300):
        hs = [c[rng.integers(len(c))] for c in classes]
        als = rng.uniform(-a_bound, a_bound, t_stages)
        f = sum(al * h for al, h in zip(als, hs))
        assert np.min(np.max(np.abs(cover - f), axis=1)) <= radius + 1e-12


def test_lemma6_allocation_feasible_and_not_worse_than_equal_split():
    fn = functools.partial(ppfe.lemma4_log_covering, [4, 8, 1], weight_bound=1, input_bound=1)
    fns = [lambda e: fn(eps=e)] * 3
    res = ppfe.lemma6_log_covering(fns, eps=0.1, coef_bound=2.0, output_bound=3.0)
    assert ppfe.lemma6_cover_radius(res.eps_stages, res.eps_alpha, coef_bound=2.0,
                                    output_bound=3.0) <= 0.1 * (1 + 1e-9)
    equal = 3 * fn(eps=0.1 / 4 / 2.0) + 3 * math.log(math.ceil(2.0 / (0.1 / 4 / 9.0)) + 1)
    assert res.log_covering <= equal + 1e-9
    recomputed = sum(fn(eps=e) for e in res.eps_stages) + 3 * math.log(
        math.ceil(2.0 / res.eps_alpha) + 1)
    assert math.isclose(res.log_covering, recomputed)


# ---------- Lemma 8 ----------------------------------------------------------------------
def test_harmonic_mean_hand_value():
    assert math.isclose(ppfe.harmonic_mean_size([1, 2, 4]), 3 / (1 + 0.5 + 0.25))
    assert ppfe.harmonic_mean_size([5, 5]) == 5.0


def test_lemma8_monte_carlo_quantile_and_harmonic_mean():
    rng = np.random.default_rng(0)
    delta = 0.1

    def deviations(sizes, reps=4000):
        # loss values uniform on [0, 1] (B = 1), fixed model: L_hat = mean_i mean_j loss
        out = np.mean([rng.random((reps, n)).mean(axis=1) for n in sizes], axis=0)
        return np.abs(out - 0.5)

    equal, unequal = [20] * 10, [2, 2, 2, 2, 2, 38, 38, 38, 38, 36]  # same total 200
    q_eq = np.quantile(deviations(equal), 1 - delta)
    q_un = np.quantile(deviations(unequal), 1 - delta)
    assert q_eq <= ppfe.lemma8_deviation(equal, loss_bound=1, delta=delta)
    assert q_un <= ppfe.lemma8_deviation(unequal, loss_bound=1, delta=delta)
    # exact variance of L_hat is (1/12) / (N n_bar) -> ratio of std = sqrt(n_bar_eq / n_bar_un)
    ratio = math.sqrt(ppfe.harmonic_mean_size(equal) / ppfe.harmonic_mean_size(unequal))
    # 4000 reps: quantile ratio has ~5% sampling error; 15% tolerance
    assert q_un / q_eq == pytest.approx(ratio, rel=0.15) and ratio > 1.5


# ---------- Lemma 9 ----------------------------------------------------------------------
def test_lemma9_constants_and_documented_example():
    assert ppfe.U_DAGGER == pytest.approx(1.25643, abs=1e-5)
    assert ppfe.KAPPA_DAGGER == pytest.approx(3.13395, abs=1e-5)
    assert ppfe.KAPPA_MIN == pytest.approx(2.3316, abs=1e-4)
    r = ppfe.lemma9_minimize(1.0, 1e-4, 1.0)
    assert r.u_star == pytest.approx(6.2115, abs=1e-4) and r.value == pytest.approx(0.026929, abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.05, 20), st.floats(-8, 1), st.floats(0.05, 20))
def test_lemma9_against_brute_force(a, log10_b, c):
    b = 10.0 ** log10_b
    res = ppfe.lemma9_minimize(a, b, c)
    u = np.concatenate([[0.0], np.geomspace(1e-9, 60, 400_000)])
    phi = a * c * np.exp(-u) + np.sqrt(b * u)
    # the grid minimum is >= the true minimum; relative grid error ~ 1e-9
    assert res.value <= phi.min() * (1 + 1e-9) + 1e-15
    assert res.value >= phi.min() * (1 - 1e-6) - 1e-12
    assert math.isclose(a * res.x_star + math.sqrt(b * math.log(c / res.x_star)), res.value,
                        rel_tol=1e-9, abs_tol=1e-14)
    assert res.interior == (2 * a * c / math.sqrt(b) > ppfe.KAPPA_DAGGER)


def test_lemma9_endpoint_case_between_thresholds():
    # sqrt(2e) < kappa = 3 < kappa_dagger: critical points exist but the endpoint x=c wins
    a, c = 1.0, 1.0
    b = (2 * a * c / 3.0) ** 2
    r = ppfe.lemma9_minimize(a, b, c)
    assert not r.interior and r.x_star == c and r.value == a * c


def test_lemma9_asymptotic_relative_error_vanishes():
    errs = []
    for b in [1e-4, 1e-10, 1e-30, 1e-100]:
        exact = ppfe.lemma9_minimize(1.0, b, 1.0)
        asym = ppfe.lemma9_asymptotic(1.0, b, 1.0)
        errs.append(abs(asym["u_star"] - exact.u_star) / exact.u_star)
    assert errs == sorted(errs, reverse=True) and errs[-1] < 1e-2


# ---------- boosting bound, select_stages -------------------------------------------------
def test_boosting_bias_bound_and_chain():
    assert ppfe.boosting_bias_bound(0.1, 50) == pytest.approx(math.exp(-1.0))
    c = ppfe.adaboost_bound_chain([0.3, 0.4, 0.1])
    assert np.all(c["product"] <= c["exp_sum"] + 1e-15)
    assert np.all(c["exp_sum"] <= c["exp_gamma"] + 1e-15)
    assert c["product"][0] == pytest.approx(2 * math.sqrt(0.21))


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.49), st.floats(0.01, 5.0), st.floats(1.0, 1e5), st.integers(1, 400))
def test_select_stages_matches_grid_search(gamma, kappa0, n, t_max):
    sel = ppfe.select_stages(gamma=gamma, kappa0=kappa0, n=n, t_max=t_max)
    t = np.arange(1, t_max + 1)
    phi = np.exp(-2 * gamma ** 2 * t) + kappa0 * np.sqrt(t / n)
    assert phi[sel.t_star - 1] <= phi.min() * (1 + 1e-12)
    assert np.allclose(sel.bound, phi)
    if sel.interior:  # continuous optimum is a stationary point of Phi(T)
        tc = sel.t_star_continuous
        deriv = -2 * gamma ** 2 * math.exp(-2 * gamma ** 2 * tc) + kappa0 / (2 * math.sqrt(tc * n))
        assert abs(deriv) < 1e-8 * (2 * gamma ** 2 + kappa0)


def test_stage_edge():
    from pfl_theory.ppfe_bounds import stage_edge
    assert stage_edge([0.1, 0.3, 0.2]) == pytest.approx(0.2)       # binary: min(1/2 - eps)
    # C = 10: chance error 0.9 -> edge 0; perfect -> 1/2; eps = 0.45 -> (0.9-0.45)*10/18 = 0.25
    assert stage_edge([0.9], num_classes=10) == pytest.approx(0.0, abs=1e-15)
    assert stage_edge([0.0], num_classes=10) == pytest.approx(0.5)
    assert stage_edge([0.45, 0.1], num_classes=10) == pytest.approx(0.25)
    assert stage_edge([0.6], num_classes=2) < 0                        # worse than chance
    with pytest.raises(ValueError, match="errors"):
        stage_edge([1.2])
    with pytest.raises(ValueError, match="num_classes"):
        stage_edge([0.1], num_classes=1)


# ---------- Theorem 7 / Corollary 2 ------------------------------------------------------
def test_corollary2_scalings():
    kw = dict(width=64, depth=3, num_stages=4, n=100, gamma_w=0.5, delta=0.05)
    t1, t4 = ppfe.corollary2_terms(num_clients=10, **kw), ppfe.corollary2_terms(num_clients=40, **kw)
    assert t4["shared"] == pytest.approx(t1["shared"] / 2)  # N^{-1/2}
    assert t4["personalized"] == t1["personalized"]  # independent of N
    assert ppfe.corollary2_terms(num_clients=10, **{**kw, "depth": 9})["personalized"] == t1["personalized"]
    # gamma_w = 1: S_T = T(T-1)/2, personalized term linear-ish in T; gamma_w < 1 bounded
    assert ppfe.s_t(6, 1.0) == 15
    g = 0.6
    bound = 64 * g / ((1 - g ** 2) * math.sqrt(100))
    assert all(ppfe.corollary2_terms(num_clients=10, **{**kw, "gamma_w": g, "num_stages": t})
               ["personalized"] <= bound for t in (2, 5, 50, 500))


def test_theorem7_terms_hand_value():
    widths = [[2, 3, 1], [2, 3, 1]]  # layers: 3*(2+1)=9, 1*(3+1)=4
    sh, pe = ppfe.stage_parameter_counts(widths)
    assert list(sh) == [13, 9] and list(pe) == [0, 4]
    terms = ppfe.theorem7_terms(widths, sizes=[10, 40], delta=0.1)
    n_bar = 16.0
    assert terms["shared"] == pytest.approx(math.sqrt(2 * 22 / (2 * n_bar)))
    assert terms["personalized"] == pytest.approx(math.sqrt(2 * 4 / n_bar))
    assert terms["boosting"] == pytest.approx(math.sqrt(2 / n_bar))
    assert terms["total"] == pytest.approx(sum(v for k, v in terms.items() if k != "total"))


# ---------- low rank ---------------------------------------------------------------------
def test_low_rank_count_and_eckart_young():
    assert ppfe.low_rank_param_count(100, 50, 5) == 750
    assert ppfe.low_rank_reduction_factor(100, 50, 5) == pytest.approx(5000 / 750)
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 12, 9))
    w_r, err = ppfe.truncated_svd(w, 3)
    assert np.allclose(np.sum((w - w_r) ** 2, axis=(-2, -1)), err)
    assert np.all(np.linalg.matrix_rank(w_r) == 3)
    # no rank-3 matrix of random search is closer (Eckart-Young)
    for _ in range(50):
        cand = rng.normal(size=(12, 3)) @ rng.normal(size=(3, 9))
        assert np.sum((w[0] - cand) ** 2) >= err[0]
    wt, et = ppfe.truncated_svd(torch.from_numpy(w), 3)
    assert isinstance(wt, torch.Tensor) and np.allclose(wt.numpy(), w_r) and np.allclose(et.numpy(), err)


@pytest.mark.parametrize("call", [
    lambda: ppfe.lemma4_log_covering([3], eps=0.1, weight_bound=1, input_bound=1),
    lambda: ppfe.lemma4_log_covering([3, 1], eps=0.0, weight_bound=1, input_bound=1),
    lambda: ppfe.lemma9_minimize(-1, 1, 1),
    lambda: ppfe.select_stages(gamma=0.6, kappa0=1, n=10, t_max=5),
    lambda: ppfe.lemma8_deviation([10], loss_bound=1, delta=1.5),
    lambda: ppfe.low_rank_param_count(3, 3, 4),
    lambda: ppfe.adaboost_bound_chain([0.6]),
])
def test_validation(call):
    with pytest.raises(ValueError):
        call()
