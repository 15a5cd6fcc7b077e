"""Tests of the PPFE linear generator (docs/formulas.md §E.C10)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from synthetic.linear import make_linear_federation, population_mse, ridge, test_mse


def test_alpha_zero_gives_identical_models():
    fed = make_linear_federation(num_clients=7, dim=5, alpha=0.0, seed=3)
    assert np.array_equal(fed.w, np.broadcast_to(fed.w_global, fed.w.shape))


def test_alpha_one_models_are_the_local_draws():
    fed = make_linear_federation(num_clients=7, dim=5, alpha=1.0, seed=3)
    assert np.array_equal(fed.w, fed.w_local)


def test_pairwise_distance_expectation():
    # E||w_i - w_j||^2 = 2 alpha^2 s^2 d; Monte-Carlo over 400 seeds x 20 clients
    alpha, s, d = 0.6, 1.5, 8
    vals = []
    for seed in range(400):
        fed = make_linear_federation(num_clients=20, dim=d, n_train=2, n_test=1, alpha=alpha,
                                     local_scale=s, seed=seed)
        diff = fed.w[:, None] - fed.w[None]
        vals.append(np.sum(diff ** 2, -1)[np.triu_indices(20, 1)].mean())
    # relative std of the mean ~ 1/sqrt(400*20*d/2) ~ 0.5%; 3% is > 5 sigma
    assert np.mean(vals) == pytest.approx(2 * alpha ** 2 * s ** 2 * d, rel=0.03)


def test_bayes_mse_is_noise_variance():
    fed = make_linear_federation(num_clients=4, dim=6, n_test=20000, noise_var=0.3, seed=1)
    mse = test_mse(fed, fed.w)
    # mean of 80,000 squared N(0, 0.3) draws: relative std sqrt(2/80000) = 0.5%; 3% is 6 sigma
    assert mse.mean() == pytest.approx(0.3, rel=0.03)
    assert np.allclose(population_mse(fed, fed.w), 0.3)
    assert fed.bayes_mse == 0.3


def test_population_mse_matches_large_test_set():
    fed = make_linear_federation(num_clients=3, dim=4, n_test=50000, seed=2)
    w_hat = fed.w + 0.5
    # 50,000 samples per client: relative error of an empirical MSE ~ 1%, allow 5%
    assert np.allclose(test_mse(fed, w_hat), population_mse(fed, w_hat), rtol=0.05)


def test_covariance_and_uniform_alpha_ranges():
    fed = make_linear_federation(num_clients=30, dim=10, alpha="uniform", seed=0)
    assert np.all((fed.cov_diag >= 0.5) & (fed.cov_diag <= 1.5))
    assert np.all((fed.alpha >= 0) & (fed.alpha <= 1)) and np.unique(fed.alpha).size == 30
    expected = (1 - fed.alpha)[:, None] * fed.w_global + fed.alpha[:, None] * fed.w_local
    assert np.allclose(fed.w, expected)


def test_same_seed_same_data_and_defaults():
    a = make_linear_federation(num_clients=3, seed=5)
    b = make_linear_federation(num_clients=3, seed=5)
    assert np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)
    assert a.x_train.shape == (3, 40, 50) and a.noise_var == 0.25


def test_ridge_closed_form_hand_value():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    y = np.array([1.0, 2.0, 3.0])
    # X^T X + I = [[3, 1], [1, 6]], X^T y = [4, 7]; inverse det 17: [[6,-1],[-1,3]]/17
    expected = np.array([6 * 4 - 7, -4 + 3 * 7]) / 17
    assert np.allclose(ridge(x, y, 1.0), expected)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 10.0))
def test_ridge_is_stationary_point(seed, lam):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(3, 7, 4)), rng.normal(size=(3, 7))
    w = ridge(x, y, lam)
    grad = np.einsum("nmd,nm->nd", x, np.einsum("nmd,nd->nm", x, w) - y) + lam * w
    assert np.allclose(grad, 0, atol=1e-9)
    # and matches a per-client lstsq on the augmented system
    for i in range(3):
        aug_x = np.vstack([x[i], np.sqrt(lam) * np.eye(4)])
        aug_y = np.concatenate([y[i], np.zeros(4)])
        assert np.allclose(w[i], np.linalg.lstsq(aug_x, aug_y, rcond=None)[0])


@pytest.mark.parametrize("kwargs", [dict(num_clients=0), dict(num_clients=2, alpha=1.5),
                                    dict(num_clients=2, alpha="beta"),
                                    dict(num_clients=2, noise_var=-1),
                                    dict(num_clients=2, cov_low=2.0, cov_high=1.0),
                                    dict(num_clients=2, local_scale=[1.0, 2.0, 3.0])])
def test_validation(kwargs):
    with pytest.raises(ValueError):
        make_linear_federation(**kwargs)


def test_ridge_validation():
    with pytest.raises(ValueError):
        ridge(np.ones((3, 2)), np.ones(3), -1.0)
    with pytest.raises(ValueError):
        ridge(np.ones((3, 2)), np.ones(4), 1.0)


def test_variance_preserving_mixing_keeps_unit_variance_and_limits():
    import numpy as np

    from synthetic.linear import make_linear_federation

    for a in (0.0, 0.25, 0.5, 1.0):
        fed = make_linear_federation(num_clients=400, dim=50, n_train=1, n_test=1, alpha=a,
                                     mixing="variance_preserving", seed=3)
        want = np.sqrt(1 - a) * fed.w_global + np.sqrt(a) * fed.w_local
        assert np.array_equal(fed.w, want)  # independent formula, same draws
        # Var w_i = (1 − α) + α s² = 1 with s = 1, over fresh w_g draws: 300 seeds × 50
        # coordinates of client 0 → SE of the mean square ≈ √(2/15000) ≈ 0.012
        sq = [make_linear_federation(num_clients=1, dim=50, n_train=1, n_test=1, alpha=a,
                                     mixing="variance_preserving", seed=s).w[0] ** 2
              for s in range(300)]
        assert abs(np.mean(sq) - 1.0) < 0.06
    convex = make_linear_federation(num_clients=3, alpha=0.5, seed=3)
    vp = make_linear_federation(num_clients=3, alpha=0.5, seed=3, mixing="variance_preserving")
    assert np.array_equal(convex.w_global, vp.w_global) and not np.allclose(convex.w, vp.w)
    with pytest.raises(ValueError, match="mixing"):
        make_linear_federation(num_clients=3, mixing="sum")
