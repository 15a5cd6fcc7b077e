"""Planted-context generators: shapes, determinism, planted structure, validation."""

import numpy as np
import pytest

from synthetic.contexts import (classification_contexts, label_skew_contexts,
                                planted_model_vectors, regression_contexts)


def test_classification_shapes_determinism_and_balance():
    a = classification_contexts(12, 3, dim=8, num_classes=4, size_range=(20, 40), seed=1)
    b = classification_contexts(12, 3, dim=8, num_classes=4, size_range=(20, 40), seed=1)
    assert len(a.xs) == len(a.ys) == 12
    for x, y, x2 in zip(a.xs, a.ys, b.xs):
        assert x.shape[1] == 8 and 20 <= x.shape[0] <= 40 and y.shape == (x.shape[0],)
        assert y.dtype == np.int64 and y.min() >= 0 and y.max() < 4
        np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(np.bincount(a.assignment), [4, 4, 4])
    assert len(a.context_models) == 3 and a.context_models[0][0].shape == (8, 4)


def test_classification_tau_zero_labels_follow_context_model():
    d = classification_contexts(6, 2, dim=5, num_classes=3, tau=0.0, seed=2)
    for i, (x, y) in enumerate(zip(d.xs, d.ys)):
        w, b = d.context_models[d.assignment[i]]
        np.testing.assert_array_equal(y, np.argmax(x @ w + b, axis=1))


def test_classification_feature_variances_follow_fedprox_law():
    d = classification_contexts(1, 1, dim=4, size_range=(20000, 20000), seed=3)
    var = d.xs[0].var(axis=0)
    # Var x_j = (j+1)^-1.2 around the client mean v; 20k samples -> ~1% relative sd
    np.testing.assert_allclose(var, np.arange(1, 5) ** -1.2, rtol=0.05)


def test_lognormal_sizes_clipped():
    d = classification_contexts(30, 2, dim=3, size_range=(10, 1000), sizes="lognormal", seed=4)
    n = np.array([x.shape[0] for x in d.xs])
    assert n.min() >= 10 and n.max() <= 1000 and len(set(n.tolist())) > 5


def test_label_skew_contexts_share_class_subsets():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 300)
    x = np.c_[y, rng.normal(size=y.size)]  # first column records the label
    d = label_skew_contexts(x, y, 8, 4, classes_per_context=3, size_range=(30, 60), seed=5)
    subsets = [tuple(s) for s in d.context_models]
    assert len(set(subsets)) == 4 and all(len(s) == 3 for s in subsets)
    seen = set()
    for i, (xi, yi) in enumerate(zip(d.xs, d.ys)):
        assert set(yi.tolist()) <= set(subsets[d.assignment[i]])
        np.testing.assert_array_equal(xi[:, 0], yi)  # rows stay paired with labels
        rows = {tuple(r) for r in xi}
        assert not rows & seen  # no sample given to two clients
        seen |= rows
        assert 30 <= len(yi) <= 60


def test_label_skew_errors():
    y = np.repeat(np.arange(4), 10)
    x = np.zeros((40, 2))
    with pytest.raises(ValueError, match="too few"):
        label_skew_contexts(x, y, 4, 2, classes_per_context=2, size_range=(30, 30))
    with pytest.raises(ValueError, match="distinct"):
        label_skew_contexts(x, y, 8, 7, classes_per_context=2, size_range=(2, 2))
    with pytest.raises(ValueError, match="integer labels"):
        label_skew_contexts(x, y.astype(float), 4, 2)


def test_regression_contexts_recover_centres_without_noise():
    d = regression_contexts(6, 2, dim=4, tau=0.0, noise=0.0, seed=6)
    for i, (x, y) in enumerate(zip(d.xs, d.ys)):
        w = np.linalg.lstsq(x, y, rcond=None)[0]
        np.testing.assert_allclose(w, d.context_models[d.assignment[i]], atol=1e-10)


def test_regression_contexts_return_the_client_models_the_targets_come_from():
    # noise 0: least squares on a client's data is its model (to float64 round-off of a
    # 4-dim solve); with noise the same seed returns the same models (the noise is scaled,
    # not skipped); τ = 0: every client model is its context's centre
    d = regression_contexts(8, 3, dim=4, tau=0.5, noise=0.0, size_range=(12, 12), seed=3)
    assert len(d.client_models) == 8
    for x, y, w in zip(d.xs, d.ys, d.client_models):
        assert w.shape == (4,)
        np.testing.assert_allclose(np.linalg.lstsq(x, y, rcond=None)[0], w, atol=1e-10)
    spread = [np.abs(w - d.context_models[k]).max() for w, k in zip(d.client_models, d.assignment)]
    assert min(spread) > 0.01                        # τ = 0.5: not the centres themselves
    noisy = regression_contexts(8, 3, dim=4, tau=0.5, noise=0.7, size_range=(12, 12), seed=3)
    for a, b in zip(noisy.client_models, d.client_models):
        np.testing.assert_array_equal(a, b)
    flat = regression_contexts(8, 3, dim=4, tau=0.0, noise=0.7, seed=3)
    for w, k in zip(flat.client_models, flat.assignment):
        np.testing.assert_array_equal(w, flat.context_models[k])


