"""``pflt worst-case``: the exact worst case of a method over its theorem's function class.

Examples::

    pflt worst-case --algorithm pfedme --prox exact --clients 2 --rounds 3 --local-rounds 5 \\
        --beta 1 --lr 0.05 --lam 15 --mu 0.1 --L 1
    pflt worst-case --algorithm pfedme --prox steps --inner-steps 2 --rounds 2 --json
    pflt worst-case --algorithm pfedme --nonconvex --lam 3 --L 1 --lr 0.01 --rounds 2
    pflt worst-case --algorithm fedavg --lr 1.5 --local-rounds 2 --rounds 2 --mu 0.1 --L 1
    pflt worst-case --algorithm cgpfl --contexts 1 --clients 2 --rounds 3 --local-rounds 2 \\
        --lam 3 --L 1 --alpha 1          # β: the theorem's largest unless --beta is given

A performance-estimation problem (PEPit, the ``[pep]`` extra) computes the worst case over
*every* client function of the class — μ-strongly convex and L-smooth (pFedMe Theorem 1),
L-smooth (``--nonconvex``, Theorem 2, identical clients) — with ‖w⁰ − w*‖² ≤ Δ₀ (Theorem 2:
F(w⁰) − F(w_T) ≤ Δ₀) and (1/N)Σ‖∇F_i(w*)‖² ≤ σ².  Printed beside it: the paper's bound at
the same parameters (hidden constants 1; whether the theorem's hypotheses hold), the engine
on a quadratic instance, the exact one-round contraction ρ, and the largest step with a
guaranteed contraction next to the theorem's admissible step.  Sizes up to 24 oracle calls
per client (rounds × local rounds × inner steps; the exact prox counts 1): 16 take ~7 s,
24 ~45 s on a loaded 2-core CPU; larger ones are refused (30 did not finish in 200 s).

CGPFL (``--algorithm cgpfl``): Theorem 4.1 with a fixed assignment (Q^t = I) and the exact
personalized solutions, over L-smooth non-convex clients (Assumption 1; ``--mu`` and
``--nonconvex`` do not apply), K = ``--contexts`` contexts of ``--clients``/K clients,
``--beta`` the local step β (default: the theorem's largest), ``--alpha`` the server step;
the worst case of (1/T)Σ_t(1/K)‖∇G_K(Ω^t)‖² at Δ_G ≤ ``--delta0`` beside 4Δ_G/(α̂T), and
(unless ``--no-contraction``, ~1 min) the largest β at which that bound holds over the class.
"""

from __future__ import annotations

import argparse
import json

from pflt.cli import UserError
from pflt.commands._help import state_defaults
from pflt.commands._device import add_device_option, with_device


#: every option's default (argparse's are None, so that an option given can be told from
#: one left out: an option that does not apply to the method is refused, not ignored)
DEFAULTS = {"prox": "exact", "inner_steps": 1, "personal_lr": None, "clients": 2, "rounds": 3,
            "local_rounds": 5, "contexts": 1, "beta": None, "alpha": 1.0, "lr": 0.05,
            "lam": 15.0, "mu": 0.1, "L": 1.0, "sigma_sq": 0.0, "delta0": 1.0,
            "noise_sq": None, "batch_size": 1, "inner_accuracy": 0.0, "delta_sq": None,
            "sampled": None}
COMMON = {"clients", "rounds", "local_rounds", "L", "delta0"}
#: the options each method reads (``--solver``, ``--json``, ``--no-contraction``: all)
APPLIES = {
    "pfedme": COMMON | {"prox", "inner_steps", "personal_lr", "beta", "lr", "lam", "mu",
                        "sigma_sq", "noise_sq", "batch_size", "inner_accuracy", "delta_sq",
                        "sampled"},
    "fedavg": COMMON | {"lr", "mu", "sigma_sq", "noise_sq", "batch_size", "sampled"},
    "cgpfl": COMMON | {"contexts", "beta", "alpha", "lam"},
}
#: the options read only under another option of the same method
REQUIRES = {"inner_steps": ("prox", "steps"), "personal_lr": ("prox", "steps"),
            "inner_accuracy": ("prox", "exact"), "delta_sq": ("prox", "exact")}
