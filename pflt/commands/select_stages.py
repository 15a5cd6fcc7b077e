"""``pflt select-stages``: bias–variance choice of PPFE's number of stages T (§C.5.12).

Φ(T) = e^{−2γ²T} + κ₀ √(T/n); prints the curve and T* (see
:func:`pfl_theory.ppfe_bounds.select_stages`).  κ₀ is given directly or from its
ingredients (loss bound B, coefficient bound A, grid radius ε_α; κ₀ = B √(log(⌈A/ε_α⌉+1)/2)).

``--from-run DIR`` (a ``pflt run --algorithm ppfe --out DIR`` directory) estimates the inputs
from the run: γ̂ = :func:`pfl_theory.ppfe_bounds.stage_edge` of the stages seen in
``history.json`` — min over stages of ½ − ε_t for two classes (the weak-learning condition
ε_t ≤ ½ − γ of eq. 13), the SAMME edge (1 − 1/C − ε_t)·C/(2(C − 1)) for C classes — with ε_t
the stage's mean weighted training error (``stage_weighted_error``, last evaluation of each
stage), clipped to ≤ 0.49; C and n = the harmonic mean of the clients' training sizes come
from the federation rebuilt out of ``run_options.json``.  Options given explicitly override.
``--json`` prints T*, the whole curve, the inputs used with their sources and, from a run,
the ensemble's test accuracy at the end of each stage (what the run observed — test data,
for comparison only, not for choosing T).
The benchmarks :mod:`verification.selection.stages_linear` (linear) and
:mod:`verification.selection.stages_nn` (MLP; ``bound_run`` = these inputs) compare the
bound's choice with the empirically best T: it is not a reliable selector (docs/selection.md).

``--from-run DIR --validation`` (a ``pflt run --algorithm ppfe`` directory) instead measures T
by cross-validation, the selector the neural benchmark found best (``val_cv_loss`` of
``verification.selection.stages_nn_cv``; docs/selection.md): the federation, model and the
run's PPFE hyper-parameters (stages = t_max, the run's rounds per stage ``total_rounds`` ×
``stage_fractions``; rounds the run made beyond ``total_rounds`` are not replayed) are rebuilt
from ``DIR/run_options.json``; each client's training data are cut into ``--val-folds`` seeded
folds (``--seed``, default 0); for each of the first ``--val-cv`` folds (default all) PPFE is
trained on the other folds (init seed = the run's ``--seed``) and every T-stage ensemble
(T = 1 … t_max, the prefix of the t_max run) is scored on the held-out fold; the per-sample
cross-entropies and correct counts are summed over the folds
(:func:`algorithms.methods.ppfe.ppfe_stage_validation.stage_validation`) and T̂ = argmin of the held-out
loss (smallest T on ties).  Cost: val-cv × total_rounds PPFE rounds on (F − 1)/F of the data,
printed on stderr before the runs, with a progress bar per fold (``--no-progress``).  Prints
the table T / held-out loss / held-out accuracy with ``<- T_hat``, or with ``--json``
``{t_hat, ts, loss_curve, accuracy_curve, inputs}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pflt.cli import UserError

from pflt.commands._validation_cli import add_fold_options
from pflt.commands._device import add_device_option, with_device


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "select-stages", help="choose PPFE's number of boosting stages T (bias-variance bound)",
        description="Minimise exp(-2 gamma^2 T) + kappa0 sqrt(T/n) over T = 1..t_max "
        "(PPFE, docs/formulas.md C.5.12) and print the curve with T* marked.")
    p.add_argument("--from-run", type=Path, default=None, metavar="DIR",
                   help="estimate gamma (and n) from a PPFE run directory (pflt run --out DIR)")
    p.add_argument("--gamma", type=float, default=None,
                   help="weak-learning edge gamma in (0, 0.5): every stage has error <= 1/2 - gamma "
                   "(required without --from-run)")
    p.add_argument("--kappa0", type=float, default=None,
                   help="coefficient of the variance term sqrt(T/n); if omitted it is computed "
                   "from --loss-bound, --coef-bound and --eps-alpha")
    p.add_argument("--loss-bound", type=float, default=1.0,
                   help="loss bound B (loss in [0, B]) for kappa0 (default 1)")
    p.add_argument("--coef-bound", type=float, default=1.0,
                   help="bound A on the ensemble coefficients |alpha_t| for kappa0 (default 1)")
    p.add_argument("--eps-alpha", type=float, default=0.01,
                   help="cover radius of the coefficient grid for kappa0 (default 0.01)")
    p.add_argument("--n", type=float, default=None,
                   help="(harmonic-mean) number of samples per client n (required without --from-run)")
    p.add_argument("--num-classes", type=int, default=None,
                   help="number of classes C for the SAMME edge of --from-run (default: the run's "
                   "federation, else 2)")
    p.add_argument("--t-max", type=int, default=20, help="largest number of stages considered (default 20)")
    p.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    p.add_argument("--validation", action="store_true",
                   help="with --from-run DIR of a `pflt run --algorithm ppfe`: choose T by "
                   "cross-validated held-out cross-entropy (PPFE retrained on the other folds "
                   "of each client's training data; the recommended selector for neural PPFE, "
                   "docs/selection.md) instead of the bound")
    add_fold_options(p, folds=5, folds_help="folds per client's training data")
    p.add_argument("--seed", type=int, default=0,
                   help="--validation: seed of the fold split (default 0)")
    add_device_option(p)
    p.set_defaults(func=with_device(run))




def _run_data(path: Path) -> tuple[list[int] | None, int | None]:
    """Training sizes and number of classes of the run's federation (rebuilt from
    ``run_options.json``), or ``(None, None)`` when the run has no such file (an older
    run); a file that is there but unreadable is one line naming it, not a silent fallback
    to two classes."""
    from pflt.commands._run_dir import run_federation

    if not (Path(path) / "run_options.json").is_file():
        return None, None
    try:
        fed = run_federation(Path(path))[0]
    except (ValueError, OSError) as exc:     # UserError says which file already
        text = str(exc)
        if "run_options.json" not in text:
            text = f"{Path(path) / 'run_options.json'}: {text}"
        raise UserError(text if text.startswith("--from-run") else f"--from-run: {text}") \
            from None
    return fed.train.counts.cpu().tolist(), int(fed.num_classes)


def _number(entry: dict, key: str, where: Path, *, low: float, high: float) -> float:
    """``entry[key]`` as a finite number in [low, high]; one line naming ``where``."""
    import math

    v = entry[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
            or not low <= v <= high:
        raise UserError(f"--from-run: {where}: round {entry.get('round', '?')}'s {key} = "
                        f"{v!r} is not a number in [{low:g}, {high:g}]")
    return float(v)


def _from_run(path: Path, num_classes: int | None) -> dict:
    """γ̂, n̄ (and what the run observed) estimated from a PPFE run directory (module docstring)."""
    from pfl_theory.ppfe_bounds import GAMMA_MAX, stage_edge
    from pfl_theory.ppfe_covering import harmonic_mean_size
    from pflt.cli import UserError
    from pflt.commands._run_dir import run_history

    errors: dict[int, float] = {}
    observed: dict[int, float] = {}
    possible = 0
    where = Path(path) / "history.json"
    for e in run_history(path):
        if "num_stages" in e:
            possible = max(possible, int(_number(e, "num_stages", where, low=0, high=1e6)))
        if "stage" in e and "stage_weighted_error" in e:
            stage = int(_number(e, "stage", where, low=0, high=1e6))
            errors[stage] = _number(e, "stage_weighted_error", where, low=0.0, high=1.0)
            if "ensemble_accuracy" in e:
                observed[stage + 1] = _number(e, "ensemble_accuracy", where, low=0.0, high=1.0)
    if not errors:
        raise UserError(f"--from-run: {path}/history.json has no 'stage_weighted_error' "
                        "(not a PPFE run?)")
    sizes, run_classes = _run_data(Path(path))
    classes = num_classes if num_classes is not None else (run_classes or 2)
    if classes < 2:
        raise UserError(f"--num-classes must be >= 2, got {classes}")
    edge = stage_edge(list(errors.values()), num_classes=classes)
    out = {"gamma": min(edge, GAMMA_MAX),
           "gamma_source": ("min over stages of 1/2 - stage_weighted_error" if classes == 2 else
                            f"min over stages of the SAMME edge (1-1/C-eps)*C/(2(C-1)), C={classes}")
           + (f" (clipped from {edge:.4g} to {GAMMA_MAX})" if edge > GAMMA_MAX else ""),
           "num_classes": classes,
           "stage_errors": {str(k): v for k, v in sorted(errors.items())},
           "stages_run": max(errors) + 1, "stages_possible": possible or None,
           "observed_ensemble_test_accuracy": {str(k): v for k, v in sorted(observed.items())}}
    if edge <= 0:
        raise UserError(f"--from-run: a stage is no better than chance (weighted errors "
                        f"{out['stage_errors']}, C={classes}); the weak-learning condition "
                        "(eq. 13) fails and the bound does not apply")
    if sizes is not None:
        out["n"] = float(harmonic_mean_size(sizes))
        out["n_source"] = "harmonic mean of the run's client training sizes"
    return out


def run(args: argparse.Namespace) -> int:
    from pflt.cli import UserError

    import math

    if args.validation:
        from pflt.commands._stage_validation import run_validation

        return run_validation(args)

    for name in ("kappa0", "loss_bound", "coef_bound", "eps_alpha", "n", "gamma"):
        v = getattr(args, name, None)
        if v is not None and not math.isfinite(v):
            raise UserError(f"--{name.replace('_', '-')} must be finite, got {v!r}")
    inputs = _from_run(args.from_run, args.num_classes) if args.from_run is not None else {}
    if args.gamma is not None:
        inputs.update(gamma=args.gamma, gamma_source="--gamma")
    if args.n is not None:
        inputs.update(n=args.n, n_source="--n")
    for name in ("gamma", "n"):
        if name not in inputs:
            raise UserError(f"--{name} is required (or --from-run with a run that provides it)")
    from pfl_theory.ppfe_bounds import kappa0_from_ingredients, select_stages

    kappa0 = args.kappa0 if args.kappa0 is not None else kappa0_from_ingredients(
        loss_bound=args.loss_bound, coef_bound=args.coef_bound, eps_alpha=args.eps_alpha)
    inputs.update(kappa0=kappa0, kappa0_source="--kappa0" if args.kappa0 is not None else
                  "B sqrt(log(ceil(A/eps_alpha)+1)/2) from --loss-bound/--coef-bound/--eps-alpha",
                  t_max=args.t_max)
    args.gamma, args.n = inputs["gamma"], inputs["n"]
    sel = select_stages(gamma=args.gamma, kappa0=kappa0, n=args.n, t_max=args.t_max)
    notes = run_notes(inputs, sel.t_star) if args.from_run is not None else []
    if args.json:
        print(json.dumps({
            "t_star": sel.t_star, "t_star_continuous": sel.t_star_continuous,
            "interior": sel.interior, "kappa0": kappa0, "b_prime": sel.b_prime,
            "kappa": sel.kappa, "inputs": inputs, "notes": notes,
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
    if sel.interior and sel.t_star_continuous > args.t_max:
        # the bound still decreases at t_max: T* = t_max is the edge of the grid, not a minimum
        kind += f" beyond --t-max {args.t_max}: T* is the grid's edge, raise --t-max to reach it"
    if notes:
        kind += "; qualified by the notes below"
    print(f"T* = {sel.t_star}  (continuous {sel.t_star_continuous:.4g}, {kind})")
    for note in notes:
        print(f"note: {note}")
    return 0


def run_notes(inputs: dict, t_star: int) -> list[str]:
    """What a ``--from-run`` choice rests on when the run saw fewer stages than the grid:
    γ̂ from the stages it reached only, and a T* beyond the stages its model can train is
    the bound's extrapolation, not something the run observed."""
    notes = []
    run, possible = inputs.get("stages_run"), inputs.get("stages_possible")
    if run is None:
        return notes
    seen = "stage 0 only" if run == 1 else f"stages 0-{run - 1}"
    if possible and run < possible:
        notes.append(f"the run ended in stage {run - 1} of its {possible} (its --rounds "
                     f"stopped before --total-rounds): gamma is estimated from {seen}")
    elif run == 1:
        notes.append("gamma is estimated from one stage's error only")
    if possible and t_star > possible:
        notes.append(f"T* = {t_star} is more stages than this run's model can train "
                     f"({possible}: PPFE trains at most L+1 stages on an L-layer model): an "
                     "extrapolation of the bound, not a choice this run can confirm")
    elif t_star > run:
        notes.append(f"T* = {t_star} is beyond the {run} stage(s) the run reached: nothing in "
                     "the run observed it")
    return notes
