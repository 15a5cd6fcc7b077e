"""PLGU (Qu et al., CVPR 2023) algorithm checks: the ρ = 0 reduction of FedSAM (§E.D5) and
whether the PLGU variants lift the lowest-5% clients over their base methods (the claim of
Tables 1–2, §D.9) on a small label-skewed Synthetic federation."""

from __future__ import annotations

import math

import numpy as np
import torch

from algorithms.engine.base import get_algorithm
from algorithms.engine.evaluation import evaluate, summarize
from algorithms.engine.models import DNN
from verification.experiments.plgu import CLASSES, DIM, federation
from synthetic.federation import Federation
from verification.core.registry import Context, Outcome, Verdict, check
from verification.core.verdicts import difference_three_way, outcome, worst
from synthetic.federation import compute_device

PAPER = "PLGU (CVPR 2023)"


def _blobs(seed: int, clients: int) -> Federation:
    rng = np.random.RandomState(seed)
    means = 3.0 * np.eye(4, 6)
    xs, ys = [], []
    for i in range(clients):
        y = rng.choice([i % 4, (i + 1) % 4], size=40 + 5 * (i % 3))
        xs.append(means[y] + rng.randn(len(y), 6))
        ys.append(y.astype(np.int64))
    return Federation.from_client_arrays(xs, ys, num_classes=4, seed=seed, device=compute_device(),
                                         dtype=torch.float64)


@check("plgu.rho0_fedsam_equals_fedavg", paper=PAPER,
       reference="§E.D5: ρ = 0 removes the SAM perturbation (FedSAM → FedAvg)", kind="identity",
       tolerance=0.0, tolerance_reason="same draws and the same float64 operations: bit-identical",
       quick={"clients": 10, "rounds": 3}, full={"clients": 40, "rounds": 10})
