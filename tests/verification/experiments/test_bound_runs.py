"""verification.experiments.bound_runs: the envelope mutations, grids, the test problems' constants
against brute force, and the α_t-weighted average against its definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from verification.experiments import bound_runs as br
from verification.estimators import federation as est
from verification.experiments import pfedme_quadratic as ex

F64 = torch.float64


def test_envelope_with_mutation():
    m, g = np.array([1.0, 2.0, 4.0]), np.array([1.0, 2.0, 4.0])
    assert br.envelope_with_mutation(m, g, {}).holds
    assert not br.envelope_with_mutation(m, g, {"mutate": ("inflate_last", 11.0)}).holds
    bad = br.envelope_with_mutation(m, g / np.array([1.0, 10.0, 100.0]), {})
    assert not bad.holds  # the shape falls faster than the measurement: an upper bound refuted
    loose = br.envelope_with_mutation(m, g * np.array([1.0, 10.0, 100.0]), {})
    assert loose.holds  # the shape falls slower: a loose upper bound, not refuted (issue 33)
    fixed = br.envelope_with_mutation(m, g / np.array([1.0, 10.0, 100.0]),
                                      {"mutate": ("shape_is_measured", 2.0)})
    assert fixed.holds and fixed.extra["C"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown mutation"):
        br.envelope_with_mutation(m, g, {"mutate": ("nope", 1.0)})


def test_doubling_grid_spans_one_and_a_half_decades():
    grid = br.doubling_grid(47, 6)
    assert grid.tolist() == [47, 94, 188, 376, 752, 1504]
    assert math.log10(grid[-1] / grid[0]) >= 1.5


def test_cosine_clients_smoothness_exact_against_brute_force():
    fed = ex.quadratic_federation(num_clients=3, dim=2, noise=0.3, samples=20, seed=0)
    x, y = est.client_data(fed)
    model = br.CosineClients(2, a=1 / 16, omega=2.0)
    L = model.smoothness(x)
    # the Hessian is diagonal: −aω² mean_j cos(ω(θ_k − x_jk)); brute force over a fine θ grid
    th = torch.linspace(0, math.pi, 20001, dtype=F64)
    curv = (model.a * model.omega ** 2 * torch.cos(model.omega * (th[None, None, :, None]
            - x[:, :, None, :])).mean(1)).abs().max()
    assert L == pytest.approx(float(curv), rel=1e-7)  # grid step 1.6e-4 rad near the peak
    pts = [{"theta": torch.tensor([[0.3, 1.1]], dtype=F64)}]
    assert est.sampled_smoothness(model, x, y, pts, iterations=100) <= L * (1 + 1e-12)
    g, _ = model.grad({"theta": torch.tensor([[0.3, 1.1]] * 3, dtype=F64)}, x, y)
    ref, _ = model.autograd_grad({"theta": torch.tensor([[0.3, 1.1]] * 3, dtype=F64)}, x, y)
    torch.testing.assert_close(g["theta"], ref["theta"], rtol=0, atol=1e-14)


def test_averaged_matches_the_definition():
    rng = np.random.default_rng(0)
    ws = rng.normal(size=(6, 2))
    step, mu_f = 0.1, 0.5
    got = br.averaged(ws, np.array([3, 5]), step, mu_f)
    for row, T in zip(got, (3, 5)):
        a = np.array([(1 - step * mu_f / 2) ** -(t + 1) for t in range(T)])
        np.testing.assert_allclose(row, (a[:, None] * ws[:T]).sum(0) / a.sum(), atol=1e-12)


def test_quadratic_gap_and_mlr_all_l2():
    h = torch.tensor([[2.0, 0.5], [0.5, 1.0]], dtype=F64)
    w = np.array([[1.0, -1.0]])
    assert br.quadratic_gap(w, torch.zeros(2, dtype=F64), h)[0] == pytest.approx(
        0.5 * (2 - 1 + 1))
    model = br.MLRAllL2(3, 2, l2=0.7)
    params = model.init(2, seed=1, dtype=F64, same=False)
    x = torch.as_tensor(np.random.default_rng(2).normal(size=(2, 5, 3)))
    y = torch.as_tensor(np.random.default_rng(3).integers(0, 2, size=(2, 5)))
    g, loss = model.grad(params, x, y)
    ref, ref_loss = model.autograd_grad(params, x, y)
    for k in g:
        torch.testing.assert_close(g[k], ref[k], rtol=0, atol=1e-13)
    torch.testing.assert_close(loss, ref_loss, rtol=0, atol=1e-13)
