"""PPFE for neural networks (Emrani, Najafi, Motahari, arXiv 2602.14244): Remark 3 (one stage
with a fixed head is FedRep) and the claim that accuracy improves stage by stage (§4, §6;
docs/formulas.md §C.4 — the algorithm is RECONSTRUCTED)."""

from __future__ import annotations

import math

import torch

from algorithms.methods.decoupled.fedrep import FedRep
from algorithms.methods.ppfe.ppfe import PPFE
from algorithms.engine.models import MLP
from verification.experiments.ppfe_nn import setting, stage_ends, trajectory
from synthetic.permuted_labels import permuted_label_federation
from verification.core.registry import Context, Outcome, Verdict, check
from verification.core.verdicts import outcome
from synthetic.federation import compute_device

PAPER = "PPFE (arXiv 2602.14244)"


@check("ppfe.one_stage_equals_fedrep", paper=PAPER, reference="Remark 3; Algorithm 1 (§C.4)",
       kind="identity", tolerance=0.0,
       tolerance_reason="same seed and the same tensor operations in the same order ⇒ bitwise equal",
       reconstructed=True, quick={"clients": 6, "rounds": 4, "head": 1},
       full={"clients": 20, "rounds": 20, "head": 2})
def one_stage_equals_fedrep(ctx: Context) -> Outcome:
    """PPFE with one stage and a fixed head of k layers vs FedRep with head_layers = k."""
    p = ctx.params
    fed = permuted_label_federation(num_clients=p["clients"], num_clusters=4, classes_per_client=3,
                                    dim=6, size_range=(30, 60), seed=ctx.seed, device=compute_device(),
                                    dtype=torch.float64)
    model = MLP(6, 4, hidden=(8, 8, 6))
    common = dict(lr=0.1, clients_per_round=max(1, p["clients"] // 2), local_rounds=3,
                  head_steps=2, batch_size=7)
    ppfe = PPFE(stages=1, stage_fractions="1", fixed_head=p["head"], total_rounds=p["rounds"],
                full_last_round=False, **common)
    rep = FedRep(head_layers=p["head"], **common)
    a, b = ppfe.init(fed, model, ctx.seed), rep.init(fed, model, ctx.seed)
    for _ in range(p["rounds"]):
        a, b = ppfe.round(a, fed, model), rep.round(b, fed, model)
    pa, pb = ppfe.evaluated(a)["stage"], rep.evaluated(b)["personalized"]
    diff = max(float((pa[k] - pb[k]).abs().max()) for k in pb)
    return Outcome(measured=diff, theoretical=0.0, holds=pa.keys() == pb.keys() and diff <= ctx.tolerance,
                   detail=f"max |θ_PPFE − θ_FedRep| over all parameters after {p['rounds']} rounds "
                          f"(head = last {p['head']} layer(s)): {diff:.3g}")


@check("ppfe.stage_accuracy_improves", paper=PAPER,
       reference="§4.2 progressive personalization; Tables 3–5 (ensemble vs fixed heads)",
       kind="ordering", reconstructed=True, quick={"quick": True}, full={"quick": False})
def stage_accuracy_improves(ctx: Context) -> Outcome:
    """Ensemble test accuracy at the end of each stage should not decrease from stage to
    stage, and the last stage should beat stage 0 (FedAvg).  No tolerance: each difference is
    judged against two standard errors of a difference of two test accuracies (binomial,
    unpaired: se = √((p₁(1−p₁) + p₂(1−p₂))/n_test), conservative).  FAILS if a stage loses
    more than 2se or the last stage is more than 2se below stage 0; HOLDS if no stage loses
    accuracy and the overall gain exceeds 2se; INCONCLUSIVE otherwise (a loss or a gain this
    test set cannot resolve)."""
    fed, model, rounds, common = setting(quick=ctx.params["quick"], seed=ctx.seed)
    alg = PPFE(total_rounds=rounds, **common)
    ends = stage_ends(alg, model)
    entries = trajectory(alg, fed, model, rounds=rounds, seed=ctx.seed, eval_rounds=set(ends))
    acc = [e["ensemble_accuracy"] for e in entries]
    stage_acc = [round(e["stage_accuracy"], 4) for e in entries]
    n_test = float(fed.test.counts.sum())

    def se(a: float, b: float) -> float:
        return math.sqrt((a * (1 - a) + b * (1 - b)) / n_test)

    steps = [(b - a, se(a, b)) for a, b in zip(acc, acc[1:])]
    gain, gain_se = acc[-1] - acc[0], se(acc[0], acc[-1])
    if any(d < -2 * s for d, s in steps) or gain < -2 * gain_se:
        verdict = Verdict.FAILS
    elif all(d >= 0 for d, _ in steps) and gain > 2 * gain_se:
        verdict = Verdict.HOLDS
    else:
        verdict = Verdict.INCONCLUSIVE
    rounded = [round(a, 4) for a in acc]
    return outcome(verdict, measured={"ensemble": rounded, "stage_model": stage_acc},
                   theoretical="non-decreasing over stages, last > stage 0",
                   detail=f"ensemble accuracy at stage ends (rounds {ends}): {rounded}; steps "
                          + ", ".join(f"{d:+.4f}±{2 * s:.4f}" for d, s in steps)
                          + f" (2se, n_test={int(n_test)}); gain over stage 0 {gain:+.4f}±"
                          f"{2 * gain_se:.4f}; running stage model: {stage_acc} (planted "
                          f"permuted-label federation, 4-layer MLP) → {verdict.value}")
