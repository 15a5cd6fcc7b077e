"""CGPFL algorithm checks (Tang, Guo, Guo, IJCAI 2022; docs/formulas.md §A.5, §A.7, §A.9,
§E.A items 3, 6, 7, 8, 12), run on the batched engine in float64 with planted-context data
(:mod:`verification.experiments.cgpfl`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from algorithms.engine.base import flatten
from algorithms.methods.clustered.cgpfl import CGPFL
from algorithms.engine.models import build_model
from algorithms.methods.regularized.pfedme import PFedMe
from verification.experiments import cgpfl as ex
from verification.estimators.fitting import fit_loglog
from verification.core.registry import Context, Outcome, check, envelope_outcome
from verification.core.verdicts import outcome, rate_three_way

PAPER = "CGPFL (IJCAI 2022)"


def _maxdiff(a: dict, b: dict) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@check("cgpfl.k1_equals_pfedme", paper=PAPER, reference="Algorithm 1 with K = 1 (§A.2, §A.5)",
       kind="identity", tolerance=1e-10,
       tolerance_reason="float64; the paper's β·2/N differs from ηλ by one rounding",
       quick={"clients": 8, "rounds": 4}, full={"clients": 20, "rounds": 20})
def k1_equals_pfedme(ctx: Context) -> Outcome:
    """CGPFL(K=1, β·2/N = ηλ, α = β_pFedMe) and pFedMe (S = N, uniform) from the same seed."""
    pl = ex.planted_federation(ctx.params["clients"], 2, dim=10, size_range=(30, 50), seed=ctx.seed)
    fed, model = pl.fed, build_model("mlr", pl.fed)
    n, eta, lam = fed.num_clients, 0.01, 12.0
    a = CGPFL(num_contexts=1, lam=lam, personal_lr=0.05, inner_steps=3, lr=eta * lam * n / 2,
              local_step="paper", alpha=0.9, local_rounds=3, batch_size=10)
    b = PFedMe(lam=lam, lr=eta, personal_lr=0.05, inner_steps=3, local_rounds=3, batch_size=10,
               beta=0.9, clients_per_round=n)
    sa, sb = a.init(fed, model, ctx.seed), b.init(fed, model, ctx.seed)
    err = 0.0
    for _ in range(ctx.params["rounds"]):
        sa, sb = a.round(sa, fed, model), b.round(sb, fed, model)
        err = max(err, _maxdiff(sa.models["context"], sb.models["global"]),
                  _maxdiff(sa.models["personalized"], sb.models["personalized"]))
    return Outcome(err, 0.0, err <= ctx.tolerance,
                   f"max |CGPFL − pFedMe| over {ctx.params['rounds']} rounds = {err:.2e}")


@check("cgpfl.alpha1_cluster_means", paper=PAPER, reference="Algorithm 1 step 4 (§A.5, §E.A 3)",
       kind="identity", tolerance=1e-12, tolerance_reason="float64 mean of ≤ 20 vectors",
       quick={"clients": 12, "k": 3, "rounds": 3}, full={"clients": 40, "k": 4, "rounds": 10})
def alpha1_cluster_means(ctx: Context) -> Outcome:
    """α = 1 ⇒ ω^{t+1}_k = mean of the uploads ω̃_{i,R} over i ∈ C^{t+1}_k (numpy golden)."""
    p = ctx.params
    pl = ex.planted_federation(p["clients"], p["k"], seed=ctx.seed)
    model = build_model("mlr", pl.fed)
    alg = ex.cgpfl(p["k"], alpha=1.0)
    s, err = alg.init(pl.fed, model, ctx.seed), 0.0
    for _ in range(p["rounds"]):
        s = alg.round(s, pl.fed, model)
        ups, lab = flatten(s.models["local"]).numpy(), s.tensors["assignment"].numpy()
        means = np.stack([ups[lab == k].mean(0) for k in range(p["k"])])
        err = max(err, float(np.abs(flatten(s.models["context"]).numpy() - means).max()))
    return Outcome(err, 0.0, err <= ctx.tolerance, f"max deviation from cluster means {err:.2e}")


@check("cgpfl.global_update_identity", paper=PAPER, reference="ICLR eq. (6) / eq. (5) (§A.5, §E.A 7)",
       kind="identity", tolerance=1e-10,
       tolerance_reason="float64 per-client loop vs batched engine, rounding only",
       quick={"clients": 8, "rounds": 4}, full={"clients": 20, "rounds": 10})
def global_update_identity(ctx: Context) -> Outcome:
    """Ω^{t+1} = Ω^t[(1−α)I + αQ^t] − αβR H^t_I P^t Q^t in rounds with P^{t+1} = P^t Q^t,
    H from an independent per-client loop, P, Q from their definitions (eq. 3–4)."""
    p = ctx.params
    pl = ex.planted_federation(p["clients"], 2, dim=10, size_range=(30, 50), seed=ctx.seed)
    model = build_model("mlr", pl.fed)
    alg = ex.cgpfl(2, alpha=0.7, local_scale=0.0, local_step="paper", lr=1.0, local_rounds=3, inner_steps=3)
    s, err, used = alg.init(pl.fed, model, ctx.seed), 0.0, 0
    for _ in range(p["rounds"]):
        s_next = alg.round(s, pl.fed, model)
        if s.round > 0 and torch.equal(s.tensors["assignment"], s_next.tensors["assignment"]):
            _, h = ex.reference_local_round(alg, s, pl.fed, model)
            rhs = ex.global_update_rhs(alg, s, s_next, h)
            err = max(err, float((flatten(s_next.models["context"]) - rhs).abs().max()))
            used += 1
        s = s_next
    holds = used > 0 and err <= ctx.tolerance
    return Outcome(err, 0.0, holds, f"{used} stable rounds checked, max |lhs − rhs| = {err:.2e}")


def _benchmark_outcome(ctx: Context, selector: str) -> Outcome:
    """``selector``'s agreement with the empirically best K on the selection benchmark
    (:mod:`verification.selection.k_benchmark`; quick: 4 cases, full: the 8 medium cases, hard and very
    unequal contexts included), case seeds shifted by ``ctx.seed``.  The best K is measured on
    the benchmark's large test sample (1000 fresh samples per client from its own
    distribution, scoring ``large``): the clients' own 10–20 test samples measure a K's
    accuracy with a binomial SE of ≈ 2 points, more than the 1-point target; the ``small``
    scoring's rates are reported beside.  Measured: the fractions of
    (case, seed) records within ±1 of the strict best K, within ±1 of the noise-aware set of
    best K (every K within the seed-to-seed standard error of the best), and losing ≤ 1
    accuracy point.  HOLDS when the noise-aware ±1 and the ≤ 1 point rates both reach the
    tolerance; FAILS when the selector loses > 1 point more often than the reference (the K
    grid trained with another seed, which says how well-defined the best K is) and than the
    tolerance allows; INCONCLUSIVE otherwise (the best K is not resolved at this size)."""
    from verification.selection import k_benchmark as sk
    from verification.selection import k_cases as skc
    from verification.core.registry import Verdict

    cases, cfg = ((skc.quick_cases(), skc.QUICK) if ctx.params["cases"] == "quick"
                  else (skc.medium_cases(), skc.BenchConfig(rounds=12)))
    cases = [dataclasses.replace(c, seed=c.seed + ctx.seed) for c in cases]
    results = sk.run_benchmark(cases, cfg)
    summary, small = sk.summarise(results), sk.summarise(results, scoring="small")
    e, ref = summary[selector], summary.get("grid_other_seed")
    tol = ctx.tolerance
    set_w1 = e["set_within1"]
    ok = set_w1 >= tol and e["lost_le_1pt"] >= tol
    worse = ref is not None and e["lost_le_1pt"] < min(ref["lost_le_1pt"], tol)
    verdict = None if ok or worse else Verdict.INCONCLUSIVE
    rates = "; ".join(f"{k}: ±1 {v['within1']:.0%} (set {v['set_within1']:.0%}), "
                      f"≤1pt {v['lost_le_1pt']:.0%}, mean lost {100 * v['mean_lost']:.1f} pt"
                      for k, v in summary.items())
    return Outcome({"set_within1": set_w1, "lost_le_1pt": e["lost_le_1pt"],
                    "within1_strict": e["within1"], "exact_strict": e["exact"],
                    "mean_lost_points": 100 * e["mean_lost"], "records": e["records"],
                    "selectors": summary, "small_test": small},
                   {"set_within1": f">= {tol}", "lost_le_1pt": f">= {tol}"},
                   ok, f"{selector}, {len(cases)} cases × {cfg.seeds} seeds, best K on "
                       f"{cfg.large_test} test samples per client: {rates}; small test "
                       f"(own 10-20): {selector} set ±1 "
                       f"{small[selector]['set_within1']:.0%}, "
                       f"≤1pt {small[selector]['lost_le_1pt']:.0%}",
                   verdict=verdict)


_TARGET = ("the toolkit's selection targets: K̂ within ±1 of the empirically best K (noise-aware set; the "
           "strict argmax rate is reported beside it) and <= 1 accuracy point lost, each in "
           ">= 90% of (case, seed) records; best K measured on 1000 fresh test samples per "
           "client (the own 10-20 measure it only to about 2 points)")


@check("cgpfl.heur_khat_planted", paper=PAPER, reference="IJCAI eq. (11), CGPFL-Heur (§A.9, §E.A 12)",
       kind="selection", tolerance=0.9, tolerance_reason=_TARGET,
       quick={"cases": "quick"}, full={"cases": "medium"})
def heur_khat_planted(ctx: Context) -> Outcome:
    """CGPFL-Heur's e(K) (default scale-free μ = 1/cost(1), on the personalized models after 3
    rounds) against the K that maximises CGPFL's personalized test accuracy, on the selection
    benchmark (label-skew and feature-shift contexts, equal and very unequal sizes, easy and
    hard).  HOLDS when the selector reaches the targets, FAILS when it misses them by more than
    the seeds' noise explains, INCONCLUSIVE otherwise; the other selectors are reported beside."""
    return _benchmark_outcome(ctx, "e_relative")


