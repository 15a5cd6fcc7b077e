"""pfl_theory.kmeans computes the same bits as its one-shot formulation.

The blocked distances (``_diff_sq_dists``), k-means++'s pairwise table, Lloyd's per-restart
centre sums and the indexed inertia are speed changes only: the clustering (labels, centres,
inertia, history, winning restart, iterations) and every CGPFL model must stay bit-identical.
The oracle is the implementation before that change, kept verbatim below (``_REFERENCE``
patched into the module).  ``test_oracle_detects_last_bit_changes`` shows the comparison
can fail: a centre moved by one ulp, or the inertia by the expansion, is caught.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import pfl_theory.kmeans as km


# -- the implementation before the blocked version (verbatim) ------------------------------
def _ref_sq_dists(x, c):
    r, k, d = c.shape
    if r * x.shape[0] * k * d <= km._DIFF_LIMIT:
        return ((x[None, :, None, :] - c[:, None, :, :]) ** 2).sum(-1)
    xx = (x * x).sum(-1)[None, :, None]
    cc = (c * c).sum(-1)[:, None, :]
    xc = (x @ c.reshape(r * k, d).T).reshape(x.shape[0], r, k).permute(1, 0, 2)
    return (xx - 2.0 * xc + cc).clamp_min_(0.0)


def _ref_exact_inertia(x, w, c, labels):
    if c.shape[0] * x.shape[0] * x.shape[1] <= km._EXACT_LIMIT:
        own = torch.gather(c, 1, labels[..., None].expand(-1, -1, c.shape[2]))
        return (((x[None] - own) ** 2).sum(-1) * w).sum(1)
    return torch.stack([(((x - c[r][labels[r]]) ** 2).sum(-1) * w).sum() for r in range(c.shape[0])])


def _ref_kmeanspp(x, w, k, restarts, rng):
    n = x.shape[0]
    u = torch.as_tensor(rng.random((restarts, k)), device=x.device)
    rows = torch.arange(restarts, device=x.device)

    def draw(p, uj):
        total = p.sum(1, keepdim=True)
        p = torch.where(total > 0, p, w.expand_as(p))
        cdf = torch.cumsum(p, 1)
        idx = torch.searchsorted(cdf, (uj * cdf[:, -1])[:, None].contiguous(), right=True)
        return idx[:, 0].clamp_max(n - 1)

    idx = draw(w.expand(restarts, n), u[:, 0])
    chosen = [idx]
    d2 = km._sq_dists(x, x[idx][:, None, :])[..., 0]
    d2[rows, idx] = 0.0
    for j in range(1, k):
        idx = draw(w * d2, u[:, j])
        chosen.append(idx)
        d2 = torch.minimum(d2, km._sq_dists(x, x[idx][:, None, :])[..., 0])
        d2[rows, idx] = 0.0
    return x[torch.stack(chosen, 1)]


def _ref_lloyd_batched(x, w, c, max_iter):
    k = c.shape[1]
    wx = w[:, None] * x
    labels = None
    history = []
    n_iter = 0
    for _ in range(max_iter):
        d2 = km._sq_dists(x, c)
        if labels is not None:
            history.append(km._objective(x, w, c, labels, d2))
        new = d2.argmin(-1)
        km._reseed_empty(x, w, c, new, d2)
        if labels is not None and torch.equal(new, labels):
            break
        labels = new
        mass = torch.zeros(c.shape[:2], dtype=x.dtype, device=x.device)
        mass.scatter_add_(1, labels, w.expand_as(labels))
        onehot = torch.nn.functional.one_hot(labels, k).to(x.dtype)
        if c.numel() * x.shape[0] <= km._DIFF_LIMIT:
            sums = (onehot[..., None] * wx[None, :, None, :]).sum(1)
        else:
            sums = (onehot.transpose(1, 2).reshape(-1, x.shape[0]) @ wx).reshape(c.shape)
        c = torch.where(mass[..., None] > 0, sums / mass.clamp_min(1e-300)[..., None], c)
        n_iter += 1
    if labels is None:
        labels = km._sq_dists(x, c).argmin(-1)
    if len(history) < max(n_iter, 1):
        history.append(km._objective(x, w, c, labels))
    return labels, c, n_iter, torch.stack(history)


_REFERENCE = {"_sq_dists": _ref_sq_dists, "_exact_inertia": _ref_exact_inertia,
              "_kmeanspp": _ref_kmeanspp, "_lloyd_batched": _ref_lloyd_batched}


def _with(patches: dict, fn):
    saved = {name: getattr(km, name) for name in patches}
    try:
        for name, f in patches.items():
            setattr(km, name, f)
        return fn()
    finally:
        for name, f in saved.items():
            setattr(km, name, f)


def _bits(a) -> bytes:
    return np.ascontiguousarray(np.asarray(a.detach().cpu() if isinstance(a, torch.Tensor) else a)).tobytes()


def _assert_same(new: km.KMeansResult, ref: km.KMeansResult):
    assert _bits(new.labels) == _bits(ref.labels)
    assert _bits(new.centers) == _bits(ref.centers)          # bit for bit (signed zeros too)
    assert (new.inertia, new.restart, new.n_iter) == (ref.inertia, ref.restart, ref.n_iter)
    assert new.history == ref.history


def _both(x, k, **kw):
    return km.kmeans(x, k, **kw), _with(_REFERENCE, lambda: km.kmeans(x, k, **kw))


# -- the checks ------------------------------------------------------------------------------
@pytest.mark.parametrize("diff_limit", [2_000_000, 5_000])
@pytest.mark.parametrize("k", [1, 2, 5, 10, 11, 25, 40])
def test_same_bits_at_several_k(k, diff_limit, monkeypatch):
    """N = 40, d = 61 at R = 1, 3, 10 restarts: one-row and many-row blocks, k-means++'s
    pairwise table (R(k-1) > N) and, with the difference limit lowered to 5000, the
    expansion path for part of the calls, against the one-shot reference."""
    monkeypatch.setattr(km, "_DIFF_LIMIT", diff_limit)
    x = np.random.default_rng(k).normal(size=(40, 61)) * np.linspace(0.5, 3, 61)
    for restarts in (1, 3, 10):
        _assert_same(*_both(x, k, restarts=restarts, seed=k))


@pytest.mark.parametrize("k", [3, 12, 45])   # 45: the pairwise table too
def test_same_bits_with_two_torch_threads(k):
    """``pflt select-k`` runs at torch's default threads (2 here): above the serial size the
    blocks are reduced by a parallel kernel, which must not change the bits either."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        x = np.random.default_rng(k).normal(size=(120, 700))   # R*N*k*d > 2e6 for k >= 12
        _assert_same(*_both(x, k, restarts=3, seed=k))
    finally:
        torch.set_num_threads(before)