INTEGERS = ("inner_steps", "clients", "rounds", "local_rounds", "contexts", "batch_size",
            "sampled")
#: the most memory the engine's measurement on the noisy instance (16 seeds) may take for
#: its mini-batch indices alone (R·N·|D| of 8 bytes, plus an [N, |D|] float64 buffer).
#: Measured at the defaults on the shared 2-core machine under load ~20: |D| = 349,525
#: (32 MiB of indices) took 1.2 GB resident and 56 min wall, 5 of them the PEP; |D| =
#: 2.8e6 (256 MiB) was at 2.2 GB and unfinished after 8 min.  1 MiB (|D| <= 10,922 at the
#: defaults) keeps the measurement to ~1/32 of that
MAX_BATCH_BYTES = 1 << 20
#: float64's resolution at 1: 1 − x rounds to 1 for x below it
EPS64 = 2.0 ** -53

APPLICABILITY = """
Which options apply (an option that does not apply to --algorithm is refused):
  all methods        --clients --rounds --local-rounds --L --delta0 --solver --json
                     --no-contraction
  pfedme             --prox --beta (server mixing) --lr --lam --mu --nonconvex --sigma-sq
                     --noise-sq --batch-size --sampled; with --prox steps: --inner-steps
                     --personal-lr; with --prox exact: --inner-accuracy --delta-sq
  fedavg             --lr --mu --sigma-sq --noise-sq --batch-size --sampled
  cgpfl              --contexts --beta (local step) --alpha --lam

Randomness (pFedMe, FedAvg; docs/worst_case.md "Stochastic worst cases"):
  --noise-sq V       unbiased stochastic gradients, variance ≤ V per sample (pFedMe A2's
                     γ_f²), V/|D| per mini-batch; pFedMe's exact prox becomes an inexact one
                     with E‖∇h(θ̃)‖² ≤ 2(ν + V/|D|) (Lemma 1's proof).  The worst case is the
                     expected-Gram relaxation: an upper bound of the worst expectation over
                     every noise law (valid, not exact); V = 0 is the deterministic one.
  --inner-accuracy ν pFedMe eq. 8's inner accuracy (‖∇h(θ̃)‖² ≤ ν without noise)
  --delta-sq δ²      pFedMe Lemma 1's criterion itself: E‖θ̃ − θ̂‖² ≤ δ²
  --sampled S        S of N clients uniformly per round, every subset enumerated (N ≤ 4)
"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "worst-case", help="exact worst case (PEP) of pFedMe / FedAvg / CGPFL beside the paper's bound",
        description=__doc__, epilog=APPLICABILITY.replace("%", "%%"),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--algorithm", choices=("pfedme", "fedavg", "cgpfl"), default="pfedme")
    p.add_argument("--prox", choices=("exact", "steps"), default=None,
                   help="pFedMe's inner solve: the exact prox (default) or K gradient steps")
    p.add_argument("--inner-steps", type=int, default=None, metavar="K",
                   help="inner gradient steps K with --prox steps (default 1; T·R·K ≤ 24)")
    p.add_argument("--personal-lr", type=float, default=None, metavar="ETA_P",
                   help="inner step η_p with --prox steps (default 1/(L + λ))")
    p.add_argument("--clients", type=int, default=None, metavar="N", help="N (default 2)")
    p.add_argument("--rounds", type=int, default=None, metavar="T", help="T (default 3)")
    p.add_argument("--local-rounds", type=int, default=None, metavar="R", help="R (default 5)")
    p.add_argument("--contexts", type=int, default=None, metavar="K",
                   help="CGPFL: number of contexts K (--clients must be a multiple; default 1)")
    p.add_argument("--beta", type=float, default=None,
                   help="pFedMe's server mixing β (default 1); CGPFL's local step β "
                        "(default: the theorem's largest)")
    p.add_argument("--alpha", type=float, default=None, help="CGPFL's server step α ≤ 1 "
                   "(default 1)")
    p.add_argument("--lr", type=float, default=None, help="local step η (default 0.05)")
    p.add_argument("--lam", type=float, default=None, help="pFedMe's / CGPFL's λ (default 15)")
    p.add_argument("--mu", type=float, default=None,
                   help="strong convexity μ of the clients (default 0.1)")
    p.add_argument("--L", type=float, default=None, help="smoothness L of the clients (default 1)")
    p.add_argument("--nonconvex", action="store_true",
                   help="L-smooth non-convex clients (pFedMe Theorem 2; identical clients)")
    p.add_argument("--sigma-sq", type=float, default=None, metavar="S2",
                   help="heterogeneity bound σ² on (1/N)Σ‖∇F_i(w*)‖² (default 0)")
    p.add_argument("--delta0", type=float, default=None, metavar="D0",
                   help="Δ₀ = ‖w⁰ − w*‖² (Theorem 2: F(w⁰) − F(w_T)) bound (default 1)")
    p.add_argument("--noise-sq", type=float, default=None, metavar="V",
                   help="gradient noise: variance ≤ V per sample (default: exact gradients)")
    p.add_argument("--batch-size", type=int, default=None, metavar="D",
                   help="mini-batch |D| dividing the noise (default 1; needs --noise-sq)")
    p.add_argument("--inner-accuracy", type=float, default=None, metavar="NU",
                   help="pFedMe's inner accuracy ν of eq. 8 (default 0: exact)")
    p.add_argument("--delta-sq", type=float, default=None, metavar="D2",
                   help="pFedMe's δ² of Lemma 1: E‖θ̃ − θ̂‖² ≤ δ² (default: none)")
    p.add_argument("--sampled", type=int, default=None, metavar="S",
                   help="clients sampled per round, every subset enumerated (default N)")
    p.add_argument("--solver", choices=("clarabel", "scs"), default="clarabel")
    p.add_argument("--no-contraction", action="store_true",
                   help="skip the one-round ρ and the largest contracting step (bisection)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    state_defaults(p._actions)
    add_device_option(p)
    p.set_defaults(func=with_device(run))


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Refuse options that do not apply and bad numbers (one line, before any solve);
    fill in the defaults.  An option that does not apply is refused before the heavy imports
    (torch, sympy: seconds on a loaded machine), so that mistake costs nothing."""
    given = {k for k in DEFAULTS if getattr(args, k, None) is not None}
    applies = APPLIES[args.algorithm]
    if args.nonconvex:
        if args.algorithm != "pfedme":
            raise UserError("--nonconvex is pFedMe's Theorem 2; it does not apply to "
                            f"{args.algorithm}")
        applies = applies - {"mu"}
    for key in sorted(given):
        flag = "--" + key.replace("_", "-")
        if key not in applies:
            raise UserError(f"{flag} does not apply to --algorithm {args.algorithm}"
                            f"{' --nonconvex' if args.nonconvex else ''} (see --help: which "
                            f"options apply)")
        if key in REQUIRES:
            opt, value = REQUIRES[key]
            if (getattr(args, opt) or DEFAULTS[opt]) != value:
                raise UserError(f"{flag} applies only with --{opt} {value}")
    from verification.worst_case.analysis import check_number

    for key in sorted(given):
        flag = "--" + key.replace("_", "-")
        if key in INTEGERS:
            if getattr(args, key) < 1:
                raise UserError(f"{flag} must be an integer >= 1, got {getattr(args, key)}")
        elif key != "prox":
            try:
                check_number(flag, getattr(args, key),
                             positive=key not in ("sigma_sq", "noise_sq", "inner_accuracy",
                                                  "delta_sq"))
            except ValueError as exc:
                raise UserError(str(exc)) from None
    for key, default in DEFAULTS.items():
        if getattr(args, key, None) is None:
            setattr(args, key, default)
    return args


