import numpy as np
import pytest
import torch

from synthetic import fedprox


def test_golden_seed0_matches_independent_numpy_draws():
    # Independent few-line re-implementation of the reference script's draw order.
    rng = np.random.RandomState(0)
    n = (rng.lognormal(4, 2, 5).astype(int) + 50) * 5
    mean_w = rng.normal(0, 0.5, 5)
    b = rng.normal(0, 0.5, 5)
    mean_x = [rng.normal(b[i], 1, 8) for i in range(5)]
    w0 = rng.normal(mean_w[0], 1, (8, 3))
    b0 = rng.normal(mean_w[0], 1, 3)
    cov = np.diag(np.power(np.arange(1, 9), -1.2))
    x0 = rng.multivariate_normal(mean_x[0], cov, n[0])
    xs, ys = fedprox.generate(0.5, 0.5, num_clients=5, dim=8, num_classes=3, seed=0)
    assert [len(x) for x in xs] == list(n)
    np.testing.assert_array_equal(xs[0], x0)
    np.testing.assert_array_equal(ys[0], np.argmax(x0 @ w0 + b0, axis=1))


def _reference_script(alpha, beta, iid, num_users, seed, dim=60, num_class=10, cap=None):
    """The reference generator's draw order written out as the FedProx/pFedMe script
    does it (global-RNG calls on one RandomState, covariance diagonal by ``np.power`` in a
    loop, labels row by row as argmax of a softmax) — independent of synthetic.fedprox.
    ``cap``: each client draws min(n_i, cap) samples (the capped draw's definition)."""
    rs = np.random.RandomState(seed)
    samples = (rs.lognormal(4, 2, (num_users)).astype(int) + 50) * 5
    if cap is not None:
        samples = np.minimum(samples, cap)
    mean_w = rs.normal(0, alpha, num_users)
    mean_b = mean_w
    b_feat = rs.normal(0, beta, num_users)
    mean_x = np.zeros((num_users, dim))
    diagonal = np.zeros(dim)
    for j in range(dim):
        diagonal[j] = np.power((j + 1), -1.2)
    cov_x = np.diag(diagonal)
    for i in range(num_users):
        mean_x[i] = np.ones(dim) * b_feat[i] if iid else rs.normal(b_feat[i], 1, dim)
    if iid:
        w_global = rs.normal(0, 1, (dim, num_class))
        b_global = rs.normal(0, 1, num_class)
    xs, ys = [], []
    for i in range(num_users):
        w = rs.normal(mean_w[i], 1, (dim, num_class))
        b = rs.normal(mean_b[i], 1, num_class)
        if iid:
            w, b = w_global, b_global
        xx = rs.multivariate_normal(mean_x[i], cov_x, samples[i])
        yy = np.zeros(samples[i])
        for j in range(samples[i]):
            tmp = np.dot(xx[j], w) + b
            ex = np.exp(tmp)
            yy[j] = np.argmax(ex / np.sum(np.exp(tmp)))
        xs.append(xx)
        ys.append(yy)
    return xs, ys


@pytest.mark.parametrize("iid", [False, True])
def test_bit_identical_to_the_reference_script_at_full_dimension(iid):
    # dim = 60, 10 classes as in the papers; 12 clients keep the row-by-row labels quick.
    # Exact equality: Python's ``**`` for the covariance diagonal moved features by up to
    # 8.9e-16 (caught here, not at dim = 8), so no tolerance is allowed.
    ref_x, ref_y = _reference_script(0.5, 0.5, iid, 12, seed=0)
    xs, ys = fedprox.generate(0.5, 0.5, iid=iid, num_clients=12, seed=0)
    assert [len(x) for x in xs] == [len(x) for x in ref_x]
    for a, b in zip(xs, ref_x):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(ys, ref_y):
        np.testing.assert_array_equal(a, b.astype(np.int64))


def test_paper_setting_sizes_range_and_shapes():
    xs, ys = fedprox.generate(0.5, 0.5, seed=0)
    sizes = [len(x) for x in xs]
    assert len(xs) == 100 and all(x.shape[1] == 60 for x in xs)
    # every size is a multiple of 5 and at least (0 + 50) * 5
    assert min(sizes) >= 250 and all(s % 5 == 0 for s in sizes)
    assert all(y.min() >= 0 and y.max() < 10 for y in ys)



