"""Benchmark: PPFE's number of stages T̂ on a neural setting against the best T.

PPFE for neural networks (:mod:`algorithms.ppfe`, Emrani, Najafi, Motahari 2026, Algorithm 1)
with the MLP of :mod:`verification.experiments_ppfe_nn` (widths 20-32-32-16-10, 4 layers, so
progressive PPFE has at most T = 5 stages: stage t personalizes the last t layers) on the
planted label-skewed federation :func:`synthetic.permuted_labels.permuted_label_federation`
(10 clusters, 4 per client, a fraction ``permuted`` of the clients with permuted labels).

Protocol.  Every client holds out ``VAL_FRACTION`` of its training data (seeded) as a
validation split; PPFE is trained on the rest with ``ROUNDS_PER_STAGE`` rounds per stage for
T_max = 5 stages.  The T-stage PPFE with the same per-stage rounds is exactly the prefix of
this run (same schedule, same seeded draws; tested), so the ensemble of the first T stages
at the end of stage T − 1 (eq. 8, the running stage with its provisional α) *is* PPFE with T
stages: one run gives the whole curve.  Per T it is evaluated on the test split (the **best
T** maximises the seed-averaged sample-weighted test accuracy, smallest T on ties), the
validation split and the training split.  Selectors (per seed):

* ``bound`` — :func:`pfl_theory.ppfe_bounds.select_stages` with γ̂, κ̂₀ fitted to the run's
  normalised ensemble training error and validation gap
  (:func:`verification.stage_selectors.fit_bound_inputs`; trivial error 1 − 1/C), n = the
  harmonic mean of the clients' training sizes;
* ``bound_run`` — the inputs ``pflt select-stages --from-run`` uses: γ̂ from the stages'
  weighted training errors (:func:`pfl_theory.ppfe_bounds.stage_edge`, multiclass SAMME
  edge, ≤ 0.49; T̂ = 1 if a stage is no better than chance), κ₀ from the default ingredients
  (B = A = 1, ε_α = 0.01), the same n;
* ``validation`` — the T of highest validation accuracy;
* ``validation_1se`` — the one-SE rule on the per-sample validation 0-1 losses;
* ``paper_T4`` — the paper's T = 4.

Loss of T̂: accuracy points (best T's seed-mean test accuracy minus T̂'s).
``python -m verification.selection_stages_nn [--full]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from algorithms.base import get_algorithm
from algorithms.models import MLP
from algorithms.ppfe_ensemble import client_of, ensemble_scores, per_sample_logits
from pfl_theory.ppfe_bounds import GAMMA_MAX, kappa0_from_ingredients, select_stages, stage_edge
from pfl_theory.ppfe_covering import harmonic_mean_size
from synthetic.federation import Federation, Split
from synthetic.permuted_labels import permuted_label_federation
from verification import stage_selectors as sel_

__all__ = ["NN_SELECTORS", "quick_configs", "full_configs", "holdout", "stage_curves",
           "run_config", "run_nn_benchmark", "summarise_nn"]

NN_SELECTORS = ("bound", "bound_run", "validation", "validation_1se", "paper_T4")
VAL_FRACTION = 0.2
ROUNDS_PER_STAGE = 10
T_MAX = 5           # 4-layer MLP: stages 0 … 4
SEEDS = 3


def quick_configs() -> list[dict]:
    return [dict(permuted=0.5, size_range=(20, 60)), dict(permuted=0.0, size_range=(60, 150))]


def full_configs() -> list[dict]:
    """permuted ∈ {0, 0.5, 1} × client sizes ∈ {20–60, 60–150}: 6 configurations."""
    return [dict(permuted=p, size_range=r) for p in (0.0, 0.5, 1.0) for r in ((20, 60), (60, 150))]


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


def _correct(model, members, alphas, split) -> np.ndarray:
    logits = [per_sample_logits(model, p, split) for p in members]
    pred = ensemble_scores(logits, alphas, client_of(split), "probs").argmax(-1)
    return (pred == split.y).cpu().numpy().astype(np.float64)


def stage_curves(config: dict, seed: int, *, rounds_per_stage: int = ROUNDS_PER_STAGE,
                 num_clients: int = 20, t_max: int = T_MAX) -> dict:
    """One PPFE run (module docstring): per T = 1 … t_max the ensemble's per-sample 0-1
    correctness on test / validation / train (``[t_max, M]`` arrays), the stage's mean
    weighted training error ε_t and the training sizes."""
    fed0 = permuted_label_federation(num_clients=num_clients, num_clusters=10, classes_per_client=4,
                                     dim=20, separation=1.0, noise=2.0, seed=seed, device="cpu",
                                     dtype=torch.float32, **config)
    fed, val = holdout(fed0, VAL_FRACTION, seed)
    model = MLP(20, 10, hidden=(32, 32, 16))
    alg = get_algorithm("ppfe")(total_rounds=rounds_per_stage * t_max, stages=t_max,
                                stage_fractions=",".join(["1"] * t_max), lr=0.1, batch_size=10,
                                clients_per_round=num_clients // 2)
    state = alg.init(fed, model, seed)
    out = {"test": [], "val": [], "train": [], "eps": []}
    for r in range(rounds_per_stage * t_max):
        state = alg.round(state, fed, model)
        if state.round % rounds_per_stage == 0:
            members, s = alg.ensemble_members(state)
            stats = alg._statistics(state, fed, model, members[-1])
            alphas = state.tensors["alphas"].clone()
            alphas[s] = stats["alpha"].to(alphas.dtype)   # provisional α, as diagnostics does
            for name, split in (("test", fed.test), ("val", val), ("train", fed.train)):
                out[name].append(_correct(model, members, alphas[:s + 1], split))
            out["eps"].append(float(stats["eps"].mean()))
    curves = {k: np.stack(v) for k, v in out.items() if k != "eps"}
    return {**curves, "eps": out["eps"], "sizes": fed.train.counts.tolist(),
            "num_classes": fed.num_classes}


def run_config(config: dict, *, seeds: int = SEEDS, **kw) -> dict:
    """Test accuracy per seed and T, the strict and noise-aware best T, each selector's T̂."""
    acc, picks = [], []
    for s in range(seeds):
        c = stage_curves(config, s, **kw)
        t_max = c["test"].shape[0]
        acc.append(c["test"].mean(1))
        base = 1.0 - 1.0 / c["num_classes"]        # 0-1 error of a uniform random guess
        n = harmonic_mean_size(c["sizes"])
        fitted = sel_.fit_bound_inputs((1 - c["train"].mean(1)) / base,
                                       (1 - c["val"].mean(1)) / base, n)
        t_bound = select_stages(gamma=fitted["gamma"], kappa0=fitted["kappa0"], n=n, t_max=t_max)
        gamma_run = stage_edge(c["eps"], num_classes=c["num_classes"])
        # as `pflt select-stages --from-run` (γ̂ ≤ GAMMA_MAX; it refuses γ̂ ≤ 0, whose limit is T = 1)
        t_run = select_stages(gamma=min(gamma_run, GAMMA_MAX), kappa0=kappa0_from_ingredients(),
                              n=n, t_max=t_max).t_star if gamma_run > 0 else 1
        val_loss = 1.0 - c["val"]
        picks.append({"bound": t_bound.t_star, "bound_run": t_run,
                      "validation": int(np.argmin(val_loss.mean(1))) + 1,
                      "validation_1se": sel_.one_se_pick(val_loss),
                      "paper_T4": min(4, t_max),
                      "_inputs": {**fitted, "gamma_run": gamma_run, "eps": c["eps"]}})
    acc = np.array(acc)
    best, close, recs = sel_.records(1.0 - acc, picks, config=config, relative=False)
    return {"config": config, "accuracy": acc.tolist(), "best_t": best, "near_best": close,
            "records": recs, "inputs": [p["_inputs"] for p in picks]}