def cgpfl_setting(args: argparse.Namespace):
    from verification.worst_case.cgpfl import CGPFLSetting

    if args.contexts < 1 or args.clients < 1 or args.clients % args.contexts:
        raise UserError(f"--clients ({args.clients}) must be a positive multiple of "
                        f"--contexts ({args.contexts})")
    try:
        # contexts share no client: one context of |C_k| = N/K clients is modelled, with the
        # federation's N in c = 2/N (K = 2 equals K = 1 at the same N, tested)
        return CGPFLSetting(contexts=1, per_context=args.clients // args.contexts,
                            n_total=args.clients, rounds=args.rounds,
                            local_rounds=args.local_rounds, lam=args.lam, L=args.L,
                            alpha=args.alpha, beta=args.beta, Delta=args.delta0)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def setting(args: argparse.Namespace):
    from verification.worst_case.analysis import validate
    from verification.worst_case.problems import Setting

    inner = None
    if args.algorithm == "pfedme" and args.prox == "steps":
        eta_p = args.personal_lr if args.personal_lr is not None else 1.0 / (args.L + args.lam)
        inner = (args.inner_steps, eta_p)
    s = Setting(method=args.algorithm, clients=args.clients, rounds=args.rounds,
                local_rounds=args.local_rounds, lr=args.lr, lam=args.lam,
                beta=1.0 if args.beta is None else args.beta,
                mu=None if args.nonconvex else args.mu, L=args.L, inner=inner,
                sigma_sq=args.sigma_sq, Delta0=args.delta0, noise_sq=args.noise_sq,
                batch_size=args.batch_size, inner_accuracy=args.inner_accuracy,
                delta_sq=args.delta_sq, sampled=args.sampled)
    try:
        validate(s)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    check_batch_memory(s)
    check_theorem1_weights(s)
    return s


