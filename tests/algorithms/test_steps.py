"""Tests of algorithms/engine/steps.py: the logit-space inner solve for MLR (pFedMe eq. 7) equals
the generic K-step loop, and :func:`prox_steps` picks it only where it applies."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

import algorithms.engine.steps as steps
from algorithms.engine.models import DNN, MLR
from algorithms.engine.steps import generic_prox_steps, mlr_prox_steps, prox_layout, prox_steps

F64 = torch.float64

# Both paths evaluate the same recurrence (steps.mlr_prox_steps eqs. 1–3) in float64 with
# different summation orders: a few ulps (2.2e-16) per product, over K ≤ 6 contracting steps
# (0 < κ < 1, small η).  1e-12 relative to the largest entry leaves ~3 decades of margin and
# is still ~8 decades below the effect of one step more or a wrong weight (tests below).
RTOL = 1e-12


def _problem(n, b, d, c, seed, *, same=False, feature_shape=None):
    gen = torch.Generator().manual_seed(seed)
    model = MLR(d, c)
    theta = model.init(n, seed=seed, dtype=F64, same=False)
    anchor = theta if same else {k: v + 0.3 * torch.randn(v.shape, generator=gen, dtype=F64)
                                 for k, v in theta.items()}
    x = torch.randn(n, b, *(feature_shape or (d,)), generator=gen, dtype=F64)
    y = torch.randint(0, c, (n, b), generator=gen)
    return model, theta, anchor, x, y


def _assert_close(got, want, rtol=RTOL):
    assert got.keys() == want.keys()
    for k in want:
        scale = float(want[k].abs().max())
        torch.testing.assert_close(got[k], want[k], rtol=0, atol=rtol * scale, msg=k)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 4), b=st.integers(1, 12), d=st.integers(1, 8), c=st.integers(2, 5),
       k=st.integers(1, 6), lam=st.floats(0.1, 20.0), eta=st.floats(1e-3, 0.04),
       extra=st.sampled_from([0.0, 0.001, 0.5]), same=st.booleans(), class_major=st.booleans(),
       seed=st.integers(0, 2**16))
def test_logit_space_steps_equal_the_generic_loop(n, b, d, c, k, lam, eta, extra, same,
                                                  class_major, seed):
    model, theta, anchor, x, y = _problem(n, b, d, c, seed, same=same)
    kw = dict(lam=lam, lr=eta, steps=k, extra_l2=extra)
    want = generic_prox_steps(model, dict(theta), anchor, x, y, **kw)
    if class_major:                 # the layout pFedMe trains in (prox_layout): same numbers
        theta = prox_layout(model, theta)
        anchor = theta if same else prox_layout(model, anchor)
    _assert_close(mlr_prox_steps(dict(theta), anchor, x, y, **kw), want)


@pytest.mark.parametrize("k", [1, 5])
def test_pfedme_setting_and_image_features(k):
    # pFedMe's synthetic setting (|D| = 20, d = 60, C = 10, λ = 15, η_p = 0.09) with μ = 0.001,
    # and features with more than one axis (flattened like MLR.forward does)
    model, theta, anchor, x, y = _problem(5, 20, 60, 10, 3, feature_shape=(3, 4, 5))
    kw = dict(lam=15.0, lr=0.09 / 15, steps=k, extra_l2=0.001)
    _assert_close(mlr_prox_steps(dict(theta), anchor, x, y, **kw),
                  generic_prox_steps(model, dict(theta), anchor, x, y, **kw))


@pytest.mark.parametrize("wrong", [dict(steps=4), dict(extra_l2=0.01), dict(lam=14.9),
                                   dict(lr=0.0101)])
def test_the_comparison_fails_for_a_different_solve(wrong):
    # one step fewer, a slightly different μ, λ or η: far outside the tolerance above
    model, theta, anchor, x, y = _problem(3, 10, 6, 4, 1)
    kw = dict(lam=15.0, lr=0.01, steps=5, extra_l2=0.0)
    want = generic_prox_steps(model, dict(theta), anchor, x, y, **kw)
    with pytest.raises(AssertionError):
        _assert_close(mlr_prox_steps(dict(theta), anchor, x, y, **{**kw, **wrong}), want)


def test_anchor_shared_with_theta_is_the_same_as_a_copy():
    # Z_A = Z_0 is reused when theta's tensors are the anchor's (pFedMe's first local round)
    model, theta, _, x, y = _problem(4, 9, 5, 3, 2)
    kw = dict(lam=20.0, lr=0.01, steps=5)
    shared = mlr_prox_steps(dict(theta), theta, x, y, **kw)
    copied = mlr_prox_steps(dict(theta), {k: v.clone() for k, v in theta.items()}, x, y, **kw)
    _assert_close(shared, copied)
    _assert_close(shared, generic_prox_steps(model, dict(theta), theta, x, y, **kw))


def test_float32_matches_the_float64_solve():
    # float32 as the engine runs it: relative error of a few float32 ulps (1.2e-7) per op over
    # K = 5 steps; 1e-5 is ~10× that and ~100× below one step more (checked)
    model, theta, anchor, x, y = _problem(6, 20, 60, 10, 4)
    kw = dict(lam=15.0, lr=0.09 / 15, steps=5, extra_l2=0.001)
    want = generic_prox_steps(model, dict(theta), anchor, x, y, **kw)
    f32 = lambda p: {k: v.float() for k, v in p.items()}   # noqa: E731
    got = {k: v.double() for k, v in
           mlr_prox_steps(f32(theta), f32(anchor), x.float(), y, **kw).items()}
    _assert_close(got, want, rtol=1e-5)
    one_more = generic_prox_steps(model, dict(theta), anchor, x, y, **{**kw, "steps": 6})
    with pytest.raises(AssertionError):
        _assert_close(one_more, want, rtol=1e-3)


def test_prox_steps_dispatch(monkeypatch):
    # MLR with l2 = 0 takes the logit-space path; l2 > 0 (bias not regularised) and other
    # models the generic loop — and both dispatches give the generic loop's numbers
    calls = []
    fast = steps.mlr_prox_steps
    monkeypatch.setattr(steps, "mlr_prox_steps",
                        lambda *a, **k: calls.append(1) or fast(*a, **k))
    _, theta, anchor, x, y = _problem(2, 6, 4, 3, 5)
    kw = dict(lam=15.0, lr=0.01, steps=3)
    for model, fast_path in [(MLR(4, 3), True), (MLR(4, 3, l2=0.1), False)]:
        calls.clear()
        got = prox_steps(model, dict(theta), anchor, x, y, **kw)
        assert bool(calls) is fast_path
        _assert_close(got, generic_prox_steps(model, dict(theta), anchor, x, y, **kw))
    class BiasL2(MLR):              # another objective behind MLR's name: its own gradient
        def grad(self, params, x, y):
            g, loss = super().grad(params, x, y)
            return {**g, "fc.bias": g["fc.bias"] + params["fc.bias"]}, loss

    calls.clear()
    got = prox_steps(BiasL2(4, 3), dict(theta), anchor, x, y, **kw)
    assert not calls
    _assert_close(got, generic_prox_steps(BiasL2(4, 3), dict(theta), anchor, x, y, **kw))
    dnn = DNN(4, 3, hidden=5)
    params = dnn.init(2, seed=0, dtype=F64, same=False)
    calls.clear()
    got = prox_steps(dnn, dict(params), params, x, y, **kw)
    assert not calls
    _assert_close(got, generic_prox_steps(dnn, dict(params), params, x, y, **kw))


def test_map_tiles_runs_tiles_on_threads_of_one_torch_thread_each():
    # with T = 2 torch threads: results in order, every tile computed with ONE torch thread
    # (the point: no intra-op barriers), the caller's count restored; T = 1: a plain loop
    import threading

    before = torch.get_num_threads()
    seen = []

    def tile(s):
        seen.append((torch.get_num_threads(), threading.get_ident()))
        return s * s

    try:
        torch.set_num_threads(2)
        assert steps.map_tiles(tile, range(5), "cpu") == [0, 1, 4, 9, 16]
        assert {t for t, _ in seen} == {1} and torch.get_num_threads() == 2
        assert threading.get_ident() not in {i for _, i in seen}
        torch.set_num_threads(1)
        seen.clear()
        assert steps.map_tiles(tile, range(3), "cpu") == [0, 1, 4]
        assert seen == [(1, threading.get_ident())] * 3
    finally:
        torch.set_num_threads(before)


def test_map_tiles_restores_the_thread_count_when_a_tile_fails():
    before = torch.get_num_threads()

    def tile(s):
        raise ValueError(f"tile {s}")

    try:
        torch.set_num_threads(2)
        with pytest.raises(ValueError, match="tile"):
            steps.map_tiles(tile, range(3), "cpu")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_prox_layout_keeps_values_and_the_solve_keeps_the_layout():
    # MLR's weight becomes class-major ([N, C, d] in memory), values unchanged; the solve
    # returns its weight in the layout it was given (class-major in, class-major out;
    # contiguous in, contiguous out); other models' parameters are returned as they are
    model, theta, anchor, x, y = _problem(3, 5, 4, 3, 6)
    cm = prox_layout(model, theta)
    assert torch.equal(cm["fc.weight"], theta["fc.weight"]) and cm["fc.bias"] is theta["fc.bias"]
    assert cm["fc.weight"].transpose(1, 2).is_contiguous()
    assert not cm["fc.weight"].is_contiguous()
    kw = dict(lam=15.0, lr=0.01, steps=3)
    out = mlr_prox_steps(dict(cm), prox_layout(model, anchor), x, y, **kw)
    assert out["fc.weight"].transpose(1, 2).is_contiguous()
    assert mlr_prox_steps(dict(theta), anchor, x, y, **kw)["fc.weight"].is_contiguous()
    dnn = DNN(4, 3, hidden=5)
    params = dnn.init(2, seed=0, dtype=F64)
    assert prox_layout(dnn, params) is params
    assert prox_layout(MLR(4, 3, l2=0.1), theta) is theta


def _cnn_problem(n=3, b=5, seed=0):
    from algorithms.engine.models import CNN

    gen = torch.Generator().manual_seed(seed)
    model = CNN(1, 16, 4, channels=(3, 5), hidden=20)
    params = model.init(n, seed=seed, dtype=F64, same=False)
    x = torch.randn(4, n, b, 256, generator=gen, dtype=F64)
    y = torch.randint(0, 4, (4, n, b), generator=gen)
    return model, params, x, y


@pytest.mark.parametrize("owned", [False, True])
@pytest.mark.parametrize("which", ["dnn", "cnn"])
def test_local_sgd_in_place_gives_the_plain_iterates_bit_for_bit(which, owned):
    """The in-place steps (gradients scaled in place, the CNN's written into the previous
    step's) give ``θ ← θ − lr·g`` exactly; the caller's tensors are written only when
    ``owned``."""
    if which == "cnn":
        model, params, x, y = _cnn_problem()
    else:
        model = DNN(6, 3, hidden=7)
        params = model.init(3, seed=0, dtype=F64, same=False)
        gen = torch.Generator().manual_seed(0)
        x, y = torch.randn(4, 3, 5, 6, generator=gen, dtype=F64), torch.randint(0, 3, (4, 3, 5))
    before = {k: v.clone() for k, v in params.items()}
    want = dict(before)
    for r in range(x.shape[0]):
        g, _ = model.grad(want, x[r], y[r])
        want = {k: want[k] - 0.1 * g[k] for k in want}
    got = steps.local_sgd(model, params, x, y, 0.1, owned=owned)
    for k in want:
        assert torch.equal(got[k], want[k]), k
        assert torch.equal(params[k], got[k] if owned else before[k]), k


def test_generic_prox_steps_in_place_gives_the_formula_bit_for_bit():
    model, theta, _, y = _cnn_problem()
    x = _cnn_problem()[2][0]
    anchor = {k: v + 0.01 for k, v in theta.items()}
    before = {k: v.clone() for k, v in theta.items()}
    keep = 1 - 0.05 * (2.0 + 0.1)
    want = dict(theta)
    for _ in range(3):
        g, _ = model.grad(want, x, y[0])
        want = {k: torch.add(want[k] * keep, anchor[k], alpha=0.05 * 2.0).sub_(g[k], alpha=0.05)
                for k in want}
    got = generic_prox_steps(model, theta, anchor, x, y[0], lam=2.0, lr=0.05, steps=3,
                             extra_l2=0.1)
    for k in want:
        assert torch.equal(got[k], want[k]), k
        assert torch.equal(theta[k], before[k]), k