@check("cgpfl.khat_validation_planted", paper=PAPER,
       reference="CGPFL's K (§A.9): held-out validation (cross-entropy) after short runs, "
                 "one hold-out of the toolkit's recommended 4-fold selector (docs/selection.md)",
       kind="selection", tolerance=0.9, tolerance_reason=_TARGET,
       quick={"cases": "quick"}, full={"cases": "medium"})
def khat_validation_planted(ctx: Context) -> Outcome:
    """The K selector ``val_loss`` — one fold of the recommended 4-fold ``val_cv_loss``, at a
    quarter of its cost (``pflt select-k --validation --val-cv 1``: a quarter
    of each client's training data held out, K = 1 warm-up shared by every K, short CGPFL runs
    per K, argmin of the held-out cross-entropy of the personalized models — chosen over the
    held-out accuracy ``val`` on the dev half of the 60-case grid and confirmed on its
    held-out half, docs/selection.md) on the same benchmark and verdict rule as
    ``cgpfl.heur_khat_planted``; ``val`` is reported beside it."""
    return _benchmark_outcome(ctx, "val_loss")


@check("cgpfl.q_to_identity", paper=PAPER, reference="Lemma 2 (ICLR appendix, §A.7, §E.A 6)",
       kind="identity", tolerance=1e-12,
       tolerance_reason="Q^t is exactly I once the clustering is stable; float64 noise only",
       quick={"rounds": 8}, full={"rounds": 30})
