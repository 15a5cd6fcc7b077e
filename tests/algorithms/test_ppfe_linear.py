"""Tests of PPFE for linear models and its Local / FedAvg ridge baselines."""

import numpy as np
import pytest

from algorithms.methods.ppfe import ppfe_linear
from algorithms.methods.ppfe.ppfe_linear import (compare_methods, fit_fedavg_ridge, fit_local_ridge,
                                    fit_ppfe_linear, fit_ppfe_linear_path)
from synthetic.linear import make_linear_federation, ridge


@pytest.fixture(scope="module")
def fed():
    return make_linear_federation(num_clients=12, dim=8, n_train=30, n_test=200, alpha=0.5,
                                  seed=4)


def test_fedavg_is_pooled_ridge_with_chosen_lambda(fed):
    fit = fit_fedavg_ridge(fed)
    lam = fit.lambdas[0]
    x = fed.x_train.reshape(-1, fed.dim)
    y = fed.y_train.reshape(-1)
    w = np.linalg.solve(x.T @ x + lam * x.shape[0] * np.eye(fed.dim), x.T @ y)
    assert np.allclose(fit.weights, w[None], atol=1e-10)


def test_one_shot_average_solver(fed):
    fit = fit_fedavg_ridge(fed, federated_solver="one_shot_average")
    lam = fit.lambdas[0]
    per_client = [ridge(fed.x_train[i], fed.y_train[i], lam * 30) for i in range(fed.num_clients)]
    assert np.allclose(fit.weights[0], np.mean(per_client, axis=0))


def test_local_is_per_client_ridge(fed):
    fit = fit_local_ridge(fed, lambda_selection="per_client")
    for i in range(fed.num_clients):
        w = ridge(fed.x_train[i], fed.y_train[i], fit.lambdas[0, i] * 30)
        assert np.allclose(fit.weights[i], w)


@pytest.mark.parametrize("selection", ["joint", "greedy"])
def test_ppfe_stages_are_residual_ridge_fits(fed, selection):
    fit = fit_ppfe_linear(fed, num_stages=3, selection=selection)
    fed_fit = fit_fedavg_ridge(fed)
    assert np.allclose(fit.stage_weights[0], fed_fit.weights)  # PPFE stage 0 = FedAvg ridge
    base = fit.stage_weights[0]
    for t in (1, 2):
        for i in range(fed.num_clients):
            r = fed.y_train[i] - fed.x_train[i] @ base[i]
            w = ridge(fed.x_train[i], r, fit.lambdas[t] * 30)  # scalar loop reference
            assert np.allclose(fit.stage_weights[t, i], w)
        base = base + fit.stage_weights[t]
    assert np.allclose(fit.weights, base)
    assert fit.lambdas[2] <= fit.lambdas[1]  # progressively reduced (non-increasing)


def test_strict_decrease(fed):
    fit = fit_ppfe_linear(fed, num_stages=4, decrease="strict")
    assert np.all(np.diff(fit.lambdas[1:]) < 0)
    fit_g = fit_ppfe_linear(fed, num_stages=4, decrease="strict", selection="greedy")
    lam = fit_g.lambdas[1:]
    assert np.all(np.diff(lam[np.isfinite(lam)]) < 0)


def test_joint_validation_not_worse_than_greedy(fed):
    # joint search includes the greedy sequence, so its validation MSE is <= greedy's
    j = fit_ppfe_linear(fed, refit=False)
    g = fit_ppfe_linear(fed, refit=False, selection="greedy")
    assert j.val_mse[-1] <= g.val_mse[-1] + 1e-12


def test_alpha_zero_ppfe_matches_fedavg_and_beats_local():
    fed0 = make_linear_federation(num_clients=20, dim=10, n_train=20, alpha=0.0, seed=1)
    res = compare_methods(fed0)
    # alpha = 0: the global model is the truth; personal stages can only add a little noise
    assert res["PPFE"]["population_mse"] <= 1.1 * res["FedAvg"]["population_mse"]
    assert res["PPFE"]["population_mse"] < res["Local"]["population_mse"]


def test_deterministic_and_partial_weights(fed):
    a, b = fit_ppfe_linear(fed, seed=3), fit_ppfe_linear(fed, seed=3)
    assert np.array_equal(a.stage_weights, b.stage_weights)
    assert np.allclose(a.partial_weights(4), a.weights)
    with pytest.raises(ValueError):
        a.partial_weights(5)


@pytest.mark.parametrize("kwargs", [dict(num_stages=0), dict(val_fraction=0.0),
                                    dict(lambda_grid=[]), dict(lambda_selection="x"),
                                    dict(decrease="x"), dict(selection="x"),
                                    dict(federated_solver="x")])
def test_validation(fed, kwargs):
    with pytest.raises(ValueError):
        fit_ppfe_linear(fed, **kwargs)


@pytest.mark.parametrize("kwargs", [{}, dict(lambda_selection="per_client"), dict(decrease="strict"),
                                    dict(selection="greedy"), dict(refit=False),
                                    dict(federated_solver="one_shot_average", decrease="none")])
def test_path_is_bit_identical_to_separate_fits(fed, kwargs):
    path = fit_ppfe_linear_path(fed, max_stages=5, seed=2, **kwargs)
    for t, got in enumerate(path, start=1):
        want = fit_ppfe_linear(fed, num_stages=t, seed=2, **kwargs)
        assert np.array_equal(got.stage_weights, want.stage_weights)   # exact: same operations
        assert np.array_equal(got.lambdas, want.lambdas) and np.array_equal(got.val_mse, want.val_mse)


def test_path_cache_keys_on_the_lambda_prefix(fed, monkeypatch):
    # precondition: the fits for different T choose different λ for the first personal stage
    path = fit_ppfe_linear_path(fed, max_stages=5, seed=2)
    assert len({float(np.ravel(f.lambdas)[1]) for f in path[1:]}) > 1
    # mutation: a refit cache keyed on the stage index alone reuses another T's stage
    orig = ppfe_linear._memo
    monkeypatch.setattr(ppfe_linear, "_memo", lambda cache, key, fn: orig(
        cache, key[:3] if isinstance(key, tuple) else key, fn))
    bad = fit_ppfe_linear_path(fed, max_stages=5, seed=2)
    assert not all(np.array_equal(b.stage_weights, g.stage_weights) for b, g in zip(bad, path))
    with pytest.raises(ValueError):
        fit_ppfe_linear_path(fed, max_stages=0)