def rho0_fedsam_equals_fedavg(ctx: Context) -> Outcome:
    """FedSAM with ρ = 0 and FedAvg, same seed: identical global models after every round."""
    fed = _blobs(ctx.seed, ctx.params["clients"])
    model = DNN(6, 4, hidden=8)
    kw = dict(local_rounds=4, batch_size=8, clients_per_round=ctx.params["clients"] // 2, lr=0.1)
    sam, avg = get_algorithm("fedsam")(rho=0.0, **kw), get_algorithm("fedavg")(**kw)
    a, b = sam.init(fed, model, ctx.seed), avg.init(fed, model, ctx.seed)
    worst = 0.0
    for _ in range(ctx.params["rounds"]):
        a, b = sam.round(a, fed, model), avg.round(b, fed, model)
        worst = max(worst, max(float((a.models["global"][k] - b.models["global"][k]).abs().max())
                               for k in b.models["global"]))
    return Outcome(measured=worst, theoretical=0.0, holds=worst <= ctx.tolerance,
                   detail=f"max |w_FedSAM(ρ=0) − w_FedAvg| over {ctx.params['rounds']} rounds: {worst:.3g}")


PAIRS = [  # (PLGU variant, its model, the base it should beat, base's model)
    (("plgu-lf", {"local_rounds": 5, "rho": 0.05, "personalized_layers": 1}), "global",
     ("fedavg", {"local_rounds": 5}), "global"),
    (("plgu-lf", {"local_rounds": 5, "rho": 0.05, "personalized_layers": 1}), "personalized",
     ("ditto", {"local_rounds": 5, "lam": 0.75, "personal_lr": 0.2}), "personalized"),
    (("plgu-grep", {"head_steps": 5, "rho": 0.05}), "personalized",
     ("fedrep", {"head_steps": 5, "local_rounds": 1}), "personalized"),
    (("plgu-ghn", {"local_rounds": 5, "rho": 0.05, "hn_lr": 0.3}), "personalized",
     ("pfedhn", {"local_rounds": 5, "hn_lr": 0.3}), "personalized"),
]


@check("plgu.lowest5_lift", paper=PAPER,
       reference="Tables 1–2: PLGU raises the lowest-5% client accuracy over FedAvg, Ditto, "
                 "FedRep, pFedHN (§D.9)", kind="ordering",
       quick={"clients": 40, "rounds": 15, "seeds": 1}, full={"clients": 100, "rounds": 60, "seeds": 3})
def lowest5_lift(ctx: Context) -> Outcome:
    """Lowest-5% accuracy (mean of the worst ⌈0.05N⌉ clients) of each PLGU variant minus that of
    its base, averaged over seeds, on a 3-of-8-classes label-skewed Synthetic pool.  Each lift
    is judged against two standard errors: binomial error of the worst clients' accuracies
    (Σ p(1−p)/n_test,i over the ⌈0.05N⌉ clients, / k², both methods) plus the variance over
    seeds / seeds.  HOLDS if every lift > 2se, FAILS if some lift < −2se, else INCONCLUSIVE.
    (At the old quick size N = 20 the lowest 5% was ONE client with 11–25 test samples: two
    lifts were exactly 0.000 because both methods' worst client was the same client with the
    same count of correct predictions — 3/19 for PLGU-LF vs FedAvg, 2/11 for PLGU-GHN vs
    pFedHN — a tie at the 1/n_test granularity, not a measured "no lift".)"""
    torch.set_num_threads(1)
    common = dict(lr=0.2, batch_size=20, clients_per_round=ctx.params["clients"] // 2)
    lifts: dict[str, list[float]] = {}
    var: dict[str, list[float]] = {}
    # the lowest-5% is computed twice (issue 41): here (mean of the worst ⌈0.05N⌉) and by the
    # engine's summarize, on the runs and on a probe of N = 30 clients where ⌈1.5⌉ ≠ ⌊1.5⌋
    probe = torch.linspace(0.1, 0.9, 30, dtype=torch.float64).flip(0)
    mismatch = [abs(summarize(probe, torch.ones_like(probe))["low5"]
                    - float(torch.sort(probe).values[:math.ceil(0.05 * 30)].mean()))]
    for s in range(ctx.seed, ctx.seed + ctx.params["seeds"]):
        fed = federation(num_clients=ctx.params["clients"], seed=s)
        model = DNN(DIM, CLASSES, hidden=32)
        n_test = fed.test.counts.double()
        cache: dict = {}

        def low5(name, hps, which):
            key = (name, tuple(sorted(hps.items())))
            if key not in cache:
                alg = get_algorithm(name)(**common, **hps)
                st = alg.init(fed, model, s)
                for _ in range(ctx.params["rounds"]):
                    st = alg.round(st, fed, model)
                cache[key] = {w: evaluate(model, p, fed.test)[0] for w, p in alg.evaluated(st).items()}
            acc = cache[key][which].double()
            k = math.ceil(0.05 * acc.numel())
            worst = torch.argsort(acc, stable=True)[:k]
            p = acc[worst]
            binom = float((p * (1 - p) / n_test[worst]).sum()) / k ** 2
            reported = summarize(acc, torch.ones_like(acc))["low5"]
            mismatch.append(abs(reported - float(p.mean())))
            return float(p.mean()), binom

        for (pn, phps), pw, (bn, bhps), bw in PAIRS:
            label = f"{pn}({pw}) − {bn}({bw})"
            (a, va), (b, vb) = low5(pn, phps, pw), low5(bn, bhps, bw)
            lifts.setdefault(label, []).append(a - b)
            var.setdefault(label, []).append(va + vb)
    measured, verdicts, parts = {}, [], []
    for label, v in lifts.items():
        arr = np.asarray(v)
        se2 = float(np.mean(var[label])) / arr.size
        if arr.size > 1:
            se2 += float(arr.var(ddof=1)) / arr.size
        se = math.sqrt(se2)
        measured[label] = round(float(arr.mean()), 4)
        verdicts.append(difference_three_way(float(arr.mean()), se))
        parts.append(f"{label}: {arr.mean():+.3f} ± {2 * se:.3f} → {verdicts[-1].value}")
    verdict = worst(verdicts)
    if max(mismatch) > 1e-12:   # the same mean of the same accuracies: equal to round-off
        verdict = Verdict.FAILS
        parts.append(f"the engine's reported lowest-5% differs from the check's own mean of "
                     f"the worst ⌈0.05N⌉ clients by {max(mismatch):.3g}: the tail size or "
                     f"its mean is wrong")
    return outcome(verdict, measured=measured, theoretical="every lift > 0",
                   detail=f"N={ctx.params['clients']}, T={ctx.params['rounds']}, "
                          f"{ctx.params['seeds']} seed(s); lowest-5% lifts (±2se): " + "; ".join(parts))


@check("plgu.d_equals_l_no_perturbation", paper=PAPER,
       reference="§D.5 / §E.D5: with D = L every layer is personalized, so LWSAM perturbs "
                 "nothing (PLGU-LF at ρ > 0 equals ρ = 0)", kind="identity",
       tolerance=0.0, tolerance_reason="same draws, same float64 operations: bit-identical",
       quick={"clients": 8, "rounds": 3}, full={"clients": 30, "rounds": 8})
def d_equals_l_no_perturbation(ctx: Context) -> Outcome:
    fed = _blobs(ctx.seed, ctx.params["clients"])
    model = DNN(6, 4, hidden=8)
    cls = get_algorithm("plgu-lf")
    kw = dict(local_rounds=3, batch_size=8, clients_per_round=ctx.params["clients"] // 2,
              lr=0.1, personalized_layers=len(model.layers))
    states = []
    for rho in (0.0, 0.5):
        alg = cls(rho=rho, **kw)
        s = alg.init(fed, model, ctx.seed)
        for _ in range(ctx.params["rounds"]):
            s = alg.round(s, fed, model)
        states.append(s)
    diff = max(float((states[0].models[m][k] - states[1].models[m][k]).abs().max())
               for m in states[0].models for k in states[0].models[m])
    return Outcome(measured=diff, theoretical=0.0, holds=diff <= ctx.tolerance,
                   detail=f"max |θ(ρ=0.5) − θ(ρ=0)| over all models = {diff:.3g} at D = L")