def batch_bytes(s) -> int:
    """Bytes of the engine's mini-batch draw on the noisy instance: R·N·|D| int64 indices
    plus the [N, |D|] float64 uniforms (``synthetic.federation.Federation.sample_batches``)."""
    return (s.local_rounds + 1) * s.clients * s.batch_size * 8


def check_batch_memory(s) -> None:
    """Refuse a ``--batch-size`` whose measurement would exceed :data:`MAX_BATCH_BYTES`,
    saying how much it would need (it ended in torch's allocation error: 80 GB at 1e9)."""
    if s.noise_sq is None:
        return
    need = batch_bytes(s)
    if need > MAX_BATCH_BYTES:
        per = batch_bytes(type(s)(**{**vars(s), "batch_size": 1}))
        raise UserError(f"--batch-size {s.batch_size}: the engine's measurement would need "
                        f"at least {need / 2 ** 30:.3g} GiB (its (R + 1)·N·|D| = {need // 8:,} "
                        f"mini-batch indices alone, 8 bytes each), more than the "
                        f"{MAX_BATCH_BYTES >> 20} MiB allowed (a measurement that size runs "
                        f"for hours); use --batch-size <= "
                        f"{MAX_BATCH_BYTES // per} (the noise V/|D| is then already "
                        f"{s.noise_sq / (MAX_BATCH_BYTES // per):.3g})")


def check_theorem1_weights(s) -> None:
    """pFedMe Theorem 1's averaging weights α_t = (1 − ημ_F/2)^{−(t+1)} (η = ηβR, the
    reading of docs/formulas.md §B.6) need 0 < 1 − ημ_F/2 < 1 in float64: a step so small
    that ημ_F/2 is below float64's resolution at 1 (``--lr 1e-300``), or so large that it
    reaches 1, is refused here with the step that works (was ``need 0 < 1 - eta*mu_F/2 <
    1, got 1.0`` from deep inside)."""
    if s.method != "pfedme" or s.mu is None:
        return
    x = s.eta_eff * s.mu_F / 2.0
    if 0.0 < 1.0 - x < 1.0:
        return
    per_lr = s.beta * s.local_rounds * s.mu_F / 2.0      # x = lr · per_lr
    if x >= 1.0:
        raise UserError(f"--lr {s.lr:g}: Theorem 1's averaging weights (1 - ηβRμ_F/2)^-(t+1) "
                        f"need ηβRμ_F/2 < 1, got {x:.4g}; use --lr < {1.0 / per_lr:.4g}")
    raise UserError(f"--lr {s.lr:g}: ηβRμ_F/2 = {x:.3g} is below float64's resolution at 1 "
                    f"({EPS64:.2g}), so Theorem 1's averaging weights (1 - ηβRμ_F/2)^-(t+1) "
                    f"cannot be formed; use --lr >= {2 * EPS64 / per_lr:.3g}")


