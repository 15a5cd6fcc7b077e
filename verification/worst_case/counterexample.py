"""A worst case above a bound, made concrete: extracted, saved, replayed through the engine.

After a solve with PEPit's dimension-reduction heuristic (trace minimisation: a low-rank
Gram matrix with the same worst-case value), every client function is known only at the
points the method visited: triplets (x_k, ∇f(x_k), f(x_k)) in ℝ^D.  They are projected
on the span of all visited points (rank r), and a quadratic ∇f(x) = Ax − b is fitted to
each client's triplets (least squares, A symmetrised, its spectrum clipped to the class
[μ, L]); when every client's gradients are reproduced to :data:`FIT_TOL` the worst case
*is* a quadratic instance, and the engine runs it (:func:`replay`) — its metric should
equal the PEP's worst case.  Otherwise the triplets are saved as they are (an
interpolating function exists by the PEP's constraints, but not as a quadratic).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pfl_theory.oracle_methods import QuadraticOracle
from verification.worst_case import instances
from verification.worst_case.pep import Solved
from verification.worst_case.problems import Setting

#: largest relative gradient residual of the quadratic fit that counts as "a quadratic"
FIT_TOL = 1e-3


def extract(solved: Solved, s: Any) -> dict[str, Any]:
    """The worst-case instance of a solved PEP (:func:`~verification.worst_case.problems.
    federated`, :func:`verification.worst_case.cgpfl.worst_case`; solve it with
    ``reduce_dimension=True`` for a low rank); ``s`` gives the class (``mu``, ``L``)."""
    fns = solved.handles["functions"]
    trip = [[(np.asarray(x.eval()), np.asarray(g.eval()), float(f.eval()))
             for x, g, f in fn.list_of_points] for fn in fns]
    anchors = _anchors(solved.handles)
    allpts = np.stack([v for vs in anchors.values() for v in vs]
                      + [v for t in trip for x, g, _ in t for v in (x, g)])
    _, sv, vt = np.linalg.svd(allpts, full_matrices=False)
    r = max(1, int((sv > 1e-3 * sv[0]).sum()))     # Gram eigenvalues above 1e-6 relative
    basis = vt[:r]                                       # rows: orthonormal directions
    lo = s.mu if s.mu is not None else -s.L
    clients, worst_res = [], 0.0
    for t in trip:
        X = np.stack([basis @ x for x, _, _ in t])
        G = np.stack([basis @ g for _, g, _ in t])
        coef, *_ = np.linalg.lstsq(np.hstack([X, np.ones((len(X), 1))]), G, rcond=None)
        A = 0.5 * (coef[:r].T + coef[:r])
        ev, V = np.linalg.eigh(A)
        A = (V * np.clip(ev, lo, s.L)) @ V.T
        c = coef[r]
        res = float(np.abs(X @ A + c - G).max() / max(np.abs(G).max(), 1e-300))
        worst_res = max(worst_res, res)
        clients.append({"A": A.tolist(), "b": (-c).tolist(), "residual": res,
                        "triplets": [(list(basis @ x), list(basis @ g), f) for x, g, f in t]})
    out = {"worst_case": solved.value, "rank": r, "quadratic": worst_res <= FIT_TOL,
           "fit_residual": worst_res, "clients": clients}
    for name, vs in anchors.items():       # w0, w_star (pFedMe, FedAvg); omega0 (CGPFL)
        out[name] = [(basis @ v).tolist() for v in vs] if name in _LISTS else (basis @ vs[0]).tolist()
    return out


_LISTS = ("omega0",)


def _anchors(handles: dict[str, Any]) -> dict[str, list[np.ndarray]]:
    """The named points of a solved PEP (every handle but the functions), evaluated."""
    out = {}
    for name, v in handles.items():
        if name == "functions" or v is None:
            continue
        pts = v if isinstance(v, (list, tuple)) else [v]
        out[name] = [np.asarray(p.eval()) for p in pts]
    return out


def replay(data: dict[str, Any], s: Setting, metric: str) -> float:
    """The engine's metric on the extracted quadratic instance (needs rank ≥ 2 for the
    engine's quadratic model: a rank-1 instance is embedded in ℝ² with a zero coordinate)."""
    if not data["quadratic"]:
        raise ValueError("the worst case is not a quadratic instance: nothing to replay")
    r = data["rank"]
    d = max(r, 2)

    def pad(v):
        return np.concatenate([np.asarray(v, dtype=float), np.zeros(d - r)])
    clients = []
    for c in data["clients"]:
        A = np.full((d, d), 0.0)
        A[:r, :r] = np.asarray(c["A"])
        if d > r:
            A[r:, r:] = np.eye(d - r) * (s.mu if s.mu is not None else s.L)
        clients.append(QuadraticOracle(A, pad(c["b"])))
    return instances.metric_on(clients, pad(data["w_star"]), pad(data["w0"]), s, metric)


def save(data: dict[str, Any], path: Path) -> Path:
    """Write the instance as JSON (``path``'s folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path
