"""``pflt select-k``: choose CGPFL's number of contexts K̂ = argmin_K e(K) (IJCAI eq. 11).

Input: client model vectors (``--models FILE.npy`` of shape [N, d]) or a planted-cluster
spec (``--planted N,K0,d``, see :func:`synthetic.contexts.planted_model_vectors`).  Prints
the e(K) table (complexity term, cost, e(K)) and K̂, or JSON with ``--json``.

Default m (total samples): 100·N, i.e. 100 samples per client, when neither ``--m`` nor
``--client-sizes`` is given.  Default d: the number of columns of the model array.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pflt.cli import UserError

SAMPLES_PER_CLIENT_DEFAULT = 100


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "select-k", help="choose CGPFL's number of contexts K by minimising e(K) (eq. 11)",
        description="CGPFL-Heur: e(K) = sqrt(dK/m log(em/d)) + mu*cost(K) for K = 1..k_max "
        "(k-means++ with seeded restarts for the cost); prints the table and K_hat.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--models", type=Path, help="a .npy file of client model vectors, shape [N, d]")
    src.add_argument("--planted", metavar="N,K0,d",
                     help="synthetic planted clusters: N clients, K0 contexts, dimension d")
    p.add_argument("--separation", type=float, default=10.0,
                   help="--planted: minimum distance between context centres (default 10)")
    p.add_argument("--noise", type=float, default=1.0,
                   help="--planted: per-coordinate std of client models around centres (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the planted data and of k-means++")
    p.add_argument("--mu", type=float, required=True,
                   help="mu >= 0 (required), the weight of cost(K) standing in for lambda + L/2. "
                        "K_hat depends strongly on mu relative to the scale of cost(K): "
                        "inspect the printed table (e.g. --planted 40,4,20 picks K0 = 4 for "
                        "mu around 0.01 and k_max for mu >= 0.1)")
    p.add_argument("--m", type=float, default=None,
                   help=f"total number of samples m (default {SAMPLES_PER_CLIENT_DEFAULT}*N, or "
                   "the sum of --client-sizes)")
    p.add_argument("--client-sizes", type=Path, default=None,
                   help="optional .npy of per-client sample counts m_i, shape [N] (cost weights m_i/m)")
    p.add_argument("--d", type=int, default=None,
                   help="dimension d in the complexity term (default: number of model columns)")
    p.add_argument("--k-max", type=int, default=None, help="largest K searched (default N//2, min 1)")
    p.add_argument("--restarts", type=int, default=10, help="k-means++ restarts per K (default 10)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.set_defaults(func=run)


def _load_npy(path: Path, what: str) -> np.ndarray:
    if not path.is_file():
        raise UserError(f"{what} file not found: {path}")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # a corrupt or non-.npy file
        raise UserError(f"cannot read {what} file {path} as .npy: {exc}") from None


def _models(args) -> tuple[np.ndarray, np.ndarray | None]:
    if args.models is not None:
        x = _load_npy(args.models, "--models")
        if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
            raise UserError(f"--models must have shape [N, d], got {x.shape}")
        if not np.issubdtype(x.dtype, np.number):
            raise UserError(f"--models must be numeric, got dtype {x.dtype}")
        return x.astype(np.float64), None
    from synthetic.contexts import planted_model_vectors

    try:
        n, k0, d = (int(v) for v in args.planted.split(","))
    except ValueError:
        raise UserError(f"--planted must be three integers N,K0,d, got {args.planted!r}") from None
    return planted_model_vectors(n, k0, d, separation=args.separation, noise=args.noise,
                                 seed=args.seed)


def run(args: argparse.Namespace) -> int:
    from pfl_theory.cgpfl import select_k

    x, planted = _models(args)
    n = x.shape[0]
    if args.client_sizes is not None:
        sizes = _load_npy(args.client_sizes, "--client-sizes").astype(np.float64)
        if sizes.shape != (n,):
            raise UserError(f"--client-sizes must have shape [{n}], got {sizes.shape}")
        if args.m is not None and not np.isclose(args.m, sizes.sum()):
            raise UserError(f"--m={args.m} differs from the sum of --client-sizes ({sizes.sum()})")
        m = sizes
    else:
        m = args.m if args.m is not None else float(SAMPLES_PER_CLIENT_DEFAULT * n)
    res = select_k(x, mu=args.mu, m=m, d=args.d, k_max=args.k_max, restarts=args.restarts,
                   seed=args.seed)
    total = float(np.sum(m))
    d = x.shape[1] if args.d is None else args.d
    if args.json:
        out = {"k_hat": res.k_hat, "ks": res.ks.tolist(), "e": res.e_values.tolist(),
               "cost": res.costs.tolist(), "complexity": res.complexity_terms.tolist(),
               "labels": np.asarray(res.clusterings[res.k_hat - 1].labels).tolist(),
               "mu": args.mu, "m": total, "d": d, "n_clients": n}
        if planted is not None:
            out["planted_assignment"] = planted.tolist()
            out["planted_k0"] = int(planted.max()) + 1
        print(json.dumps(out))
        return 0
    print(f"e(K) = sqrt(dK/m log(em/d)) + mu*cost(K)   N={n} d={d} m={total:g} mu={args.mu:g}")
    print(f"{'K':>4} {'complexity':>12} {'cost':>12} {'mu*cost':>12} {'e(K)':>12}")
    for k, c, cs, e in zip(res.ks, res.complexity_terms, res.costs, res.e_values):
        mark = "  <- K_hat" if k == res.k_hat else ""
        print(f"{k:>4} {c:>12.6g} {cs:>12.6g} {args.mu * cs:>12.6g} {e:>12.6g}{mark}")
    print(f"K_hat = {res.k_hat}" + (f"   (planted K0 = {int(planted.max()) + 1})"
                                   if planted is not None else ""))
    return 0
