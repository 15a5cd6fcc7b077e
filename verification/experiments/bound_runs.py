"""Engine runs and shared pieces of the numerical bound checks
(:mod:`verification.checks.bounds_pfedme`, :mod:`verification.checks.bounds_pfedme_nonconvex`,
:mod:`verification.checks.bounds_cgpfl`): the envelope factor and its test mutations, grids,
engine trajectories from a given start, Theorem 1's α_t-weighted averages, the engine's inner
residual ν, and the test problems (MLR with ℓ2 on every parameter; non-convex cosine clients).

Mutations of :func:`envelope_with_mutation` (for the tests): ``params["mutate"] =
("inflate_last", f)`` multiplies the measurement at the largest grid point by f (must FAIL once
f > the factor: that point's ratio then exceeds factor × the smallest ratio);
``("shape_is_measured", c)`` replaces the claimed shape by c × the measurement (must HOLD:
shows a FAILS verdict comes from the data, not from the machinery).
"""

from __future__ import annotations

import numpy as np
import torch

from algorithms.engine.base import State, broadcast
from algorithms.engine.models import MLR, QuadraticMean
from algorithms.engine.steps import prox_steps
from pfl_theory import moreau
from synthetic.contexts import classification_contexts
from synthetic.federation import Federation
from verification.experiments import pfedme_quadratic as ex
from verification.core.registry import Outcome, envelope_outcome
from synthetic.federation import compute_device

F64 = torch.float64
#: one hidden constant must fit the whole grid to within 2.5× — a shape that is right up to
#: its constant moves the ratio by far less (1.1–1.8 at quick size, seed 0); an exponent off
#: by ½ over 1.5 decades moves it by 10^0.75 = 5.6, a whole power by 31.6, and a flat shape
#: in place of Theorem 2's (the measured mean moves 2.7× over its grid) by 2.7.  (Issue 26:
#: the earlier factor 10 let exponent errors of ½ and flat shapes pass.)
ENVELOPE_FACTOR = 2.5
FACTOR_REASON = ("ratio measured/shape within 2.5x over >= 1.5 decades of the variable: an "
                 "exponent off by 1/2 moves it by 5.6")