def _bisection_line(factor: float, certified: bool) -> None:
    """Progress of the step bisection (~10 s a solve), on stderr."""
    import sys

    print(f"bisection: β = {factor:.3g} × β_max: {'certified' if certified else 'not certified'}",
          file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    import sys

    args = resolve(args)      # first: a refused option costs no import
    from verification.worst_case.pep import PEPUnavailable

    if args.algorithm == "cgpfl":
        from verification.worst_case import cgpfl_analysis as ca

        s, analyse, show = cgpfl_setting(args), ca.analyse, ca.render
        kwargs = {"steps": not args.no_contraction, "report": _bisection_line}
    else:
        from verification.worst_case.analysis import analyse

        s, show, kwargs = setting(args), render, {"contraction": not args.no_contraction}
    try:
        res = analyse(s, solver=args.solver, **kwargs)
    except PEPUnavailable as exc:
        raise UserError(str(exc)) from None
    except ArithmeticError as exc:     # unbounded PEP, or both solvers failed
        print(f"pflt worst-case: the SDP gave no worst case: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    print(show(res))
    return 0


#: relative accuracy of a solve by status: Clarabel's 'optimal' ~1e-8 (1e-6 kept as margin);
#: 'optimal_inaccurate' agrees with SCS to ~0.2% on the non-convex PEPs (1e-2 kept)
ACCURACY = {"optimal": 1e-6}
INACCURATE = 1e-2


def verdict_line(res: dict) -> str:
    """What the worst case says about the bound, with the solver's accuracy."""
    tol = ACCURACY.get(res["status"], INACCURATE)
    ratio = res["worst_case"] / res["bound"]
    held = all(res["hypotheses"].values())
    relaxed = res["metric"] == "grad_sq_avg" or not res.get("exact", True)
    kind = ("expected-Gram relaxation: an upper bound" if not res.get("exact", True) else
            "relaxed F(w_T) ≥ F*: an upper bound" if relaxed else "exact")
    # the same note on either side: a bound evaluated outside its hypotheses is no theorem's
    # claim, whether the worst case lands above or below it
    outside = "" if held else " (outside the theorem's hypotheses)"
    if ratio > 1 + tol:
        where = ("with every hypothesis met: a counterexample" if held and not relaxed else
                 "with every hypothesis met (relaxed PEP: not a proof)" if held else
                 outside.strip())
        return f"worst case ({kind}) ABOVE the bound by ×{ratio:.6g} {where}"
    if ratio > 1 - tol:
        return (f"worst case ({kind}) equals the bound within the solver's accuracy "
                f"{tol:g} (ratio {ratio:.6g}): the bound is tight{outside}")
    return (f"worst case ({kind}) below the bound: the bound holds, {1 / ratio:.4g}× "
            f"loose{outside}")


#: what each metric of :func:`verification.worst_case.analysis.analyse` measures (the
#: quantity the theorem bounds; verification/worst_case/instances.py ``metric_on``)
METRICS = {
    "gap_avg": "F(w̄_T) − F(w*): gap of the Moreau-envelope objective F at the average of "
               "the global iterates w⁰…w^{T−1} with Thm 1's weights α_t ∝ (1 − ημ_F/2)^−(t+1)",
    "grad_sq_avg": "(1/T)Σ_t ‖∇F(w^t)‖²: mean squared envelope gradient over the rounds, "
                   "scaled to F(w⁰) − F(w^T) = Δ₀",
    "dist": "‖w^T − w*‖²: squared distance of the last global iterate to the optimum",
}


def metric_line(res: dict) -> str:
    """``metric: NAME = what it measures  (theorem)``."""
    name = res["metric"]
    what = METRICS.get(name)
    return f"metric: {name}" + (f" = {what}" if what else "") + f"  ({res['theorem']})"


def header(s: dict) -> str:
    """The setting, naming only the parameters the method has: FedAvg has no λ and no
    server mixing β (``--lam``/``--beta`` are refused for it); non-convex pFedMe has no μ."""
    prox = "" if s["method"] != "pfedme" else (
        ", exact prox" if s["inner"] is None else f", K = {s['inner'][0]} inner steps "
        f"(η_p = {s['inner'][1]:.4g})")
    parts = [f"N = {s['clients']}", f"T = {s['rounds']}", f"R = {s['local_rounds']}",
             f"η = {s['lr']:g}"]
    if s["method"] == "pfedme":
        parts += [f"λ = {s['lam']:g}", f"β = {s['beta']:g}"]
    parts += ["non-convex (no μ)" if s["mu"] is None else f"μ = {s['mu']:g}",
              f"L = {s['L']:g}", f"σ² = {s['sigma_sq']:g}", f"Δ₀ = {s['Delta0']:g}"]
    return f"{s['method']}{prox}: " + ", ".join(parts)


def _mark(ok: bool) -> str:
    return "yes" if ok else "NO"


def _randomness(s: dict) -> str:
    parts = []
    if s.get("noise_sq") is not None:
        parts.append(f"noise γ² = {s['noise_sq']:g} per sample, |D| = {s['batch_size']}")
    if s.get("inner_accuracy"):
        parts.append(f"ν = {s['inner_accuracy']:g}")
    if s.get("delta_sq") is not None:
        parts.append(f"δ² = {s['delta_sq']:g}")
    if s.get("sampled") is not None:
        parts.append(f"S = {s['sampled']} of N = {s['clients']} (all subsets)")
    return ("randomness: " + ", ".join(parts)) if parts else ""


def _measured_line(res: dict) -> str:
    if res.get("measured_se"):
        return (f"  measured (engine, noisy quadratic instance, mean ± se over 16 seeds) "
                f"{res['measured']:.6g} ± {res['measured_se']:.2g}")
    return f"  measured (engine, quadratic instance) {res['measured']:.6g}"


def render(res: dict) -> str:
    """The human-readable report of :func:`verification.worst_case.analysis.analyse`."""
    s = res["setting"]
    lines = [header(s),
             *([line] if (line := _randomness(s)) else []),
             metric_line(res)
             + (f", bound with δ² = {res['delta_sq']:.4g}" if res.get("delta_sq") else ""),
             _measured_line(res),
             f"  worst case ({'exact PEP' if res.get('exact', True) else 'PEP, valid upper bound'}"
             f", {res['solver']} {res['status']}, Gram "
             f"{res['gram_size']}, {res['seconds']:.2f} s) {res['worst_case']:.6g}",
             f"  paper bound (hidden constants 1) {res['bound']:.6g}   bound/worst "
             f"{res['looseness']:.4g}"]
    if "worst_case_theorem_condition" in res:
        w = res["worst_case_theorem_condition"]
        lines.append(f"  with the theorem's own F(w⁰) − F* ≤ Δ₀ (a value below every evaluated "
                     f"f): worst case {w:.6g}, bound/worst {res['bound'] / w:.4g}")
    if "terms" in res:
        lines.append("    terms: " + ", ".join(f"{k} {v:.4g}" for k, v in res["terms"].items()))
    lines.append("  hypotheses: " + ", ".join(f"{k}: {_mark(v)}"
                                              for k, v in res["hypotheses"].items()))
    lines.append("  " + verdict_line(res))
    if "envelope" in res:
        e = res["envelope"]
        lines.append(f"envelope: smoothness exact {e['L_exact']:.6g} vs paper L_F = λ = "
                     f"{e['L_paper']:g} ({e['L_paper'] / e['L_exact']:.3g}×); strong convexity "
                     f"exact {e['mu_exact']:.6g} vs paper μ_F {e['mu_paper']:.6g}")
    if "rho" in res:
        ratio = res["largest_contracting_step"] / res["admissible_step"]
        lines.append(f"one-round contraction at η: ρ = {res['rho']:.8g}")
        lines.append(f"largest step with ρ < 1: {res['largest_contracting_step']:.6g}   "
                     f"theorem's admissible step: {res['admissible_step']:.4g} "
                     f"({ratio:.3g}× smaller)")
    return "\n".join(lines)
