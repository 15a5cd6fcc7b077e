"""Benchmark: PPFE's number of stages T̂ on a neural setting against the best T.

PPFE for neural networks (:mod:`algorithms.methods.ppfe.ppfe`, Emrani, Najafi, Motahari 2026, Algorithm 1)
with the MLP of :mod:`verification.experiments.ppfe_nn` (widths 20-32-32-16-10, 4 layers, so
progressive PPFE has at most T = 5 stages: stage t personalizes the last t layers) on the
planted label-skewed federation :func:`synthetic.permuted_labels.permuted_label_federation`
(10 clusters, 4 per client, a fraction ``permuted`` of the clients with permuted labels).

Protocol.  Every client holds out ``VAL_FRACTION`` of its training data (seeded) as a
validation split; PPFE is trained on the rest with ``ROUNDS_PER_STAGE`` rounds per stage for
T_max = 5 stages.  The T-stage PPFE with the same per-stage rounds is exactly the prefix of
this run (same schedule, same seeded draws; tested), so the ensemble of the first T stages
at the end of stage T − 1 (eq. 8, the running stage with its provisional α) *is* PPFE with T
stages: one run gives the whole curve.  Per T it is evaluated on the validation and training
splits (the selectors' inputs) and, for the target only, under two **scorings** reported side
by side (as :mod:`verification.selection.k_benchmark`):

* ``large`` (the target's measurement) — ``large_test`` = 1000 fresh samples per client from
  the client's own distribution (:func:`synthetic.permuted_labels.permuted_label_large_test`:
  its clusters, its label permutation, a separate rng stream; the federation is unchanged),
  client i's accuracy weighted by its own test-split size (the weights of the small scoring,
  so both estimate the same sample-weighted accuracy; binomial SE of the pooled accuracy
  ≲ 0.4 points against ≈ 2–5 on the 100–500 own test samples);
* ``small`` (the previous measurement) — the clients' own test splits.

The **best T** of a configuration maximises the seed-averaged accuracy under the scoring
(smallest T on ties).  Selectors (per seed; none sees any test data):

* ``bound`` — :func:`pfl_theory.ppfe_bounds.select_stages` with γ̂, κ̂₀ fitted to the run's
  normalised ensemble training error and validation gap
  (:func:`verification.selection.stage_selectors.fit_bound_inputs`; trivial error 1 − 1/C), n = the
  harmonic mean of the clients' training sizes;
* ``bound_run`` — the inputs ``pflt select-stages --from-run`` uses: γ̂ from the stages'
  weighted training errors (:func:`pfl_theory.ppfe_bounds.stage_edge`, multiclass SAMME
  edge, ≤ 0.49; T̂ = 1 if a stage is no better than chance), κ₀ from the default ingredients
  (B = A = 1, ε_α = 0.01), the same n;
* ``validation`` — the T of highest validation accuracy;
* ``validation_1se`` — the one-SE rule on the per-sample validation 0-1 losses;
* ``val_loss`` — the T of least validation cross-entropy −log H̄_T(x)_y of the T-stage
  ensemble, H̄ = eq. 8's α-mixture of the stages' softmax outputs normalised to a
  distribution (the ``loss`` of :func:`algorithms.methods.ppfe.ppfe_ensemble.ensemble_accuracy`): a
  proper scoring rule, expected to give less selection noise than the 0-1 loss on the same
  samples (measured: docs/selection.md);
* ``val_loss_1se`` — the one-SE rule on the per-sample validation cross-entropies;
* ``paper_T4`` — the paper's T = 4.

Cross-validated versions of ``validation`` / ``val_loss`` (5 folds, 4 more PPFE runs per
seed): :mod:`verification.selection.stages_nn_cv`.

Loss of T̂: accuracy points (best T's seed-mean accuracy minus T̂'s, under the scoring).  The
per-seed oracle (``oracle_seed``, :func:`verification.selection.stage_selectors.records`) is scored
under the same scoring.  ``python -m verification.selection.stages_nn [--full] [--seeds S]``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.models import MLP
from algorithms.methods.ppfe.ppfe_ensemble import per_sample_logits  # noqa: F401  (used by the tests)
from algorithms.methods.ppfe.ppfe_stage_validation import evaluate  # noqa: F401  (re-exported)
from algorithms.methods.ppfe.ppfe_stage_validation import pick_t
from algorithms.methods.ppfe.ppfe_stage_validation import stage_ensembles as _stage_ensembles
from pfl_theory.ppfe_bounds import GAMMA_MAX, kappa0_from_ingredients, select_stages, stage_edge
from pfl_theory.ppfe_covering import harmonic_mean_size
from pfl_theory.threads import set_torch_threads, single_blas_thread
from synthetic.federation import Federation, Split
from synthetic.permuted_labels import LARGE_TEST, permuted_label_federation, permuted_label_large_test
from verification.selection import stage_selectors as sel_
from synthetic.federation import compute_device

__all__ = ["NN_SELECTORS", "SCORINGS", "quick_configs", "full_configs", "holdout", "evaluate",
           "stage_ensembles",
           "stage_curves", "loss_pick", "run_config", "run_nn_benchmark", "summarise_nn"]

NN_SELECTORS = ("bound", "bound_run", "validation", "validation_1se", "val_loss", "val_loss_1se",
                "paper_T4")
SCORINGS = ("large", "small")  # best T on the large per-client test sample / own test splits
VAL_FRACTION = 0.2
ROUNDS_PER_STAGE = 10
T_MAX = 5           # 4-layer MLP: stages 0 … 4
SEEDS = 3           # quick size
FULL_SEEDS = 20     # full size: 9 configurations × 20 seeds = 180 records per selector
GENERATOR = dict(num_clusters=10, classes_per_client=4, dim=20, separation=1.0, noise=2.0)


def quick_configs() -> list[dict]:
    return [dict(permuted=0.5, size_range=(20, 60)), dict(permuted=0.0, size_range=(60, 150))]


def full_configs() -> list[dict]:
    """permuted ∈ {0, 0.5, 1} × client sizes ∈ {10–30, 20–60, 60–150}: 9 configurations."""
    return [dict(permuted=p, size_range=r) for p in (0.0, 0.5, 1.0)
            for r in ((10, 30), (20, 60), (60, 150))]


def holdout(fed: Federation, fraction: float, seed: int) -> tuple[Federation, Split]:
    """``(federation trained on the rest, validation split)``: ⌈fraction·n_i⌉ (≥ 1, < n_i)
    random training samples of every client held out (``numpy`` generator ``seed``)."""
    rng = np.random.default_rng(seed)
    counts, offsets = fed.train.counts.tolist(), fed.train.offsets.tolist()
    keep, held = [], []
    for o, c in zip(offsets, counts):
        if c < 2:
            raise ValueError(f"holdout needs >= 2 training samples per client, got {c}")
        perm = o + rng.permutation(c)
        k = min(max(int(np.ceil(fraction * c)), 1), c - 1)
        held.append(np.sort(perm[:k]))
        keep.append(np.sort(perm[k:]))

    def split(parts):
        idx = torch.as_tensor(np.concatenate(parts), device=fed.device)
        cnt = torch.tensor([len(p) for p in parts], device=fed.device)
        off = torch.cumsum(cnt, 0) - cnt
        return Split(fed.train.x[idx], fed.train.y[idx], off, cnt)

    return Federation(split(keep), fed.test, fed.num_classes, fed.name), split(held)


def _per_client(values: np.ndarray, split: Split) -> np.ndarray:
    """Per-client means ``[N]`` of flat per-sample ``values``."""
    return np.add.reduceat(values, split.offsets.cpu().numpy()) / split.counts.cpu().numpy()


def stage_ensembles(fed, seed: int, *, rounds_per_stage: int = ROUNDS_PER_STAGE,
                    num_clients: int = 20, t_max: int = T_MAX):
    """Train PPFE (the benchmark's MLP, schedule and init ``seed``) on ``fed`` and yield, at the
    end of each stage T = 1 … t_max, ``(model, members, alphas, stats)``: the T-stage ensemble
    with the running stage's provisional α (as PPFE's diagnostics compute it) and that stage's
    statistics (weighted training errors ``eps``).  The benchmark's MLP and hyper-parameters
    around :func:`algorithms.methods.ppfe.ppfe_stage_validation.stage_ensembles`, the one training loop of
    the neural stage benchmarks (this module and :mod:`verification.selection.stages_nn_cv`)
    and of ``pflt select-stages --validation``."""
    model = MLP(20, 10, hidden=(32, 32, 16))
    alg = get_algorithm("ppfe")(total_rounds=rounds_per_stage * t_max, stages=t_max,
                                stage_fractions=",".join(["1"] * t_max), lr=0.1, batch_size=10,
                                clients_per_round=num_clients // 2)
    for members, alphas, stats in _stage_ensembles(alg, fed, model, seed):
        yield model, members, alphas, stats


def stage_curves(config: dict, seed: int, *, rounds_per_stage: int = ROUNDS_PER_STAGE,
                 num_clients: int = 20, t_max: int = T_MAX, large_test: int = LARGE_TEST) -> dict:
    """One PPFE run (module docstring): per T = 1 … t_max the ensemble's per-sample 0-1
    correctness on test / validation / train and validation cross-entropy (``[t_max, M]``
    arrays), the per-client accuracy on ``large_test`` fresh samples per client
    (``large [t_max, N]``; 0 = none), the stage's mean weighted training error ε_t, the
    training and test sizes.  The large test is only evaluated: the run is the same without it."""
    gen = dict(num_clients=num_clients, seed=seed, **GENERATOR, **config)
    fed0 = permuted_label_federation(**gen, device=compute_device(), dtype=torch.float32)
    big = (permuted_label_large_test(per_client=large_test, **gen, device=compute_device(),
                                     dtype=torch.float32) if large_test else None)
    fed, val = holdout(fed0, VAL_FRACTION, seed)
    out = {"test": [], "val": [], "val_nll": [], "train": [], "large": [], "eps": []}
    for model, members, a, stats in stage_ensembles(fed, seed, rounds_per_stage=rounds_per_stage,
                                                    num_clients=num_clients, t_max=t_max):
        out["test"].append(evaluate(model, members, a, fed.test)[0])
        correct, nll = evaluate(model, members, a, val)
        out["val"].append(correct)
        out["val_nll"].append(nll)
        out["train"].append(evaluate(model, members, a, fed.train)[0])
        if big is not None:
            out["large"].append(_per_client(evaluate(model, members, a, big)[0], big))
        out["eps"].append(float(stats["eps"].mean()))
    curves = {k: np.stack(v) for k, v in out.items() if k != "eps" and v}
    return {**curves, "eps": out["eps"], "sizes": fed.train.counts.tolist(),
            "test_sizes": fed.test.counts.tolist(), "num_classes": fed.num_classes}


def loss_pick(losses: np.ndarray) -> int:
    """T̂ = 1 + argmin over T of the mean held-out loss, ``losses [t_max, M]`` (smallest T on ties)."""
    l = np.asarray(losses, dtype=np.float64)
    if l.ndim != 2 or l.shape[1] < 1 or not np.all(np.isfinite(l)):
        raise ValueError(f"losses must be a finite [t_max, M >= 1] array, got shape {l.shape}")
    return pick_t(l.mean(1))


def _picks(c: dict) -> dict:
    """Every selector's T̂ for one run ``c`` of :func:`stage_curves` (module docstring)."""
    t_max = c["val"].shape[0]
    base = 1.0 - 1.0 / c["num_classes"]        # 0-1 error of a uniform random guess
    n = harmonic_mean_size(c["sizes"])
    fitted = sel_.fit_bound_inputs((1 - c["train"].mean(1)) / base, (1 - c["val"].mean(1)) / base, n)
    t_bound = select_stages(gamma=fitted["gamma"], kappa0=fitted["kappa0"], n=n, t_max=t_max)
    gamma_run = stage_edge(c["eps"], num_classes=c["num_classes"])
    # as `pflt select-stages --from-run` (γ̂ ≤ GAMMA_MAX; it refuses γ̂ ≤ 0, whose limit is T = 1)
    t_run = select_stages(gamma=min(gamma_run, GAMMA_MAX), kappa0=kappa0_from_ingredients(),
                          n=n, t_max=t_max).t_star if gamma_run > 0 else 1
    val01 = 1.0 - c["val"]
    return {"bound": t_bound.t_star, "bound_run": t_run, "validation": loss_pick(val01),
            "validation_1se": sel_.one_se_pick(val01), "val_loss": loss_pick(c["val_nll"]),
            "val_loss_1se": sel_.one_se_pick(c["val_nll"]), "paper_T4": min(4, t_max),
            "_inputs": {**fitted, "gamma_run": gamma_run, "eps": c["eps"]}}