def test_classification_contexts_return_the_client_models_the_labels_come_from():
    d = classification_contexts(6, 2, dim=5, num_classes=3, tau=0.4, size_range=(30, 30), seed=2)
    assert len(d.client_models) == 6
    for x, y, (w, b), k in zip(d.xs, d.ys, d.client_models, d.assignment):
        assert w.shape == (5, 3) and b.shape == (3,)
        np.testing.assert_array_equal(y, np.argmax(x @ w + b, axis=1))
        assert np.abs(w - d.context_models[k][0]).max() > 0.01   # τ·noise added
    assert label_skew_contexts(np.zeros((40, 2)), np.repeat(np.arange(4), 10), 4, 2,
                               classes_per_context=2, size_range=(5, 5)).client_models is None


def test_planted_model_vectors_min_separation_and_noise():
    x, a = planted_model_vectors(30, 3, 5, separation=7.0, noise=0.0, seed=7)
    centres = np.array([x[a == k][0] for k in range(3)])
    gaps = [np.linalg.norm(centres[i] - centres[j]) for i in range(3) for j in range(i + 1, 3)]
    assert min(gaps) == pytest.approx(7.0, rel=1e-12)
    for k in range(3):
        assert np.ptp(x[a == k], axis=0).max() == 0.0  # noise 0: identical within a context
    x2, a2 = planted_model_vectors(30, 3, 5, separation=7.0, noise=0.0, seed=7)
    np.testing.assert_array_equal(x, x2)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(num_clients=3, k0=4), "k0 must be <= num_clients"), (dict(num_clients=0, k0=1), "num_clients"),
    (dict(num_clients=4, k0=2, separation=-1.0), "separation"), (dict(num_clients=4, k0=2, tau=-1.0), "tau"),
    (dict(num_clients=4, k0=2, size_range=(10, 5)), "low <= high"), (dict(num_clients=4, k0=2, sizes="zipf"), "sizes"),
])
def test_generator_validation(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        classification_contexts(**kwargs)


def test_planted_vectors_validation():
    with pytest.raises(ValueError, match="noise"):
        planted_model_vectors(5, 2, 3, separation=1.0, noise=-0.1)
    with pytest.raises(ValueError, match="separation"):
        planted_model_vectors(5, 2, 3, separation=0.0, noise=0.1)


def _recovered_fraction(data, k0, num_classes):
    """Fraction of clients whose k-means cluster (on per-client least-squares fits of the
    one-hot labels) matches the planted context, under the best label matching."""
    from scipy.optimize import linear_sum_assignment

    from pfl_theory.kmeans import kmeans

    fits = [np.linalg.lstsq(np.c_[x, np.ones(len(x))], np.eye(num_classes)[y], rcond=None)[0].ravel()
            for x, y in zip(data.xs, data.ys)]
    labels = kmeans(np.asarray(fits), k0, seed=0).labels
    agree = np.zeros((k0, k0))
    for a, b in zip(labels, data.assignment):
        agree[a, b] += 1
    rows, cols = linear_sum_assignment(-agree)
    return agree[rows, cols].sum() / len(labels)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_feature_law_makes_planted_contexts_recoverable(seed):
    from synthetic.contexts import classification_contexts

    data = classification_contexts(24, 3, dim=10, num_classes=5, tau=0.1, beta=0.0,
                                   size_range=(200, 300), feature_shift=0.0, seed=seed)
    assert _recovered_fraction(data, 3, 5) == 1.0


def test_feature_shift_keeps_the_draws():
    from synthetic.contexts import classification_contexts

    a = classification_contexts(6, 2, dim=4, num_classes=3, feature_shift=1.0, seed=5)
    b = classification_contexts(6, 2, dim=4, num_classes=3, feature_shift=0.0, seed=5)
    assert np.array_equal(a.assignment, b.assignment)
    for (wa, ba), (wb, bb) in zip(a.context_models, b.context_models):
        assert np.array_equal(wa, wb) and np.array_equal(ba, bb)
    with pytest.raises(ValueError, match="feature_shift"):
        classification_contexts(6, 2, feature_shift=-1.0)
