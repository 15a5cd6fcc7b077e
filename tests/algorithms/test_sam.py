"""Tests of algorithms/methods/sam/sam.py — SAM / LWSAM perturbations (PLGU eqs. 3–5, docs/formulas.md §E.D1–D3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from algorithms.methods.sam.sam import dual_exponent, perturbation, perturbed_params, sam_gradient, sam_step

F64 = torch.float64


def _flat(d: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([d[k].flatten(1) for k in sorted(d)], dim=1)


def _rand_grads(seed: int, n: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"w": torch.randn(n, 3, 2, generator=g, dtype=F64),
            "b": torch.randn(n, 2, generator=g, dtype=F64)}


def _ref_eps(g: np.ndarray, rho: float, p: float, exponent: str) -> np.ndarray:
    """Independent scalar (one client, numpy) evaluation of eq. 5 with Λ = I."""
    if math.isinf(p):
        return rho * np.sign(g)
    q = p / (p - 1)
    denom_pow = 1 / p if exponent == "corrected" else p - 1
    return rho * np.sign(g) * np.abs(g) ** (q - 1) / (np.sum(np.abs(g) ** q)) ** denom_pow


# ------------------------------------------------------------------ golden values
def test_golden_p2_is_normalised_gradient():
    g = {"a": torch.tensor([[3.0, 4.0]], dtype=F64)}
    assert torch.allclose(perturbation(g, rho=1.0)["a"], torch.tensor([[0.6, 0.8]], dtype=F64))
    # as printed at p = 2: ρ g / ‖g‖² = g/25
    assert torch.allclose(perturbation(g, rho=1.0, exponent="printed")["a"],
                          torch.tensor([[0.12, 0.16]], dtype=F64))


def test_golden_p_inf_and_p_three_halves():
    g = {"a": torch.tensor([[3.0, -4.0, 0.0]], dtype=F64)}
    assert torch.equal(perturbation(g, rho=0.5, p=math.inf)["a"],
                       torch.tensor([[0.5, -0.5, 0.0]], dtype=F64))
    # p = 3/2, q = 3: ρ sign(g) g² / (27 + 64)^{2/3}
    want = torch.tensor([[9.0, -16.0, 0.0]], dtype=F64) / 91.0 ** (2.0 / 3.0)
    assert torch.allclose(perturbation(g, rho=1.0, p=1.5)["a"], want, rtol=1e-13)


def test_dual_exponent():
    assert dual_exponent(2) == 2 and dual_exponent(3) == 1.5 and dual_exponent(math.inf) == 1


# ------------------------------------------------------------------ §E.D1 norm = ρ
@settings(max_examples=40, deadline=None)
@given(p=st.one_of(st.floats(1.05, 30.0), st.just(math.inf)), rho=st.floats(1e-3, 10.0),
       seed=st.integers(0, 10_000), scale=st.floats(-6, 6))
def test_corrected_perturbation_has_norm_rho_and_attains_dual_norm(p, rho, seed, scale):
    g = {k: v * 10.0 ** scale for k, v in _rand_grads(seed).items()}
    eps = _flat(perturbation(g, rho=rho, p=p))
    gf = _flat(g)
    # float64 powers |g|^{q-1}, sums of 8 terms: relative error ~1e-14, 1e-10 is slack
    assert torch.allclose(torch.linalg.vector_norm(eps, ord=p, dim=1),
                          torch.full((3,), rho, dtype=F64), rtol=1e-10)
    # Hölder equality: ⟨ε̃, g⟩ = ρ ‖g‖_q (ε̃ maximises the linearised loss on the ℓ_p ball)
    q = dual_exponent(p)
    assert torch.allclose((eps * gf).sum(1), rho * torch.linalg.vector_norm(gf, ord=q, dim=1),
                          rtol=1e-10)


@settings(max_examples=25, deadline=None)
@given(p=st.floats(1.2, 8.0), seed=st.integers(0, 10_000))
def test_printed_exponent_violates_norm_and_matches_its_closed_form(p, seed):
    g = {k: 3.0 * v for k, v in _rand_grads(seed).items()}
    eps = perturbation(g, rho=0.7, p=p, exponent="printed")
    for i in range(3):
        ref = _ref_eps(_flat(g)[i].numpy(), 0.7, p, "printed")
        np.testing.assert_allclose(_flat(eps)[i].numpy(), ref, rtol=1e-9, atol=1e-300)
    if abs(p - 2.0) > 0.05:  # generic p, gradients of norm ~ 3√8: far from ρ
        norms = torch.linalg.vector_norm(_flat(eps), ord=p, dim=1)
        assert (torch.abs(norms / 0.7 - 1) > 1e-3).all()


def test_printed_p2_norm_is_rho_over_gradient_norm():
    g = _rand_grads(1)
    norms = torch.linalg.vector_norm(_flat(perturbation(g, rho=0.3, exponent="printed")), dim=1)
    assert torch.allclose(norms, 0.3 / torch.linalg.vector_norm(_flat(g), dim=1), rtol=1e-12)


@pytest.mark.parametrize("p", [1.3, 2.0, 4.0, math.inf])
def test_matches_independent_scalar_reference(p):
    g = _rand_grads(7)
    eps = _flat(perturbation(g, rho=0.2, p=p))
    for i in range(3):
        np.testing.assert_allclose(eps[i].numpy(), _ref_eps(_flat(g)[i].numpy(), 0.2, p, "corrected"),
                                   rtol=1e-12)


# ------------------------------------------------------------------ §E.D2 layer scaling
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_layer_norms_are_rho_xi_gl_over_g(seed, data):
    g = _rand_grads(seed)
    layers = [["w"], ["b"]]
    xi_vals = data.draw(st.lists(st.floats(0.0, 2.0), min_size=6, max_size=6))
    xi = torch.tensor(xi_vals, dtype=F64).reshape(3, 2)
    xi[0, 1] = 0.0  # always one unperturbed layer
    eps = perturbation(g, rho=0.4, xi=xi, layers=layers)
    gnorm = torch.linalg.vector_norm(_flat(g), dim=1)
    for l, (name,) in enumerate(layers):
        got = torch.linalg.vector_norm(eps[name].flatten(1), dim=1)
        want = 0.4 * xi[:, l] * torch.linalg.vector_norm(g[name].flatten(1), dim=1) / gnorm
        assert torch.allclose(got, want, rtol=1e-12, atol=1e-15)
    assert torch.count_nonzero(eps["b"][0]) == 0


def test_xi_ones_equals_plain_sam():
    g = _rand_grads(3)
    a = perturbation(g, rho=0.1, p=3.0, xi=torch.ones(3, 2, dtype=F64), layers=[["w"], ["b"]])
    b = perturbation(g, rho=0.1, p=3.0)
    assert all(torch.equal(a[k], b[k]) for k in g)


# ------------------------------------------------------------------ §E.D3 first-order ascent
def _logistic_loss(theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-client mean logistic loss; theta [N, k], x [N, m, k], y [N, m] in {−1, +1}."""
    return torch.nn.functional.softplus(-y * torch.einsum("nmk,nk->nm", x, theta)).mean(1)