def test_iid_labels_follow_one_global_rule():
    # Independent re-draw of the iid branch: W_global, b_global come after the sizes,
    # mean_W, B draws; every client's labels must be argmax(x W_global + b_global).
    rng = np.random.RandomState(2)
    rng.lognormal(4, 2, 3)
    rng.normal(0, 0.0, 3)
    rng.normal(0, 0.0, 3)
    w_g = rng.normal(0, 1, (5, 4))
    b_g = rng.normal(0, 1, 4)
    xs, ys = fedprox.generate(0.0, 0.0, iid=True, num_clients=3, dim=5, num_classes=4, seed=2)
    for x, y in zip(xs, ys):
        np.testing.assert_array_equal(y, np.argmax(x @ w_g + b_g, axis=1))


def test_deterministic_and_seed_sensitive():
    a = fedprox.generate(1.0, 1.0, num_clients=4, dim=6, seed=3)
    b = fedprox.generate(1.0, 1.0, num_clients=4, dim=6, seed=3)
    c = fedprox.generate(1.0, 1.0, num_clients=4, dim=6, seed=4)
    assert all(np.array_equal(u, v) for u, v in zip(a[0], b[0]))
    assert not np.array_equal(a[0][0][:5], c[0][0][:5])


@pytest.mark.parametrize("kwargs", [dict(alpha=-1, beta=0), dict(alpha=0, beta=-0.1),
                                    dict(alpha=0, beta=0, num_clients=0),
                                    dict(alpha=0, beta=0, dim=0),
                                    dict(alpha=0, beta=0, num_classes=1)])
def test_bad_input(kwargs):
    alpha, beta = kwargs.pop("alpha"), kwargs.pop("beta")
    with pytest.raises(ValueError):
        fedprox.generate(alpha, beta, **kwargs)


def test_federation_split_fraction():
    fed = fedprox.federation(0.5, 0.5, num_clients=6, dim=10, seed=0, train_fraction=0.9,
                             device="cpu")
    xs, _ = fedprox.generate(0.5, 0.5, num_clients=6, dim=10, seed=0)
    total = fed.train.counts + fed.test.counts
    assert total.tolist() == [len(x) for x in xs]
    assert all(int(tr) == int(np.floor(0.9 * len(x))) for tr, x in zip(fed.train.counts, xs))


def test_capped_draw_is_the_reference_order_with_smaller_sizes():
    # the cap applies while drawing: client i draws min(n_i, cap) rows, nothing more
    ref_x, ref_y = _reference_script(0.5, 0.5, False, 12, seed=1, cap=300)
    xs, ys = fedprox.generate(0.5, 0.5, num_clients=12, seed=1, max_client_size=300)
    assert max(len(x) for x in xs) == 300
    for a, b, c, d in zip(xs, ref_x, ys, ref_y):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(c, d.astype(np.int64))


def test_streamed_federation_equals_the_federation_of_the_drawn_arrays():
    from synthetic.federation import Federation

    for cap in (None, 400):
        fed = fedprox.federation(0.5, 0.5, num_clients=7, seed=2, max_client_size=cap,
                                 device="cpu")
        xs, ys = fedprox.generate(0.5, 0.5, num_clients=7, seed=2, max_client_size=cap)
        ref = Federation.from_client_arrays(xs, ys, num_classes=10, seed=2, device="cpu")
        for a, b in ((fed.train, ref.train), (fed.test, ref.test)):
            for f in ("x", "y", "offsets", "counts"):
                assert torch.equal(getattr(a, f), getattr(b, f)), (cap, f)


def test_federation_holds_one_client_of_float64_at_a_time():
    # numpy memory (traced; torch's tensors are not) stays near one client's draw, while
    # drawing every client first (the former lists) needs all of them at once
    import tracemalloc

    fedprox.federation(0.5, 0.5, num_clients=2, dim=3, device="cpu")   # one-time set-up
    sizes = fedprox.client_sizes(100, seed=0)
    one, every = int(sizes.max()) * 60 * 8, int(sizes.sum()) * 60 * 8
    tracemalloc.start()
    fedprox.federation(0.5, 0.5, num_clients=100, seed=0, device="cpu")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # a client's draw lives as normals, features and a shuffled copy (≤ 3 arrays)
    assert peak < 3 * one <= every / 2


def test_auto_cap_is_the_largest_that_fits():
    sizes = fedprox.client_sizes(500, seed=0)
    assert fedprox.auto_client_cap(500, seed=0, budget_bytes=int(sizes.sum()) * 240) is None
    budget = int(sizes.sum()) * 240 // 4
    cap = fedprox.auto_client_cap(500, seed=0, budget_bytes=budget)
    fits = lambda m: np.minimum(sizes, m).sum() * 60 * 4 <= budget  # noqa: E731
    assert fits(cap) and not fits(cap + 1)