def run_config(config: dict, *, seeds: int = SEEDS, seed_offset: int = 0, extra=None, **kw) -> dict:
    """Per scoring (``small`` at the top level, ``large`` under ``"large"`` when the large test
    is drawn): accuracy per seed and T, the strict and noise-aware best T and the records of
    every selector's T̂ (:func:`verification.selection.stage_selectors.records`).  Seeds
    ``seed_offset`` … ``seed_offset + seeds − 1`` (records number them 0 … seeds − 1);
    ``extra(config, c, seed, index)``, if given, returns more picks ``{name: T̂}`` for the run ``c``
    (e.g. cross-validation: :mod:`verification.selection.stages_nn_cv`)."""
    small, large, picks = [], [], []
    for s in range(seeds):
        c = stage_curves(config, seed_offset + s, **kw)
        small.append(c["test"].mean(1))
        if "large" in c:   # client i's large-test accuracy weighted by its own test size
            w = np.asarray(c["test_sizes"], dtype=np.float64)
            large.append(c["large"] @ w / w.sum())
        picks.append({**_picks(c), **(extra(config, c, seed_offset + s, s) if extra else {})})
    scored = {}
    for scoring, acc in (("small", small), ("large", large)):
        if not acc:
            continue
        acc = np.array(acc)
        best, close, recs = sel_.records(1.0 - acc, picks, config=config, relative=False)
        scored[scoring] = {"accuracy": acc.tolist(), "best_t": best, "near_best": close,
                           "records": recs}
    out = {"config": config, **scored["small"], "inputs": [p["_inputs"] for p in picks],
           "seed_offset": seed_offset}
    if "large" in scored:
        out["large"] = scored["large"]
    return out