def q_to_identity(ctx: Context) -> Outcome:
    """‖Q^t − I‖_F over rounds: Lemma 2 needs it → 0; measured as the mean over the second
    half of the rounds (the first rounds may re-cluster)."""
    q = ex.q_distances(ctx.seed, rounds=ctx.params["rounds"])
    tail = float(np.mean(q[len(q) // 2:]))
    return Outcome(tail, 0.0, tail <= ctx.tolerance,
                   f"‖Q^t − I‖ per round = {[round(v, 3) for v in q]}")


@check("cgpfl.convergence_rate_T", paper=PAPER, reference="Theorem 4.1(a) (§A.7, §E.A 8)",
       kind="rate",
       quick={"seeds": 2, "ts": [16, 32, 64]}, full={"seeds": 5, "ts": [16, 32, 64, 128, 256]})
def convergence_rate_T(ctx: Context) -> Outcome:
    """Fitted exponent of (1/T)Σ_t ‖∇G_K(Ω^t)‖²/K in T (constant steps, K = K₀ = 4) against
    the claimed O(1/√T): an upper bound, so the claim is 'slope ≤ −1/2', tested on the tail
    T ≥ 16 (the first rounds re-cluster: the local slope is −0.15 at T = 4…8 and steepens
    monotonically).  No slack: HOLDS iff the whole bootstrap CI lies at or below −1/2, FAILS
    iff it lies wholly above, INCONCLUSIVE if it straddles."""
    p = ctx.params
    seeds = list(range(ctx.seed, ctx.seed + p["seeds"]))
    y = ex.convergence_in_t(seeds, p["ts"])
    fit = fit_loglog(p["ts"], y, seed=ctx.seed)
    verdict, line = rate_three_way(fit, -0.5, claim="at_most")
    return outcome(verdict, measured=fit.slope, theoretical=-0.5,
                   detail=f"T ∈ {p['ts']}, {p['seeds']} seeds: {line}")


# cgpfl.convergence_speedup_K was removed (issue 13): the O(1/√(KNRT)) exponent belongs to an
# upper bound, not to the error of a run; at the sizes we can afford (T ≤ 20) the
# optimisation term, not the variance term carrying the √K gain, dominates, so neither its
# FAIL nor a HOLD said anything about the theorem.  The bound's value is compared with
# measurement by the bound checks (verification/checks/bounds_cgpfl.py).


@check("cgpfl.personal_gap_lambda", paper=PAPER,
       reference="Theorem 4.1(b): (1/N)Σ‖θ_i − ω_k(i)‖² = O(∇G term) + O(δ_G²/λ² + δ²); §E.A10",
       kind="envelope",
       quick={"lams": [4.0, 8.0, 16.0, 32.0, 64.0, 128.0], "rounds": 10, "clients": 8,
              "seeds": 1},
       full={"lams": [4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0], "rounds": 20, "clients": 20,
             "seeds": 3})
def personal_gap_lambda(ctx: Context) -> Outcome:
    """Mean personalized gap ‖θ̃_i − ω_k(i)‖² after T rounds of CGPFL (K = K₀ = 2) over λ ∈
    [4, 128] (1.5 decades): envelope against the shape λ⁻² (the O(δ_G²/λ²) term; δ² is kept
    negligible by solving the inner problem closely: 20 steps, personal lr 0.5/(λ+1)).
    Factor 2, fixed: the exact gap of a quadratic is ∝ (λ/(λ+c))²/λ², whose prefactor
    varies by < 2 over λ ≥ 4 for curvature c ≤ 1.6; a 1/λ law would spread by 32."""
    lams = ctx.params["lams"]
    gaps = np.zeros(len(lams))
    for s in range(ctx.seed, ctx.seed + ctx.params["seeds"]):
        planted = ex.planted_federation(ctx.params["clients"], 2, seed=s)
        model = build_model("mlr", planted.fed)
        for j, lam in enumerate(lams):
            alg = ex.cgpfl(2, lam=lam, personal_lr=0.5 / (lam + 1.0), inner_steps=20,
                           local_scale=lam)
            _, rec, _ = ex.run_recorded(alg, planted.fed, model, ctx.params["rounds"], s,
                                        keys=("personal_gap_sq",))
            gaps[j] += rec["personal_gap_sq"][-1] / ctx.params["seeds"]
    shape = np.asarray(lams) ** -2.0
    return envelope_outcome(gaps, shape, factor=2.0, grid=lams, name="λ",
                            detail=f"gap vs λ={lams}: {[f'{g:.3g}' for g in gaps]}")