def run_nn_benchmark(configs, *, seeds: int = SEEDS, progress: bool = False, **kw) -> list[dict]:
    out = []
    for i, c in enumerate(configs):
        out.append(run_config(c, seeds=seeds, **kw))
        if progress:
            mean = np.round(100 * np.mean(out[-1]["accuracy"], 0), 1).tolist()
            print(f"[{i + 1}/{len(configs)}] {c}: accuracy by T {mean}, best T {out[-1]['best_t']} "
                  f"(within the seed SE: {out[-1]['near_best']})", flush=True)
    return out


def summarise_nn(results: list[dict]) -> dict[str, dict]:
    """Per selector (:func:`verification.stage_selectors.summarise`); loss in accuracy
    fractions, ``lost_le_1pt`` = at most 1 point (0.01)."""
    recs = [r for res in results for r in res["records"]]
    return sel_.summarise(recs, NN_SELECTORS + sel_.REFERENCES, tolerance=0.01)


def main(argv=None) -> int:
    from verification.selection_stages import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full grid (6 configurations)")
    p.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per configuration (default {SEEDS})")
    p.add_argument("--save", default=None, metavar="FILE", help="write the results as JSON")
    a = p.parse_args(argv)
    t0 = time.time()
    res = run_nn_benchmark(full_configs() if a.full else quick_configs(), seeds=a.seeds, progress=True)
    if a.save:
        import json
        with open(a.save, "w") as f:
            json.dump(res, f, default=str)
    print_table(summarise_nn(res), unit="pt")
    print(f"{len(res)} configurations × {a.seeds} seeds, {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