def run_nn_benchmark(configs, *, seeds: int = SEEDS, progress: bool = False, **kw) -> list[dict]:
    """:func:`run_config` for every configuration, torch and BLAS at
    :func:`pfl_theory.threads.default_threads` (``PFLT_THREADS``, default 1: these small
    kernels are slower with several threads on shared cores); the caller's torch thread
    count is restored afterwards (results do not depend on it beyond float rounding)."""
    out, before = [], torch.get_num_threads()
    try:
        set_torch_threads()
        with single_blas_thread():
            for i, c in enumerate(configs):
                out.append(run_config(c, seeds=seeds, **kw))
                if progress:
                    _progress(i, len(configs), c, out[-1])
    finally:
        torch.set_num_threads(before)
    return out


def _progress(i: int, total: int, config: dict, res: dict) -> None:
    for scoring, r in (("small", res), ("large", res.get("large"))):
        if r is not None:
            mean = np.round(100 * np.mean(r["accuracy"], 0), 1).tolist()
            print(f"[{i + 1}/{total}] {config} {scoring}: accuracy by T {mean}, best T "
                  f"{r['best_t']} (within the seed SE: {r['near_best']})", flush=True)


def summarise_nn(results: list[dict], *, scoring: str = "large") -> dict[str, dict]:
    """Per selector (:func:`verification.selection.stage_selectors.summarise`) under ``scoring``
    (``large``: the large per-client test sample; ``small``: the clients' own test splits);
    loss in accuracy fractions, ``lost_le_1pt`` = at most 1 point (0.01)."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    if scoring == "large" and not all("large" in r for r in results):
        raise ValueError("scoring 'large' needs results run with a large test (large_test > 0)")
    recs = [x for r in results for x in (r["large"] if scoring == "large" else r)["records"]]
    return sel_.summarise(recs, NN_SELECTORS + sel_.REFERENCES, tolerance=0.01)


def main(argv=None) -> int:
    from verification.selection.stages_linear import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full grid (9 configurations)")
    p.add_argument("--seeds", type=int, default=None,
                   help=f"seeds per configuration (default {SEEDS}, with --full {FULL_SEEDS})")
    p.add_argument("--large-test", type=int, default=LARGE_TEST,
                   help=f"fresh test samples per client of the 'large' scoring (default {LARGE_TEST})")
    p.add_argument("--save", default=None, metavar="FILE", help="write the results as JSON")
    a = p.parse_args(argv)
    if a.large_test < 1:
        p.error("--large-test must be >= 1")
    if a.seeds is None:
        a.seeds = FULL_SEEDS if a.full else SEEDS
    elif a.seeds < 2:
        p.error("--seeds must be >= 2 (the noise-aware best T needs a seed spread)")
    t0, load0 = time.time(), os.getloadavg()
    res = run_nn_benchmark(full_configs() if a.full else quick_configs(), seeds=a.seeds,
                           large_test=a.large_test, progress=True)
    if a.save:
        import json
        with open(a.save, "w") as f:
            json.dump(res, f, default=str)
    for scoring in SCORINGS:
        what = (f"{a.large_test} fresh test samples per client" if scoring == "large"
                else "the clients' own test splits")
        print(f"\nscoring '{scoring}': best T measured on {what}")
        print_table(summarise_nn(res, scoring=scoring), unit="pt")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{len(res)} configurations × {a.seeds} seeds, {time.time() - t0:.0f} s "
          f"(load average at start {load0[0]:.1f}, at end {load})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
