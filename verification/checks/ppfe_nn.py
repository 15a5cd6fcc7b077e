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
from verification.core.verdicts import difference_three_way, outcome
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
    stage, and the last stage should beat stage 0 (FedAvg).  No tolerance: every difference
    is judged against its standard error (binomial, unpaired: se = √((p₁(1−p₁) +
    p₂(1−p₂))/n_test), conservative) at z = 2 (one-sided 97.7%), and only a significant
    difference decides (the sign of a step inside its error bar decides nothing).
    FAILS if a stage loses significantly or the last stage is significantly below stage 0;
    HOLDS if the gain over stage 0 is significant and no stage loses significantly;
    INCONCLUSIVE otherwise (this test set cannot resolve the gain)."""
    fed, model, rounds, common = setting(quick=ctx.params["quick"], seed=ctx.seed)
    alg = PPFE(total_rounds=rounds, **common)
    ends = stage_ends(alg, model)
    entries = trajectory(alg, fed, model, rounds=rounds, seed=ctx.seed, eval_rounds=set(ends))
    acc = [e["ensemble_accuracy"] for e in entries]
    stage_acc = [round(e["stage_accuracy"], 4) for e in entries]
    n_test = float(fed.test.counts.sum())
    return stage_verdict(acc, n_test, ends, stage_acc)


#: the level of every difference in :func:`stage_verdict`: z = 2, one-sided 97.7%
Z = 2.0


def stage_verdict(acc: list[float], n_test: float, ends, stage_acc) -> Outcome:
    """The verdict of :func:`stage_accuracy_improves` from the ensemble accuracies ``acc`` at
    the stage ends (rules in its docstring)."""
    def se(a: float, b: float) -> float:
        return math.sqrt((a * (1 - a) + b * (1 - b)) / n_test)

    steps = [(b - a, se(a, b)) for a, b in zip(acc, acc[1:])]
    gain, gain_se = acc[-1] - acc[0], se(acc[0], acc[-1])
    step_v = [difference_three_way(d, s, z=Z) for d, s in steps]
    gain_v = difference_three_way(gain, gain_se, z=Z)
    if Verdict.FAILS in step_v or gain_v is Verdict.FAILS:
        verdict = Verdict.FAILS
    elif gain_v is Verdict.HOLDS:
        verdict = Verdict.HOLDS
    else:
        verdict = Verdict.INCONCLUSIVE
    rounded = [round(a, 4) for a in acc]
    return outcome(verdict, measured={"ensemble": rounded, "stage_model": stage_acc},
                   theoretical="non-decreasing over stages, last > stage 0",
                   detail=f"ensemble accuracy at stage ends (rounds {ends}): {rounded}; steps "
                          + ", ".join(f"{d:+.4f}±{Z * s:.4f}" for d, s in steps)
                          + f" ({Z:g}se, one-sided level 97.7%, n_test={int(n_test)}; a step "
                          f"inside its band decides nothing); gain over stage 0 {gain:+.4f}±"
                          f"{Z * gain_se:.4f} ({gain_v.value} at that level); running stage "
                          f"model: {stage_acc} (planted permuted-label federation, 4-layer "
                          f"MLP) → {verdict.value}")
