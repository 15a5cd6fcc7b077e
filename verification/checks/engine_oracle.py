"""The batched engine runs the methods the theorems (and the worst cases) are about.

Identity checks: the engine's pFedMe (exact prox and K inner steps), FedAvg, Per-FedAvg (FO)
and CGPFL (fixed assignment) on random quadratic clients (full batch by construction,
:mod:`verification.worst_case.quadratic_clients`) against the same method written once over
a first-order oracle (:mod:`pfl_theory.oracle_methods`, numpy float64), after a few rounds.
Any change of a step in either — a constant, a sign, a dropped factor, a wrong operand —
moves the trajectory far above the tolerance.  The worst-case checks rest on this: the
PEPs analyse the oracle form.
"""

from __future__ import annotations

import numpy as np

from algorithms.methods.averaging.fedavg import FedAvg
from algorithms.methods.regularized.perfedavg import PerFedAvg
from algorithms.methods.regularized.pfedme import PFedMe
from pfl_theory import oracle_methods as om
from verification.core.registry import Context, Outcome, check
from verification.worst_case import quadratic_clients as qc

TOL = 1e-12
TOL_REASON = ("float64, a few hundred operations per round over 3 rounds (~1e-14 relative); "
              "the converged inner solve stands in for the exact prox to 1e-17")
SIZES = {"quick": {"clients": 3, "dim": 4, "rounds": 3}, "full": {"clients": 6, "dim": 8,
                                                                  "rounds": 6}}


def _rel(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def _oracle(step, w0, rounds):
    ws = [w0]
    for _ in range(rounds):
        ws.append(step(ws[-1]))
    return np.stack(ws)


def _global(ctx: Context, alg, step) -> Outcome:
    p = ctx.params
    clients = qc.random_quadratics(p["clients"], p["dim"], mu=0.1, L=1.0, seed=ctx.seed)
    fed, model = qc.federation(clients)
    w0 = np.random.default_rng(ctx.seed + 1).normal(size=p["dim"])
    engine = qc.engine_trajectory(alg(len(clients)), fed, model, w0, p["rounds"])
    dev = _rel(_oracle(lambda w: step(clients, w), w0, p["rounds"]), engine)
    return Outcome(measured=dev, theoretical=0.0, holds=dev <= ctx.tolerance,
                   detail=f"max relative difference engine vs oracle form over {p['rounds']} "
                          f"rounds: {dev:.2e}")


PAPERS = {"pfedme": "pFedMe (NeurIPS 2020)", "fedavg": "FedAvg (AISTATS 2017), baseline",
          "perfedavg": "Per-FedAvg (NeurIPS 2020)", "cgpfl": "CGPFL (IJCAI 2022)"}


@check("pfedme.engine_equals_oracle_form", paper=PAPERS["pfedme"],
       reference="Algorithm 1 (K inner steps, local envelope steps, β-mixing)", kind="identity",
       tolerance=TOL, tolerance_reason=TOL_REASON, quick=SIZES["quick"], full=SIZES["full"])
def pfedme_engine(ctx: Context) -> Outcome:
    """pFedMe with K = 3 warm-started inner steps, R = 2, β = 1.5 (extrapolation)."""
    lam, lr, R, beta, eta_p = 15.0, 0.05, 2, 1.5, 1.0 / 16.0
    return _global(ctx, lambda n: PFedMe(lam=lam, lr=lr, personal_lr=eta_p, inner_steps=3,
                                         local_rounds=R, batch_size=2, beta=beta,
                                         clients_per_round=n),
                   lambda cl, w: om.pfedme_round(cl, w, lam=lam, lr=lr, local_rounds=R,
                                                 beta=beta, inner=(3, eta_p)))


@check("fedavg.engine_equals_oracle_form", paper=PAPERS["fedavg"],
       reference="R local gradient steps, uniform mean (equal client sizes)", kind="identity",
       tolerance=TOL, tolerance_reason=TOL_REASON, quick=SIZES["quick"], full=SIZES["full"])
def fedavg_engine(ctx: Context) -> Outcome:
    """FedAvg with R = 4 local steps, η = 0.3."""
    return _global(ctx, lambda n: FedAvg(lr=0.3, local_rounds=4, batch_size=2,
                                         clients_per_round=n),
                   lambda cl, w: om.fedavg_round(cl, w, lr=0.3, local_steps=4))


@check("perfedavg.engine_equals_oracle_form", paper=PAPERS["perfedavg"],
       reference="Algorithm 1, first-order variant: w̃ = w − α∇f(w), w ← w − β∇f(w̃)",
       kind="identity", tolerance=TOL, tolerance_reason=TOL_REASON, quick=SIZES["quick"],
       full=SIZES["full"])
def perfedavg_engine(ctx: Context) -> Outcome:
    """Per-FedAvg (FO) with α = 0.2, β = 0.3, R = 3."""
    return _global(ctx, lambda n: PerFedAvg(lr=0.3, inner_lr=0.2, variant="fo", local_rounds=3,
                                            batch_size=2, clients_per_round=n),
                   lambda cl, w: om.perfedavg_fo_round(cl, w, alpha=0.2, beta=0.3,
                                                       local_steps=3))


@check("cgpfl.engine_equals_oracle_form", paper=PAPERS["cgpfl"],
       reference="Algorithm 1 steps 2 and 4 with a fixed assignment (Q^t = I), exact prox",
       kind="identity", tolerance=TOL, tolerance_reason=TOL_REASON, quick=SIZES["quick"],
       full=SIZES["full"])
def cgpfl_engine(ctx: Context) -> Outcome:
    """CGPFL with K = 2 contexts of 3 clients, R = 2, α = 0.7, β = 1, c = 2/N; the engine's
    k-means keeps the assignment (contexts 50 apart; it raises otherwise)."""
    from verification.worst_case import cgpfl as W

    s = W.CGPFLSetting(contexts=2, per_context=3, rounds=ctx.params["rounds"], local_rounds=2,
                       lam=3.0, mu=0.1, alpha=0.7, beta=1.0)
    clients, omega0 = W.instance(s, dim=ctx.params["dim"], seed=ctx.seed)
    dev = _rel(np.array(W.trajectory(clients, omega0, s)),
               np.array(W.engine_trajectory(s, clients, omega0, seed=ctx.seed)))
    return Outcome(measured=dev, theoretical=0.0, holds=dev <= ctx.tolerance,
                   detail=f"max relative difference of Ω^t engine vs oracle form over "
                          f"{s.rounds} rounds: {dev:.2e}")