def test_pairwise_table_is_used_when_cheaper(monkeypatch):
    """The k-means++ table of all N^2 distances is built exactly when R(k-1) > N (so the
    tests above exercise it), and not above _PAIRWISE_LIMIT."""
    built = []
    real = km._diff_sq_dists
    monkeypatch.setattr(km, "_diff_sq_dists",
                        lambda x, c: built.append(c.shape[:2] == (1, x.shape[0])) or real(x, c))
    x = np.random.default_rng(0).normal(size=(40, 61))
    for k, restarts, expect in ((6, 10, True), (5, 10, False), (15, 3, True), (14, 3, False)):
        built.clear()
        km.kmeans(x, k, restarts=restarts, seed=0)
        assert any(built) is expect, (k, restarts)
    monkeypatch.setattr(km, "_PAIRWISE_LIMIT", 40 * 40 - 1)
    built.clear()
    km.kmeans(x, 15, restarts=3, seed=0)
    assert not any(built)


def test_same_bits_duplicates_weights_and_torch_input():
    """Duplicated points (empty clusters re-seeded or left empty), weights, torch float32 in."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(30, 7))
    x[:20] = x[0]
    w = rng.uniform(0.5, 2.0, size=30)
    for k in (2, 8, 15, 30):
        _assert_same(*_both(x, k, restarts=4, seed=k, weights=w))
    xt = torch.as_tensor(rng.normal(size=(50, 9)), dtype=torch.float32)
    _assert_same(*_both(xt, 12, restarts=5, seed=1))


@pytest.mark.parametrize("limits", [dict(_BLOCK=1), dict(_BLOCK=10 ** 9), dict(_PAIRWISE_LIMIT=0)])
def test_same_bits_for_any_block_size(limits, monkeypatch):
    """One-element blocks, one block for everything and no pairwise table give the same bits."""
    for name, v in limits.items():
        monkeypatch.setattr(km, name, v)
    x = np.random.default_rng(5).normal(size=(25, 13))
    for k in (3, 9, 25):
        _assert_same(*_both(x, k, restarts=3, seed=k))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), d=st.integers(1, 40), k_frac=st.floats(0, 1), restarts=st.integers(1, 6),
       seed=st.integers(0, 2 ** 16), dup=st.booleans(), weighted=st.booleans())
def test_property_same_bits(n, d, k_frac, restarts, seed, dup, weighted):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.01, 100)
    if dup:
        x[: n // 2] = x[-1]
    k = 1 + int(k_frac * (n - 1))
    w = rng.uniform(0.1, 5.0, size=n) if weighted else None
    _assert_same(*_both(x, k, restarts=restarts, seed=seed, weights=w))


def test_same_bits_in_cgpfl_rounds():
    """Three CGPFL rounds (algorithms.methods.clustered.cgpfl, which clusters with pfl_theory.kmeans) at
    K = 1, 3, 8 on 16 planted clients: every model and recorded tensor is bit-identical."""
    from algorithms.methods.clustered.cgpfl import CGPFL
    from algorithms.engine.models import build_model
    from verification.experiments.cgpfl import planted_federation

    pl = planted_federation(16, 3, dim=5, size_range=(20, 30), seed=0)
    model = build_model("mlr", pl.fed)
    hp = dict(lam=12.0, personal_lr=0.05, inner_steps=3, lr=0.02, local_scale=12.0,
              local_rounds=2, batch_size=5, kmeans_restarts=4)

    def run(k):
        alg = CGPFL(num_contexts=k, **hp)
        s = alg.init(pl.fed, model, 0)
        for _ in range(3):
            s = alg.round(s, pl.fed, model)
        return s

    for k in (1, 3, 8):
        new, ref = run(k), _with(_REFERENCE, lambda: run(k))
        for key in ref.models:
            for name, v in ref.models[key].items():
                assert _bits(new.models[key][name]) == _bits(v), (k, key, name)
        for name, v in ref.tensors.items():
            assert _bits(new.tensors[name]) == _bits(v), (k, name)


def test_oracle_detects_last_bit_changes():
    """The comparison is sharp: one centre coordinate moved by one ulp, or the inertia
    computed by the expansion (equal up to rounding), is reported as a difference."""
    x = np.random.default_rng(7).normal(size=(40, 61)) + 100.0  # offset: the expansion cancels
    ref = _with(_REFERENCE, lambda: km.kmeans(x, 5, restarts=3, seed=1))

    def one_ulp(*a):
        labels, c, n_iter, hist = _ref_lloyd_batched(*a)
        c = c.clone()
        c[:, 0, 0] = torch.nextafter(c[:, 0, 0], torch.full_like(c[:, 0, 0], np.inf))
        return labels, c, n_iter, hist

    def expanded(xx, w, c, labels):  # |x|^2 - 2 x.c + |c|^2: equal up to rounding
        own = c[torch.arange(c.shape[0])[:, None], labels]
        return (((xx * xx).sum(-1)[None] - 2 * (xx[None] * own).sum(-1)
                 + (own * own).sum(-1)) * w).sum(1)

    for mutation in ({"_lloyd_batched": one_ulp}, {"_exact_inertia": expanded}):
        changed = _with({**_REFERENCE, **mutation}, lambda: km.kmeans(x, 5, restarts=3, seed=1))
        with pytest.raises(AssertionError):
            _assert_same(changed, ref)


@pytest.mark.parametrize("k", [1, 2, 7, 50])
def test_match_clusters_cost_same_bits(k, monkeypatch):
    """The blocked Hungarian cost matrix equals the one-shot one bit for bit (checked by
    capturing what linear_sum_assignment receives), with one-row blocks too."""
    rng = np.random.default_rng(k)
    old, new = rng.normal(size=(k, 61)) * 3, rng.normal(size=(k, 61)) * 3
    seen = []
    real = km.linear_sum_assignment
    monkeypatch.setattr(km, "linear_sum_assignment", lambda c: seen.append(c.copy()) or real(c))
    for block in (km._BLOCK, 1):
        monkeypatch.setattr(km, "_BLOCK", block)
        km.match_clusters(old, new)
    one_shot = ((old[:, None, :] - new[None, :, :]) ** 2).sum(-1)
    assert all(c.tobytes() == one_shot.tobytes() for c in seen) and len(seen) == 2