def test_first_order_ascent_beats_random_directions():
    gen = torch.Generator().manual_seed(0)
    n, m, k = 4, 40, 6
    x = torch.randn(n, m, k, generator=gen, dtype=F64)
    y = torch.sign(torch.randn(n, m, generator=gen, dtype=F64))
    theta = torch.randn(n, k, generator=gen, dtype=F64, requires_grad=True)
    (grad,) = torch.autograd.grad(_logistic_loss(theta, x, y).sum(), theta)
    theta = theta.detach()
    rho = 1e-3  # small: second-order terms ~ρ² ≪ first-order gap ~ρ‖g‖
    eps = perturbation({"t": grad}, rho=rho)["t"]
    best = _logistic_loss(theta + eps, x, y)
    rand = torch.randn(500, n, k, generator=gen, dtype=F64)
    rand = rho * rand / torch.linalg.vector_norm(rand, dim=2, keepdim=True)
    others = torch.stack([_logistic_loss(theta + r, x, y) for r in rand])
    assert (best >= others).all()


# ------------------------------------------------------------------ steps
def _quadratic(seed: int, n: int = 3):
    """Batched quadratic F_i(θ) = ½ θᵀA_iθ − b_iᵀθ over two layers; returns grad_fn and data."""
    gen = torch.Generator().manual_seed(seed)
    r = torch.randn(n, 5, 5, generator=gen, dtype=F64)
    A = r @ r.transpose(1, 2) + torch.eye(5, dtype=F64)
    bvec = torch.randn(n, 5, generator=gen, dtype=F64)

    def grad_fn(params):
        th = torch.cat([params["l1"], params["l2"]], dim=1)
        gr = torch.einsum("nij,nj->ni", A, th) - bvec
        return {"l1": gr[:, :3], "l2": gr[:, 3:]}

    params = {"l1": torch.randn(n, 3, generator=gen, dtype=F64),
              "l2": torch.randn(n, 2, generator=gen, dtype=F64)}
    return grad_fn, params, A.numpy(), bvec.numpy()


def test_sam_step_matches_numpy_reference_and_autograd():
    grad_fn, params, A, b = _quadratic(0)
    new = sam_step(params, grad_fn, rho=0.05, lr=0.1)
    th = _flat({"a": params["l1"], "b": params["l2"]}).numpy()
    for i in range(3):
        gi = A[i] @ th[i] - b[i]
        e = 0.05 * gi / np.linalg.norm(gi)
        want = th[i] - 0.1 * (A[i] @ (th[i] + e) - b[i])
        np.testing.assert_allclose(np.concatenate([new["l1"][i], new["l2"][i]]), want, rtol=1e-12)
    # the hand-written grad_fn agrees with autograd of the loss (guards the test's oracle)
    th_t = torch.cat([params["l1"], params["l2"]], 1).requires_grad_(True)
    loss = (0.5 * torch.einsum("ni,nij,nj->n", th_t, torch.tensor(A), th_t)
            - (torch.tensor(b) * th_t).sum(1)).sum()
    (ag,) = torch.autograd.grad(loss, th_t)
    assert torch.allclose(_flat(grad_fn(params)), torch.cat([ag[:, :3], ag[:, 3:]], 1))


