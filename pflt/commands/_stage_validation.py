"""``pflt select-stages --from-run DIR --validation``: cross-validated T̂ for a PPFE run.

Rebuilds the run's federation, model and PPFE hyper-parameters from ``DIR/run_options.json``
(:func:`pflt.commands._run_dir.run_federation`) and runs
:func:`algorithms.methods.ppfe.ppfe_stage_validation.stage_validation` (the ``val_cv_loss`` selector of the
neural stage benchmark, docs/selection.md); the protocol is in :mod:`pflt.commands.select_stages`.
"""

from __future__ import annotations

import argparse
import json
import sys

from pflt.cli import UserError
from pflt.commands._validation_cli import check_fold_options, progress_bar


#: the most PPFE rounds a --validation replay may take (folds × total rounds); the papers'
#: 160 × 5 folds is 800, and a round of a small federation takes ~0.1 s or more
MAX_REPLAY_ROUNDS = 100_000


def check_validation_args(args: argparse.Namespace) -> None:
    """One-line errors before anything is rebuilt: a run directory, fold numbers in range."""
    if args.from_run is None:
        raise UserError("--validation needs the clients' data: pass --from-run DIR (a `pflt run "
                        "--algorithm ppfe --out DIR` directory)")
    check_fold_options(args)
    if not 0 <= args.seed <= 2**32 - 1:
        raise UserError(f"--seed must lie in [0, 2**32 - 1], got {args.seed}")


def run_validation(args: argparse.Namespace) -> int:
    from algorithms.engine.base import get_algorithm
    from algorithms.methods.ppfe.ppfe_stage_validation import stage_validation
    from pfl_theory.threads import set_torch_threads
    from pflt.commands._run_dir import run_federation

    # one torch thread unless PFLT_THREADS says otherwise (small kernels, shared cores), as select-k
    set_torch_threads()
    check_validation_args(args)
    fed, model, hp, info = run_federation(args.from_run, algorithm="ppfe")
    if info["algorithm"] != "ppfe":
        raise UserError(f"--validation: {args.from_run} is a {info['algorithm']!r} run, not "
                        "PPFE (select-stages --validation needs `pflt run --algorithm ppfe`)")
    try:
        alg = get_algorithm("ppfe")(**hp)
        schedule = alg.schedule(model)
    except (TypeError, ValueError) as exc:
        raise UserError(f"--validation: the run's PPFE hyper-parameters are invalid: {exc}") from None
    smallest = int(fed.train.counts.min())
    if smallest < args.val_folds:
        raise UserError(f"--val-folds {args.val_folds}: every client needs >= {args.val_folds} "
                        f"training samples, the smallest has {smallest}")
    t_max = len(schedule)
    total = args.val_cv * alg.total_rounds
    if total > MAX_REPLAY_ROUNDS:
        raise UserError(f"--validation would replay {args.val_cv} fold(s) × {alg.total_rounds:,} "
                        f"PPFE rounds = {total:,} rounds on N = {fed.num_clients} clients, more "
                        f"than {MAX_REPLAY_ROUNDS:,}: use a run with a smaller --total-rounds")
    # the cost up front (stderr, so --json stays parseable)
    print(f"select-stages --validation: {args.val_cv} fold(s) × {alg.total_rounds} PPFE rounds "
          f"(t_max {t_max} stages, rounds per stage {schedule}) = {total} rounds on N = "
          f"{fed.num_clients} clients, {args.val_folds - 1}/{args.val_folds} of the data each "
          "(--val-cv 1 makes it cheaper)", file=sys.stderr)
    try:
        with progress_bar(args.val_cv, "select-stages (fold)", "fold",
                          disable=args.no_progress) as progress:
            res = stage_validation(alg, fed, model, folds=args.val_folds, cv=args.val_cv,
                                   seed=args.seed, init_seed=int(info["seed"]),
                                   progress=progress)
    except ValueError as exc:
        raise UserError(f"--validation: {exc}") from None
    inputs = {"folds": args.val_folds, "cv": args.val_cv, "seed": args.seed,
              "init_seed": int(info["seed"]), "t_max": t_max, "rounds_per_stage": schedule,
              "held_out_samples": res.samples, "hyperparameters": info["hyperparameters"],
              "source": info["source"], "clients": fed.num_clients}
    if args.json:
        print(json.dumps({"t_hat": res.t_hat, "method": "validation",
                          "ts": res.ts.tolist(), "loss_curve": res.loss_curve.tolist(),
                          "accuracy_curve": res.accuracy_curve.tolist(), "inputs": inputs}))
        return 0
    print(f"cross-validated held-out scores of the T-stage PPFE ensemble: N={fed.num_clients}, "
          f"{args.val_cv} of {args.val_folds} folds held out in turn, {res.samples} held-out "
          f"samples, rounds per stage {schedule}  [{info['source']}]")
    print(f"{'T':>4} {'held-out loss':>14} {'held-out accuracy':>18}")
    for t, lo, acc in zip(res.ts, res.loss_curve, res.accuracy_curve):
        print(f"{int(t):>4} {lo:>14.4f} {acc:>18.4f}" + ("  <- T_hat" if t == res.t_hat else ""))
    print(f"T_hat = {res.t_hat}   (argmin of the held-out cross-entropy, smallest T on ties)")
    return 0
