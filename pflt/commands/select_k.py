"""``pflt select-k``: choose CGPFL's number of contexts K̂ = argmin_K e(K) (IJCAI eq. 11).

Input: client model vectors (``--models FILE.npy`` of shape [N, d]), the client models of a
finished or checkpointed run (``--from-run DIR``: ``DIR/checkpoint.pt`` of ``pflt run
--checkpoint-every``; the client sizes are rebuilt from ``DIR/run_options.json``) or a
planted-cluster spec (``--planted N,K0,d``, :func:`synthetic.contexts.planted_model_vectors`).
Prints the e(K) table (complexity term, cost, cost/cost(1), e(K)) and K̂, or JSON with
``--json`` (K̂, the whole curve, the inputs used, and the BIC alternative).

μ (the paper's "appropriate μ", value unprinted): default ``--mu-rule widest-band`` — the μ
at the geometric centre of the widest bounded band of μ that gives one K̂ (the sharpest elbow
of cost(K); it reads the client models only, never test data; see
:func:`pfl_theory.cgpfl_selection.widest_band`); ``--mu-rule relative``: μ = 1/cost(1)
(scale-free, but it caps K̂ ≤ max{K : c(√K − 1) < 1} whatever the data, said in one line
when the cap is below K_max); ``--mu`` gives μ in the models' own units (the paper's
λ + L/2).  Every run prints the band of μ for which each K̂ is chosen (how fragile the
choice is).  Default m (total samples):
the run's client sizes, else 100·N (100 samples per client) when neither ``--m`` nor
``--client-sizes`` is given.  Default d: the number of columns of the model array.

**Which selector when** (measured on the selection benchmark, docs/selection.md):

* only client models (``--models FILE.npy``, ``--from-run DIR`` with a checkpoint): e(K)
  rarely reaches the accuracy-best K when the model dimension is large relative to the
  samples (the complexity term dominates); read the scale-free BIC choice
  (``alternatives.bic`` in ``--json``) beside it;
* the clients' data at hand (``--from-run DIR --validation``): held-out validation after
  short CGPFL runs per K (:mod:`algorithms.methods.clustered.cgpfl_validation`) — the recommended selector.
  Input: the run directory's ``run_options.json`` (it rebuilds the federation: data, split,
  model); no checkpoint is needed.  Each client's training data are split 3/4 fit, 1/4
  validation (``--val-folds``), CGPFL with K = 1 is warmed up ``--val-warmup`` rounds, then
  trained ``--val-rounds`` rounds per K; K̂ minimises the held-out cross-entropy of the
  personalized models (``--criterion loss``, the default: on the benchmark's held-out half of
  cases ≤ 1 point lost in 87 % against 78 % for the accuracy, mean loss 0.39 against 0.63
  points) or maximises their held-out accuracy (``--criterion accuracy``, the default before
  2026-11-24); ``--val-rule``: argmin/argmax or a one-SE rule.  By default every fold serves
  once as the held-out part (``--val-cv`` = ``--val-folds`` = 4: 4-fold cross-validation, the
  loss summed over the folds — ``val_cv_loss``, the recommended selector: ≤ 1 point lost in
  92 % of the 120 benchmark records, mean 0.31 points); ``--val-cv 1`` holds out one fold
  only (``val_loss``: a quarter of the cost, ≤ 1 point in 88 %).  ``--json`` gives K̂, the whole curve of the chosen criterion
  (``curve``, ``curve_se``), both curves, each rule's K̂ per criterion, and the inputs.  Hyper-parameters: the run's own if it trained cgpfl / cgpfl-heur, else
  CGPFL's defaults.  Cost: val-cv × (warm-up + k_max × val-rounds) CGPFL rounds on 3/4 of the
  data, printed before the runs; k_max defaults to min(N/2, 10) with ``--validation`` (the
  benchmark's grid; at N = 100 that is 4 × (3 + 10 × 7) = 292 rounds instead of 1412 for
  K ≤ 50), and a K̂ on the last K searched is flagged (stderr, ``at_grid_edge`` in ``--json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pflt.cli import UserError
from pflt.commands._validation_cli import add_fold_options, check_fold_options, progress_bar
from pflt.commands._device import add_device_option, with_device

if TYPE_CHECKING:   # numpy is imported where it is used: pflt --help imports none
    import numpy as np

SAMPLES_PER_CLIENT_DEFAULT = 100
CRITERIA = ("loss", "accuracy")   # --criterion (algorithms.methods.clustered.cgpfl_validation.CRITERIA)
VALIDATION_K_CAP = 10   # --validation's default k_max = min(N // 2, 10): the benchmark's K grid
DEFAULT_CRITERION = "loss"   # docs/selection.md: chosen on the dev half, confirmed on the held-out half


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "select-k", help="choose CGPFL's number of contexts K: e(K) (eq. 11) and BIC, or "
        "held-out validation (--validation)",
        description="CGPFL-Heur: e(K) = sqrt(dK/m log(em/d)) + mu*cost(K) for K = 1..k_max "
        "(k-means++ with seeded restarts for the cost); prints the table, K_hat and the BIC "
        "choice.  With --from-run DIR --validation instead: short CGPFL runs per K scored on "
        "held-out data, by default 4-fold cross-validation of the loss (the recommended "
        "selector; val-cv x (val-warmup + k_max x val-rounds) CGPFL rounds, printed before "
        "it starts).")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--models", type=Path, help="a .npy file of client model vectors, shape [N, d]")
    src.add_argument("--planted", metavar="N,K0,d",
                     help="synthetic planted clusters: N clients, K0 contexts, dimension d")
    src.add_argument("--from-run", type=Path, metavar="DIR",
                     help="a `pflt run --out DIR --checkpoint-every K` directory: cluster the "
                     "client models of its checkpoint (with --validation: any `pflt run` "
                     "directory, no checkpoint needed)")
    p.add_argument("--models-key", default=None,
                   help="--from-run: which model set of the state (default 'personalized', "
                   "else 'local')")
    p.add_argument("--separation", type=float, default=10.0,
                   help="--planted: minimum distance between context centres (default 10)")
    p.add_argument("--noise", type=float, default=1.0,
                   help="--planted: per-coordinate std of client models around centres (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the planted data and of k-means++")
    p.add_argument("--mu", type=float, default=None,
                   help="mu >= 0, the weight of cost(K) in the models' units (the paper's "
                   "lambda + L/2).  Default: the scale-free mu = 1/cost(1), invariant to "
                   "rescaling the models")
    p.add_argument("--mu-rule", choices=("widest-band", "relative"), default="widest-band",
                   help="mu when --mu is not given: centre of the widest bounded band of mu "
                   "giving one K_hat (default; the sharpest elbow of cost(K)) or 1/cost(1)")
    p.add_argument("--m", type=float, default=None,
                   help=f"total number of samples m (default {SAMPLES_PER_CLIENT_DEFAULT}*N, or "
                   "the sum of --client-sizes)")
    p.add_argument("--client-sizes", type=Path, default=None,
                   help="optional .npy of per-client sample counts m_i, shape [N] (cost weights m_i/m)")
    p.add_argument("--d", type=int, default=None,
                   help="dimension d in the complexity term (default: number of model columns)")
    p.add_argument("--k-max", type=int, default=None, help="largest K searched (default N//2, min 1; with --validation "
                   "min(N//2, 10), the selection benchmark's grid: each K costs val-cv x "
                   "val-rounds CGPFL rounds, and K_hat on the edge is flagged)")
    p.add_argument("--restarts", type=int, default=30, help="k-means++ restarts per K (default 30)")
    p.add_argument("--validation", action="store_true",
                   help="--from-run only: choose K by held-out validation after short CGPFL runs "
                   "per K (needs the clients' data, rebuilt from DIR/run_options.json; the "
                   "recommended selector, see docs/selection.md)")
    p.add_argument("--val-warmup", type=int, default=3,
                   help="--validation: K = 1 warm-up rounds shared by every K (default 3)")
    p.add_argument("--val-rounds", type=int, default=7,
                   help="--validation: CGPFL rounds per K after the warm-up (default 7)")
    add_fold_options(p, folds=4, folds_help="1/val-folds of each client's training data is "
                     "held out")
    p.add_argument("--val-rule", default="max", choices=("max", "1se_small", "1se_large"),
                   help="--validation: 'max' = the best K of the criterion (argmax of the "
                   "accuracy, argmin of the loss; default) or the smallest / largest K within "
                   "one paired standard error of it")
    p.add_argument("--criterion", default=None, choices=CRITERIA,
                   help="--validation: score each K by the held-out personalized accuracy or "
                   f"cross-entropy loss (argmin); default {DEFAULT_CRITERION!r} (the winner on the "
                   "selection benchmark's held-out half of cases, docs/selection.md)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    add_device_option(p)
    p.set_defaults(func=with_device(run))


def _load_npy(path: Path, what: str) -> np.ndarray:
    import numpy as np

    if not path.is_file():
        raise UserError(f"{what} file not found: {path}")
    try:
        return np.load(path, allow_pickle=False)
    except Exception as exc:  # a corrupt or non-.npy file
        raise UserError(f"cannot read {what} file {path} as .npy: {exc}") from None


def _models(args) -> tuple[np.ndarray, np.ndarray | None, dict]:
    import numpy as np

    if args.models is not None:
        x = _load_npy(args.models, "--models")
        if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
            raise UserError(f"--models must have shape [N, d], got {x.shape}")
        if not np.issubdtype(x.dtype, np.number):
            raise UserError(f"--models must be numeric, got dtype {x.dtype}")
        return x.astype(np.float64), None, {"source": str(args.models)}
    if args.from_run is not None:
        from pflt.commands._run_dir import run_client_sizes, run_models

        x, info = run_models(args.from_run, args.models_key)
        sizes = run_client_sizes(args.from_run)
        if sizes is not None and sizes.shape == (x.shape[0],):
            info["client_sizes"] = sizes
        return x, None, info
    from synthetic.contexts import planted_model_vectors

    try:
        n, k0, d = (int(v) for v in args.planted.split(","))
    except ValueError:
        raise UserError(f"--planted must be three integers N,K0,d, got {args.planted!r}") from None
    x, planted = planted_model_vectors(n, k0, d, separation=args.separation, noise=args.noise,
                                       seed=args.seed)
    return x, planted, {"source": f"planted {args.planted}"}


def _sample_counts(args, n: int, info: dict) -> tuple[object, str]:
    import numpy as np

    if args.client_sizes is not None:
        sizes = _load_npy(args.client_sizes, "--client-sizes").astype(np.float64)
        if sizes.shape != (n,):
            raise UserError(f"--client-sizes must have shape [{n}], got {sizes.shape}")
        if args.m is not None and not np.isclose(args.m, sizes.sum()):
            raise UserError(f"--m={args.m} differs from the sum of --client-sizes ({sizes.sum()})")
        return sizes, "--client-sizes"
    if args.m is not None:
        return args.m, "--m"
    if "client_sizes" in info:
        return info.pop("client_sizes"), "run federation (run_options.json)"
    return float(SAMPLES_PER_CLIENT_DEFAULT * n), f"default {SAMPLES_PER_CLIENT_DEFAULT} per client"


def check_inputs(args: argparse.Namespace) -> None:
    """Input errors before anything is allocated (issue 18): finite numbers, bounded
    integers, and a planted set that fits in memory."""
    import math

    from pflt.commands.run_checks import available_memory

    for name in ("separation", "noise", "mu", "m"):
        v = getattr(args, name, None)
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise UserError(f"--{name} must be a finite number >= 0, got {v!r}")
    if not 1 <= args.restarts <= 10_000:
        raise UserError(f"--restarts must lie in [1, 10000], got {args.restarts}")
    if not 0 <= args.seed <= 2**32 - 1:
        raise UserError(f"--seed must lie in [0, 2**32 - 1], got {args.seed}")
    if args.planted is not None:
        try:
            n, k0, d = (int(v) for v in args.planted.split(","))
        except ValueError:
            raise UserError(f"--planted must be three integers N,K0,d, got "
                            f"{args.planted!r}") from None
        need, have = 8 * 4 * n * d, available_memory("cpu")
        if n < 1 or d < 1 or (have is not None and need > have):
            raise UserError(f"--planted {args.planted}: N and d must be >= 1 and the models "
                            f"(about {need / 2**30:.3g} GiB with k-means) must fit in memory")


def _run_validation(args: argparse.Namespace) -> int:
    from algorithms.methods.clustered.cgpfl_validation import validation_select_k
    from pflt.commands._run_dir import run_federation

    if args.from_run is None:
        raise UserError("--validation needs the clients' data: pass --from-run DIR (its "
                        "run_options.json rebuilds the federation)")
    if args.criterion is None:
        args.criterion = DEFAULT_CRITERION
    for name in ("val_warmup", "val_rounds"):
        if not 1 <= getattr(args, name) <= 10_000:
            raise UserError(f"--{name.replace('_', '-')} must lie in [1, 10000], got "
                            f"{getattr(args, name)}")
    check_fold_options(args)    # --val-cv defaults to every fold: val_cv_loss, the recommendation
    fed, model, hp, info = run_federation(args.from_run)
    k_max = (args.k_max if args.k_max is not None
             else max(1, min(fed.num_clients // 2, VALIDATION_K_CAP)))
    total = args.val_cv * (args.val_warmup + k_max * args.val_rounds)
    # the cost up front (stderr, so --json stays parseable): N = 100 with the defaults is
    # 4 × (3 + 50 × 7) = 1412 CGPFL rounds, minutes on a CPU
    print(f"select-k --validation: {args.val_cv} fold(s) × ({args.val_warmup} warm-up + "
          f"k_max {k_max} × {args.val_rounds}) = {total} CGPFL rounds on N = "
          f"{fed.num_clients} clients (--k-max, --val-cv 1 or --val-rounds make it cheaper)",
          file=sys.stderr)
    try:
        with progress_bar(args.val_cv * k_max, "select-k (fold, K)", "run",
                          disable=args.no_progress) as progress:
            res = validation_select_k(fed, model, hp, k_max=k_max, warmup_rounds=args.val_warmup,
                                      rounds=args.val_rounds, folds=args.val_folds,
                                      cv=args.val_cv, seed=args.seed,
                                      kmeans_restarts=min(args.restarts, 10), progress=progress)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    crit = args.criterion
    k_hat = res.pick(crit, args.val_rule)
    # K̂ on the last K searched, with larger K possible: the criterion may still be improving
    at_edge = bool(k_hat == k_max and k_max < fed.num_clients // 2)
    if at_edge:
        print(f"select-k --validation: K_hat = {k_hat} is the largest K searched (--k-max "
              f"{k_max}); the best K may lie beyond it: rerun with a larger --k-max",
              file=sys.stderr)
    by_rule = res.k_hat if crit == "accuracy" else res.k_hat_loss
    curve, se = (res.curve, res.se) if crit == "accuracy" else (res.loss_curve, res.loss_se)
    if args.json:
        print(json.dumps({"k_hat": k_hat, "method": "validation", "criterion": crit,
                          "rule": args.val_rule, "ks": res.ks.tolist(), "curve": curve.tolist(),
                          "curve_se": se.tolist(), "k_hat_by_rule": by_rule,
                          "validation_accuracy": res.curve.tolist(), "se": res.se.tolist(),
                          "validation_loss": res.loss_curve.tolist(),
                          "loss_se": res.loss_se.tolist(),
                          "k_hat_by_criterion": {"accuracy": res.k_hat, "loss": res.k_hat_loss},
                          "at_grid_edge": at_edge,
                          "inputs": {"k_max": k_max, "criterion": crit, "rule": args.val_rule,
                                     "warmup_rounds": args.val_warmup,
                                     "rounds": args.val_rounds, "folds": args.val_folds,
                                     "cv": args.val_cv, "seed": args.seed, **info}},
                         default=float))
        return 0
    best = "argmin of the loss" if crit == "loss" else "argmax of the accuracy"
    print(f"held-out validation after short CGPFL runs: N={fed.num_clients} warm-up "
          f"{args.val_warmup} + {args.val_rounds} rounds per K, 1/{args.val_folds} held out"
          f"{f' ({args.val_cv} folds in turn)' if args.val_cv > 1 else ''}, "
          f"criterion {crit}  [{info['source']}]")
    print(f"{'K':>4} {'val. accuracy':>14} {'SE of diff.':>12} {'val. loss':>10} {'SE of diff.':>12}")
    for k, a, e, lo, le in zip(res.ks, res.curve, res.se, res.loss_curve, res.loss_se):
        print(f"{k:>4} {a:>14.4f} {e:>12.4f} {lo:>10.4f} {le:>12.4f}"
              + ("  <- K_hat" if k == k_hat else ""))
    print(f"K_hat = {k_hat}   (criterion {crit}, rule {args.val_rule}: {best} for 'max'; "
          + ", ".join(f"{r}: {k}" for r, k in by_rule.items()) + ")")
    return 0


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from pfl_theory.cgpfl import select_k
    from pfl_theory.cgpfl_selection import bic_curve
    from pfl_theory.threads import set_torch_threads

    # one torch thread unless PFLT_THREADS says otherwise, as pflt run / verify / figures: the
    # short CGPFL runs of --validation are small kernels that stall at two threads on a shared
    # machine (pfl_theory/threads.py)
    set_torch_threads()
    check_inputs(args)
    if args.criterion is not None and not args.validation:
        raise UserError("--criterion chooses the validation criterion: it needs --validation "
                        "(with --from-run DIR)")
    if args.validation:
        return _run_validation(args)
    x, planted, info = _models(args)
    n = x.shape[0]
    m, m_source = _sample_counts(args, n, info)
    res = select_k(x, mu=args.mu_rule if args.mu is None else args.mu, m=m, d=args.d,
                   k_max=args.k_max, restarts=args.restarts, seed=args.seed)
    bic = bic_curve(res.path, dim=x.shape[1])
    k_bic = int(res.ks[np.argmin(bic)])
    total = float(np.sum(m))
    d = x.shape[1] if args.d is None else args.d
    mu_text = {"relative": "1/cost(1) (relative)",
               "widest-band": f"{res.mu:.4g} (widest band)"}.get(res.mu_rule, f"{res.mu:g}")
    with np.errstate(over="ignore"):
        s2 = np.float64(res.scale) ** 2 or 1.0   # models' units; inf spread -> 0-width units
    bands = [[b.k, float(b.lo / s2), float(b.hi / s2) if np.isfinite(b.hi) else None]
             for b in res.bands]
    if args.json:
        out = {"k_hat": res.k_hat, "ks": res.ks.tolist(), "e": res.e_values.tolist(),
               "cost": [c if np.isfinite(c) else None for c in res.costs.tolist()],
               "relative_cost": res.relative_costs.tolist(),
               "complexity": res.complexity_terms.tolist(),
               "labels": np.asarray(res.clusterings[res.k_hat - 1].labels).tolist(),
               "inputs": {"mu": res.mu, "mu_rule": res.mu_rule, "m": total, "m_source": m_source,
                          "d": d, "n_clients": n, "k_max": int(res.ks[-1]),
                          "restarts": args.restarts, "seed": args.seed,
                          "model_spread_rms": res.scale, **info},
               "mu_bands": bands, "relative_cap": res.relative_cap,
               "alternatives": {"bic": {"k_hat": k_bic, "curve": bic.tolist()}}}
        if planted is not None:
            out["planted_assignment"] = planted.tolist()
            out["planted_k0"] = int(planted.max()) + 1
        print(json.dumps(out, default=float))
        return 0
    print(f"e(K) = sqrt(dK/m log(em/d)) + mu*cost(K)   N={n} d={d} m={total:g} ({m_source}) "
          f"mu={mu_text}  [{info['source']}]")
    print(f"{'K':>4} {'complexity':>12} {'cost':>12} {'cost/cost1':>12} {'e(K)':>12} {'BIC':>12}")
    for k, c, cs, r, e, b in zip(res.ks, res.complexity_terms, res.costs, res.relative_costs,
                                 res.e_values, bic):
        mark = "  <- K_hat" if k == res.k_hat else ""
        print(f"{k:>4} {c:>12.6g} {cs:>12.6g} {r:>12.6g} {e:>12.6g} {b:>12.6g}{mark}")
    print(f"K_hat = {res.k_hat}   (BIC: {k_bic})" + (f"   (planted K0 = {int(planted.max()) + 1})"
                                                    if planted is not None else ""))
    print("band of mu (models' units) for which each K is K_hat:")
    for line in res.band_lines():
        print("  " + line)
    if res.cap_line():
        print(res.cap_line())
    return 0