def with_test_mutation(measured, shape, params: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(measured, shape)`` as float arrays with the test mutation of ``params["mutate"]``
    (module docstring) applied: ``("inflate_last", f)`` multiplies the last measurement,
    ``("shape_is_measured", f)`` replaces the shape by ``f × measured``."""
    m = np.array(measured, dtype=float)
    g = np.array(shape, dtype=float)
    mut = params.get("mutate")
    if mut is not None:
        kind, factor = mut
        if kind == "inflate_last":
            m[-1] *= float(factor)
        elif kind == "shape_is_measured":
            g = float(factor) * m
        else:
            raise ValueError(f"unknown mutation {kind!r}")
    return m, g


def envelope_with_mutation(measured, shape, params: dict, **kw) -> Outcome:
    """:func:`envelope_outcome` with the test mutations of the module docstring applied."""
    m, g = with_test_mutation(measured, shape, params)
    return envelope_outcome(m, g, factor=ENVELOPE_FACTOR, **kw)


def ratio_ends(measured: np.ndarray, shape: np.ndarray) -> str:
    """Where the measured/shape ratio starts and ends on a T grid, and the measured floor
    against the theorem's neighbourhood-dominated tail."""
    r = np.asarray(measured, dtype=float) / np.asarray(shape, dtype=float)
    return (f"measured/shape {r[0]:.3g} at the first T, {r[-1]:.3g} at the last (the measured "
            f"gap falls faster than the bound's e^(-eta_hat_1 mu_F T/2) and settles "
            f"{1 / r[-1]:.3g}x below its floor)")


def doubling_grid(t0: int, points: int) -> np.ndarray:
    """t0·2^j, j = 0..points−1 (points = 6 spans 32×, i.e. 1.505 decades)."""
    return (int(t0) * 2 ** np.arange(points)).astype(int)


def beta_for(kappa_f: float) -> float:
    """β = 1280 κ_F makes 128κ_F/β = 0.1, so η̂₁ = 1/(18.6 λ) and T ≥ 2/(η̂₁μ_F) is short."""
    return 1280.0 * kappa_f


class MLRAllL2(MLR):
    """MLR whose ℓ2 term covers the bias too (½ℓ2(‖W‖² + ‖b‖²)): μ-strongly convex with
    μ = ℓ2 (pFedMe A1(a)); the engine's MLR regularises W only and is flat along the softmax
    shift b ↦ b + c·1."""

    def per_client_loss(self, params, x, y):
        return super().per_client_loss(params, x, y) + 0.5 * self.l2 * (
            params["fc.bias"] ** 2).sum(-1)

    def grad(self, params, x, y):
        g, loss = super().grad(params, x, y)
        b = params["fc.bias"]
        return {**g, "fc.bias": g["fc.bias"] + self.l2 * b}, loss + 0.5 * self.l2 * (b ** 2).sum(-1)


def trajectory(alg, fed, model, w0: dict, rounds: int, seed: int) -> list[dict]:
    """Global models w^0 … w^rounds of an engine run started at ``w0`` (``[1, ...]``)."""
    n = fed.num_clients
    state = State(0, seed, {"global": w0, "personalized": broadcast(w0, n),
                            "local": broadcast(w0, n)})
    out = [w0]
    for _ in range(rounds):
        state = alg.round(state, fed, model)
        out.append(state.models["global"])
    return out


def quadratic_gap(ws: np.ndarray, w_star: torch.Tensor, hessian: torch.Tensor) -> np.ndarray:
    """F(w) − F* = ½(w − w*)ᵀ∇²F(w − w*) for quadratic clients (∇²F constant, exact)."""
    diff = torch.as_tensor(ws) - w_star
    return 0.5 * torch.einsum("ti,ij,tj->t", diff, hessian, diff).numpy()


def averaged(ws: np.ndarray, grid: np.ndarray, step: float, mu_f: float) -> np.ndarray:
    """w̄_T for T in ``grid`` (Theorem 1's α_t-weighted average of w^0..w^{T−1})."""
    avg = ex.averaged_iterates(torch.as_tensor(ws[:-1]), step, mu_f).numpy()
    return avg[grid - 1]



# ------------------------------------------------------------------ test problems
def mlr_federation(clients: int, dim: int, classes: int, samples: int, seed: int):
    """Planted softmax clients (one context, client models spread τ = 0.5), equal sizes;
    half of each client's samples train.  float64, CPU."""
    data = classification_contexts(clients, 1, dim=dim, num_classes=classes, tau=0.5,
                                   size_range=(2 * samples, 2 * samples), seed=seed)
    return Federation.from_client_arrays(data.xs, data.ys, num_classes=classes,
                                         train_fraction=0.5, seed=seed, device=compute_device(),
                                         dtype=F64, name="planted-mlr")


def inner_residual(model, fed, alg, points: list[dict], seed: int) -> float:
    """ν of eq. (8) as the engine achieves it: max over clients and ``points`` w of
    ‖∇h̃_i(θ̃; w, D)‖² after the engine's K inner steps from θ = w on a fresh mini-batch (the
    engine warm-starts later local rounds closer to the solution, so this is the worst case)."""
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    n = fed.num_clients
    for w in points:
        wl = {k: v.expand(n, *v.shape[1:]).clone() for k, v in w.items()}
        xb, yb = fed.train.gather(fed.sample_batches(1, alg.batch_size, gen)[0])
        th = prox_steps(model, dict(wl), wl, xb, yb, lam=alg.lam, lr=alg.personal_lr,
                        steps=alg.inner_steps)
        g, _ = model.grad(th, xb, yb)
        res = sum(((g[k] + alg.lam * (th[k] - wl[k])) ** 2).flatten(1).sum(1) for k in g)
        worst = max(worst, float(res.max()))
    return worst



class CosineClients(QuadraticMean):
    """Smooth non-convex client losses f̃(θ; x) = a Σ_k cos(ω(θ_k − x_k)) (bounded below,
    periodic), so f_i(θ) = a Σ_k Re(c_ik e^{iωθ_k}) with c_ik = mean_j e^{−iωx_ijk}; exact
    smoothness L = aω² max_{i,k}|c_ik| (:meth:`smoothness`).  Parameters ``{"theta"}``."""

    def __init__(self, dim: int, *, a: float, omega: float):
        super().__init__(dim)
        self.a, self.omega = float(a), float(omega)

    def per_client_loss(self, params, x, y):
        th = params["theta"][:, None, :]
        return self.a * torch.cos(self.omega * (th - x.flatten(2))).sum(-1).mean(1)

    def grad(self, params, x, y):
        th = params["theta"][:, None, :]
        arg = self.omega * (th - x.flatten(2))
        g = -self.a * self.omega * torch.sin(arg).mean(1)
        return {"theta": g}, self.a * torch.cos(arg).sum(-1).mean(1)

    def smoothness(self, x: torch.Tensor) -> float:
        """Exact L = sup_θ max_i ‖∇²f_i(θ)‖₂ (the Hessian is diagonal) for client data x [N, n, d]."""
        c = torch.complex(torch.cos(self.omega * x), -torch.sin(self.omega * x)).mean(1)
        return float(self.a * self.omega ** 2 * c.abs().max())


def envelope_grads(model, x, ws: torch.Tensor, lam: float, L: float):
    """∇F(w) = (1/N)Σλ(w − θ̂_i(w)) and F(w) for every row of ``ws`` [M, d], exact prox by
    gradient descent (step 1/(λ+L), contraction 2L/(λ+L) per step) to ‖∇h‖² ≤ 1e-24."""
    m, n, d = ws.shape[0], x.shape[0], ws.shape[1]
    xr = x[None].expand(m, -1, -1, -1).reshape(m * n, *x.shape[1:])
    wr = ws[:, None, :].expand(m, n, d).reshape(m * n, d)

    def f(theta):
        return model.per_client_loss({"theta": theta}, xr, None)

    env = moreau.prox(f, wr, lam=lam, tol=1e-24, method="gd", step=1.0 / (lam + L),
                      max_iter=5000)
    return env.grad.reshape(m, n, d).mean(1), env.value.reshape(m, n).mean(1)
