"""Quadratic clients for the engine: the concrete instances of the worst-case checks.

:class:`FixedQuadratic` is an engine model whose client ``i`` minimises
``f_i(θ) = ½θᵀA_iθ − b_iᵀθ`` exactly: every sample of client ``i`` carries the flattened
``(A_i, b_i)``, so every mini-batch — drawn with replacement by the engine — gives the full
gradient (full batch by construction).  :func:`engine_trajectory` runs any registered
algorithm from a chosen start; :func:`random_quadratics` draws clients in the class
S(μ, L) with both ends of the spectrum attained.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from algorithms.engine.base import State, broadcast
from algorithms.engine.models import Model
from pfl_theory.oracle_methods import QuadraticOracle
from pfl_theory.validation import positive_int
from synthetic.federation import compute_device

F64 = torch.float64


@dataclass
class FixedQuadratic(Model):
    """Engine model ``f_i(θ) = ½θᵀA_iθ − b_iᵀθ``; features ``[d² + d]`` = (vec A_i, b_i)."""

    dim: int

    def __post_init__(self):
        positive_int("dim", self.dim)
        self.layers = [["theta"]]

    def init_single(self, gen):
        return {"theta": torch.zeros(self.dim, dtype=F64)}

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.dim
        return x[..., :d * d].reshape(*x.shape[:-1], d, d), x[..., d * d:]

    def forward(self, params, x):  # no classes: the loss is all there is
        return -self.per_client_loss(params, x, None)[:, None, None].expand(-1, x.shape[1], 1)

    def per_client_loss(self, params, x, y):
        A, b = self._split(x.flatten(2))
        th = params["theta"][:, None, :]                               # [N, 1, d]
        quad = 0.5 * (th[..., None, :] @ A @ th[..., :, None])[..., 0, 0]
        return (quad - (b * th).sum(-1)).mean(1)

    def grad(self, params, x, y):
        A, b = self._split(x.flatten(2))
        th = params["theta"][:, None, :, None]                         # [N, 1, d, 1]
        g = ((A @ th)[..., 0] - b).mean(1)
        return {"theta": g}, self.per_client_loss(params, x, y)


def random_quadratics(n: int, d: int, *, mu: float, L: float, seed: int,
                      b_scale: float = 1.0) -> list[QuadraticOracle]:
    """``n`` clients with Hessian spectra in [μ, L] (μ and L attained when d ≥ 2, the
    others uniform), random eigenbases and linear terms ``b ~ N(0, b_scale² I)``."""
    if d < 2:
        raise ValueError(f"need d >= 2 to attain both mu and L, got {d}")
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(positive_int("n", n)):
        q, _ = np.linalg.qr(rng.normal(size=(d, d)))
        eig = np.concatenate([[mu, L], rng.uniform(mu, L, d - 2)])
        out.append(QuadraticOracle((q * eig) @ q.T, b_scale * rng.normal(size=d)))
    return out


def federation(clients: list[QuadraticOracle], *, samples: int = 4):
    """The engine federation of ``clients`` (float64, CPU, ``samples`` identical rows)."""
    from synthetic.federation import Federation

    d = clients[0].b.shape[0]
    xs = [np.tile(np.concatenate([c.A.ravel(), c.b])[None], (2 * samples, 1)) for c in clients]
    ys = [np.zeros(2 * samples, dtype=np.int64) for _ in clients]
    fed = Federation.from_client_arrays(xs, ys, num_classes=2, train_fraction=0.5, seed=0,
                                        device=compute_device(), dtype=F64, name=f"quadratic-d{d}")
    return fed, FixedQuadratic(d)


def engine_trajectory(alg, fed, model, w0: np.ndarray, rounds: int, *,
                      seed: int = 0) -> np.ndarray:
    """Global models ``w^0 … w^rounds`` ``[rounds + 1, d]`` of ``alg`` run by the engine from
    ``w0`` (every per-client model starts at ``w0`` too)."""
    state = alg.init(fed, model, seed)
    w = {"theta": torch.as_tensor(np.asarray(w0, dtype=float), dtype=F64).reshape(1, -1)}
    models = {k: (w if k == "global" else broadcast(w, v["theta"].shape[0]))
              for k, v in state.models.items()}
    state = State(0, seed, models, dict(state.tensors))
    out = [w["theta"][0].clone()]
    for _ in range(positive_int("rounds", rounds)):
        state = alg.round(state, fed, model)
        out.append(state.models["global"]["theta"][0].clone())
    return torch.stack(out).numpy()


def optimum(clients: list[QuadraticOracle], *, lam: float | None = None) -> np.ndarray:
    """Minimiser of mean_i f_i (``lam=None``) or of the mean Moreau envelope
    F = mean_i F_i, ∇²F_i = λA_i(A_i + λI)⁻¹ (pFedMe eq. 6 on a quadratic)."""
    d = clients[0].b.shape[0]
    if lam is None:
        H = sum(c.A for c in clients) / len(clients)
        return np.linalg.solve(H, sum(c.b for c in clients) / len(clients))
    H = sum(lam * c.A @ np.linalg.inv(c.A + lam * np.eye(d)) for c in clients) / len(clients)
    g0 = sum(lam * np.linalg.solve(c.A + lam * np.eye(d), c.b) for c in clients) / len(clients)
    return np.linalg.solve(H, g0)   # ∇F(w) = Hw − g0 (g0 = mean λ(A+λI)⁻¹b)
