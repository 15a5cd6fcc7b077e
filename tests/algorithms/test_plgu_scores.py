"""Tests of algorithms/methods/sam/plgu_scores.py — PLGU scores ξ (eqs. 6, 10) and top-D selection (§E.D4)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from algorithms.methods.sam.plgu_scores import personalization_scores, top_layers

F64 = torch.float64
LAYERS = [["fc1.weight", "fc1.bias"], ["fc2.weight", "fc2.bias"], ["head"]]


def _model(seed: int, n: int | None):
    g = torch.Generator().manual_seed(seed)
    lead = () if n is None else (n,)
    return {"fc1.weight": torch.randn(*lead, 4, 3, generator=g, dtype=F64),
            "fc1.bias": torch.randn(*lead, 4, generator=g, dtype=F64),
            "fc2.weight": torch.randn(*lead, 2, 4, generator=g, dtype=F64),
            "fc2.bias": torch.randn(*lead, 2, generator=g, dtype=F64),
            "head": torch.randn(*lead, 5, generator=g, dtype=F64)}


def _ref_scores(theta, w, n):
    """Independent per-client, per-layer scalar loop (numpy)."""
    out = np.zeros((n, len(LAYERS)))
    for i in range(n):
        for l, group in enumerate(LAYERS):
            diff = np.concatenate([(theta[k][i] - w[k]).numpy().ravel() for k in group])
            out[i, l] = math.sqrt(float(np.sum(diff ** 2))) / diff.size
    return out


def test_golden_hand_sized():
    theta = {"a": torch.tensor([[3.0, 4.0]], dtype=F64), "b": torch.tensor([[1.0, 1.0, 1.0, 1.0]], dtype=F64)}
    w = {"a": torch.zeros(2, dtype=F64), "b": torch.zeros(4, dtype=F64)}
    raw = personalization_scores(theta, w, [["a"], ["b"]], normalize=False)
    assert torch.allclose(raw, torch.tensor([[5.0 / 2, 2.0 / 4]], dtype=F64))  # ‖·‖/dim
    xi = personalization_scores(theta, w, [["a"], ["b"]])
    assert torch.allclose(xi, torch.tensor([[2.5 / 3.0, 0.5 / 3.0]], dtype=F64))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_scalar_loop_and_per_client_globals(seed):
    theta, w = _model(seed, 4), _model(seed + 100, None)
    raw = personalization_scores(theta, w, LAYERS, normalize=False)
    np.testing.assert_allclose(raw.numpy(), _ref_scores(theta, w, 4), rtol=1e-13)
    w_rep = {k: v.expand(4, *v.shape).clone() for k, v in w.items()}
    assert torch.allclose(personalization_scores(theta, w_rep, LAYERS, normalize=False), raw)
    xi = personalization_scores(theta, w, LAYERS)
    assert torch.allclose(xi, raw / raw.sum(1, keepdim=True))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 1e3), identical=st.lists(st.booleans(), min_size=3, max_size=3))
def test_score_invariants(seed, scale, identical):
    theta, w = _model(seed, 3), _model(seed + 1, None)
    theta = {k: w[k] + scale * (v - w[k]) for k, v in theta.items()}
    for i, same in enumerate(identical):  # some clients equal to the global model
        if same:
            for k in theta:
                theta[k][i] = w[k]
    xi = personalization_scores(theta, w, LAYERS)
    assert (xi >= 0).all()
    for i, same in enumerate(identical):
        if same:
            assert torch.count_nonzero(xi[i]) == 0  # ξ = 0 when personalized = global
        else:
            assert math.isclose(float(xi[i].sum()), 1.0, rel_tol=1e-12)
    # normalised scores are invariant to rescaling the personalization offset
    half = {k: w[k] + 0.5 * (v - w[k]) for k, v in theta.items()}
    assert torch.allclose(personalization_scores(half, w, LAYERS), xi, rtol=1e-12)


def test_zero_policy_uniform():
    w = _model(0, None)
    theta = {k: v.expand(2, *v.shape).clone() for k, v in w.items()}
    theta["head"][1] += 1.0
    xi = personalization_scores(theta, w, LAYERS, on_zero="uniform")
    assert torch.allclose(xi[0], torch.full((3,), 1 / 3, dtype=F64))
    assert torch.allclose(xi[1], torch.tensor([0.0, 0.0, 1.0], dtype=F64))


def test_batched_equals_one_client_at_a_time():
    theta, w = _model(5, 4), _model(6, None)
    xi = personalization_scores(theta, w, LAYERS)
    for i in range(4):
        one = personalization_scores({k: v[i:i + 1] for k, v in theta.items()}, w, LAYERS)
        assert torch.equal(one[0], xi[i])


# ------------------------------------------------------------------ top-D selection
def _ref_top(xi: np.ndarray, D: int) -> np.ndarray:
    mask = np.zeros(xi.shape, dtype=bool)
    for i, row in enumerate(xi):
        for l in sorted(range(len(row)), key=lambda l: (-row[l], l))[:D]:
            mask[i, l] = True
    return mask


@settings(max_examples=40, deadline=None)
@given(data=st.data(), L=st.integers(1, 7), n=st.integers(1, 4))
def test_top_layers_matches_brute_force_with_ties(data, L, n):
    # few distinct values → many ties
    vals = data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5]), min_size=n * L, max_size=n * L))
    xi = torch.tensor(vals, dtype=F64).reshape(n, L)
    D = data.draw(st.integers(0, L))
    mask = top_layers(xi, D)
    assert mask.dtype == torch.bool and (mask.sum(1) == D).all()
    np.testing.assert_array_equal(mask.numpy(), _ref_top(xi.numpy(), D))
    # every selected score ≥ every unselected one
    for i in range(n):
        if 0 < D < L:
            assert xi[i][mask[i]].min() >= xi[i][~mask[i]].max()
    assert torch.equal(top_layers(xi, D), mask)  # deterministic


def test_top_layers_tie_break_lower_index_and_extremes():
    xi = torch.tensor([[0.2, 0.4, 0.4, 0.0]])
    assert top_layers(xi, 1).tolist() == [[False, True, False, False]]
    assert top_layers(xi, 2).tolist() == [[False, True, True, False]]
    assert top_layers(torch.zeros(1, 4), 2).tolist() == [[True, True, False, False]]
    assert not top_layers(xi, 0).any() and top_layers(xi, 4).all()


@pytest.mark.parametrize("call,msg", [
    (lambda: top_layers(torch.ones(2, 3), 4), "D must"),
    (lambda: top_layers(torch.ones(3), 1), "shape"),
    (lambda: top_layers(torch.tensor([[float("nan"), 1.0]]), 1), "NaN"),
    (lambda: top_layers(torch.ones(2, 3), -1), "D must"),
    (lambda: personalization_scores(_model(0, 2), _model(1, None), LAYERS, on_zero="x"), "on_zero"),
    (lambda: personalization_scores(_model(0, 2), _model(1, None), [["head"], ["head"]]), "two layers"),
    (lambda: personalization_scores(_model(0, 2), _model(1, None), [["nope"]]), "missing"),
    (lambda: personalization_scores(_model(0, 2), _model(1, 3), LAYERS), "matches neither"),
    (lambda: personalization_scores(_model(0, 2), _model(1, None), []), "at least one"),
])
def test_validation(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()
