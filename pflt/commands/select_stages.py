"""``pflt select-stages``: bias–variance choice of PPFE's number of stages T (§C.5.12).

Φ(T) = e^{−2γ²T} + κ₀ √(T/n); prints the curve and T* (see
:func:`pfl_theory.ppfe_bounds.select_stages`).  κ₀ is given directly or from its
ingredients (loss bound B, coefficient bound A, grid radius ε_α; κ₀ = B √(log(⌈A/ε_α⌉+1)/2)).
"""

from __future__ import annotations

import argparse
import json

from pfl_theory.ppfe_bounds import kappa0_from_ingredients, select_stages


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "select-stages", help="choose PPFE's number of boosting stages T (bias-variance bound)",
        description="Minimise exp(-2 gamma^2 T) + kappa0 sqrt(T/n) over T = 1..t_max "
        "(PPFE, docs/formulas.md C.5.12) and print the curve with T* marked.")
    p.add_argument("--gamma", type=float, required=True,
                   help="weak-learning edge gamma in (0, 0.5): every stage has error <= 1/2 - gamma")
    p.add_argument("--kappa0", type=float, default=None,
                   help="coefficient of the variance term sqrt(T/n); if omitted it is computed "
                   "from --loss-bound, --coef-bound and --eps-alpha")
    p.add_argument("--loss-bound", type=float, default=1.0,
                   help="loss bound B (loss in [0, B]) for kappa0 (default 1)")
    p.add_argument("--coef-bound", type=float, default=1.0,
                   help="bound A on the ensemble coefficients |alpha_t| for kappa0 (default 1)")
    p.add_argument("--eps-alpha", type=float, default=0.01,
                   help="cover radius of the coefficient grid for kappa0 (default 0.01)")
    p.add_argument("--n", type=float, required=True,
                   help="(harmonic-mean) number of samples per client n")
    p.add_argument("--t-max", type=int, default=20, help="largest number of stages considered (default 20)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kappa0 = args.kappa0 if args.kappa0 is not None else kappa0_from_ingredients(
        loss_bound=args.loss_bound, coef_bound=args.coef_bound, eps_alpha=args.eps_alpha)
    sel = select_stages(gamma=args.gamma, kappa0=kappa0, n=args.n, t_max=args.t_max)
    if args.json:
        print(json.dumps({
            "t_star": sel.t_star, "t_star_continuous": sel.t_star_continuous,
            "interior": sel.interior, "kappa0": kappa0, "b_prime": sel.b_prime,
            "kappa": sel.kappa,
            "curve": [{"T": int(t), "bias": float(b), "variance": float(v), "bound": float(f)}
                      for t, b, v, f in zip(sel.ts, sel.bias, sel.variance, sel.bound)]}))
        return 0
    print(f"gamma={args.gamma:g}  kappa0={kappa0:.6g}  n={args.n:g}  "
          f"b'={sel.b_prime:.6g}  kappa=2/sqrt(b')={sel.kappa:.6g}")
    print(f"{'T':>4} {'bias':>12} {'variance':>12} {'bound':>12}")
    for t, b, v, f in zip(sel.ts, sel.bias, sel.variance, sel.bound):
        mark = "  <- T*" if int(t) == sel.t_star else ""
        print(f"{int(t):>4} {b:>12.6g} {v:>12.6g} {f:>12.6g}{mark}")
    kind = "interior optimum" if sel.interior else "endpoint (kappa <= kappa_dagger ~ 3.134)"
    print(f"T* = {sel.t_star}  (continuous {sel.t_star_continuous:.4g}, {kind})")
    return 0