def test_rho_zero_is_plain_sgd():
    grad_fn, params, _, _ = _quadratic(1)
    new = sam_step(params, grad_fn, rho=0.0, lr=0.3, xi=torch.rand(3, 2, dtype=F64),
                   layers=[["l1"], ["l2"]])
    g = grad_fn(params)
    assert all(torch.equal(new[k], params[k] - 0.3 * g[k]) for k in params)


def test_batched_equals_one_client_at_a_time():
    grad_fn, params, _, _ = _quadratic(2)
    xi = torch.tensor([[0.2, 0.8], [1.0, 0.0], [0.5, 0.5]], dtype=F64)
    layers = [["l1"], ["l2"]]
    res = sam_gradient(params, grad_fn, rho=0.1, p=3.0, xi=xi, layers=layers)
    for i in range(3):
        def gi(pr, i=i):
            full = {k: params[k].clone() for k in params}
            for k in pr:
                full[k][i] = pr[k][0]
            return {k: v[i:i + 1] for k, v in grad_fn(full).items()}
        one = sam_gradient({k: v[i:i + 1] for k, v in params.items()}, gi, rho=0.1, p=3.0,
                           xi=xi[i:i + 1], layers=layers)
        for k in params:
            assert torch.allclose(res.sam_grad[k][i], one.sam_grad[k][0], rtol=1e-14)
            assert torch.allclose(res.perturbation[k][i], one.perturbation[k][0], rtol=1e-14)


def test_perturbed_params_and_reused_grad():
    grad_fn, params, _, _ = _quadratic(3)
    g = grad_fn(params)
    pp = perturbed_params(params, g, rho=0.2)
    eps = perturbation(g, rho=0.2)
    assert all(torch.equal(pp[k], params[k] + eps[k]) for k in params)
    calls = []
    a = sam_gradient(params, lambda pr: calls.append(1) or grad_fn(pr), rho=0.2, grad=g)
    assert len(calls) == 1 and all(torch.equal(a.sam_grad[k], grad_fn(pp)[k]) for k in params)


# ------------------------------------------------------------------ edge cases, dtype, validation
def test_zero_gradient_client_gets_zero_perturbation_and_dtype_kept():
    g = {"a": torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=torch.float32)}
    for p in (1.5, 2.0, math.inf):
        for exponent in ("corrected", "printed") if p != math.inf else ("corrected",):
            e = perturbation(g, rho=1.0, p=p, exponent=exponent)["a"]
            assert e.dtype == torch.float32 and torch.isfinite(e).all()
            assert torch.count_nonzero(e[0]) == 0 and torch.count_nonzero(e[1]) == 2


def test_tiny_and_huge_gradients_do_not_overflow():
    g = {"a": torch.tensor([[1e-200, 2e-200], [1e200, -3e200]], dtype=F64)}
    e = perturbation(g, rho=1.0, p=1.1)["a"]  # q = 11: |g|^11 would under/overflow unscaled
    assert torch.allclose(torch.linalg.vector_norm(e, ord=1.1, dim=1), torch.ones(2, dtype=F64))


@pytest.mark.parametrize("kwargs,msg", [
    ({"p": 1.0}, "p must"), ({"p": 0.5}, "p must"), ({"rho": -1.0}, "rho"),
    ({"p": math.inf, "exponent": "printed"}, "undefined"), ({"exponent": "x"}, "exponent"),
    ({"xi": torch.ones(3, 3)}, "layers"),
    ({"xi": torch.ones(3, 3), "layers": [["w"], ["b"]]}, "shape"),
    ({"xi": -torch.ones(3, 2), "layers": [["w"], ["b"]]}, ">= 0"),
    ({"xi": torch.ones(3, 2), "layers": [["w"], ["c"]]}, "cover"),
    ({"xi": torch.ones(3, 2), "layers": [["w", "b"], ["b"]]}, "two layers"),
])
def test_validation(kwargs, msg):
    kw = {"rho": 0.1, **kwargs}
    with pytest.raises(ValueError, match=msg):
        perturbation(_rand_grads(0), **kw)


def test_mismatched_client_dimension_rejected():
    with pytest.raises(ValueError, match="leading client dimension"):
        perturbation({"a": torch.ones(2, 3), "b": torch.ones(3, 3)}, rho=0.1)
    with pytest.raises(ValueError, match="lr"):
        grad_fn, params, _, _ = _quadratic(0)
        sam_step(params, grad_fn, rho=0.1, lr=-1.0)
