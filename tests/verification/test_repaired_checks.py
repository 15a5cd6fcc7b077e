"""Every check repaired for issue 13 can fail: each test inflates the measurement, shrinks
the bound or changes the claim (monkeypatching what the check reads) and sees the verdict
move to FAILS / INCONCLUSIVE — and the unmutated check gives its reported verdict."""

import numpy as np
import pytest

from verification.experiments import cgpfl as experiments_cgpfl
from verification.experiments import pfedme_quadratic as experiments_pfedme_quadratic
from verification.experiments import pfedme_table1 as experiments_pfedme_table1
from verification.checks import (cgpfl_algorithm, pfedme_theory, plgu, plgu_algorithms, ppfe,
                                 ppfe_nn)
from verification.core.registry import Verdict, load_all, run_check


def verdict(cid):
    ppfe._fig3.cache_clear()
    return run_check(load_all()[cid], size="quick", seed=0).verdict


def test_convergence_rate_t_fails_when_the_decay_is_slower(monkeypatch):
    assert verdict("cgpfl.convergence_rate_T") is Verdict.HOLDS
    orig = experiments_cgpfl.convergence_in_t
    # inflate the measurement by T^0.4: the fitted slope −0.69 becomes −0.29 > −1/2
    monkeypatch.setattr(cgpfl_algorithm.ex, "convergence_in_t",
                        lambda seeds, ts, **k: orig(seeds, ts, **k) * np.asarray(ts) ** 0.4)
    assert verdict("cgpfl.convergence_rate_T") is Verdict.FAILS


def test_personal_gap_envelope_fails_for_a_1_over_lambda_law(monkeypatch):
    assert verdict("cgpfl.personal_gap_lambda") is Verdict.HOLDS
    orig = experiments_cgpfl.run_recorded

    def slower(alg, fed, model, rounds, seed, **k):  # gap · λ: a 1/λ law instead of 1/λ²
        state, rec, accs = orig(alg, fed, model, rounds, seed, **k)
        return state, {key: [v * alg.lam for v in vals] for key, vals in rec.items()}, accs

    monkeypatch.setattr(cgpfl_algorithm.ex, "run_recorded", slower)
    assert verdict("cgpfl.personal_gap_lambda") is Verdict.FAILS


def test_nonconvex_rate_fails_for_a_t_to_the_minus_third_decay(monkeypatch):
    assert verdict("pfedme.nonconvex_rate_T") is Verdict.HOLDS
    orig = experiments_pfedme_quadratic.nonconvex_run

    def inflated(*, rounds, **k):
        r = orig(rounds=rounds, **k)
        return {**r, "grad_sq": r["grad_sq"] * rounds ** 0.45}

    monkeypatch.setattr(experiments_pfedme_quadratic, "nonconvex_run", inflated)
    assert verdict("pfedme.nonconvex_rate_T") is Verdict.FAILS


@pytest.mark.parametrize("gap, want", [(0.10, Verdict.FAILS), (0.001, Verdict.INCONCLUSIVE)])
def test_table1_ordering_fails_or_cannot_decide(monkeypatch, gap, want):
    def fake(*, seeds, **k):  # Per-FedAvg below FedAvg by `gap`
        acc = {"FedAvg": 0.80, "Per-FedAvg": 0.80 - gap, "pFedMe-GM": 0.70, "pFedMe-PM": 0.90}
        return {"rows": {lab: {"weighted_best": [a] * len(seeds)} for lab, a in acc.items()}}

    monkeypatch.setattr(experiments_pfedme_table1, "table1", fake)
    assert verdict("pfedme.table1_ordering") is want


def test_stage_accuracy_fails_on_a_clear_drop(monkeypatch):
    # 0.174 → 0.533 → 0.528 → 0.518: the gain over stage 0 (+0.34 ± 0.09) is significant, the
    # later steps (−0.005 ± 0.10, −0.010 ± 0.10) are inside their bands and decide nothing
    assert verdict("ppfe.stage_accuracy_improves") is Verdict.HOLDS
    orig = ppfe_nn.trajectory

    def dropping(*a, **k):
        out = orig(*a, **k)
        return [{**e, "ensemble_accuracy": e["ensemble_accuracy"] - 0.2 * i}
                for i, e in enumerate(out)]

    monkeypatch.setattr(ppfe_nn, "trajectory", dropping)
    assert verdict("ppfe.stage_accuracy_improves") is Verdict.FAILS


def test_lowest5_lift_fails_when_plgu_is_worse(monkeypatch):
    calls = []
    orig = plgu_algorithms.summarize

    def worse_first(acc, weights):  # pairs call (PLGU variant, base): lower the variant's
        out = dict(orig(acc, weights))
        calls.append(1)
        if len(calls) % 2 == 1:
            out["low5"] -= 0.5
        return out

    monkeypatch.setattr(plgu_algorithms, "summarize", worse_first)
    assert verdict("plgu.lowest5_lift") is Verdict.FAILS


def test_local_flat_fails_under_the_convex_reading(monkeypatch):
    assert verdict("ppfe.fig3_local_flat_in_alpha") is Verdict.HOLDS
    orig = ppfe.make_linear_federation
    monkeypatch.setattr(ppfe, "make_linear_federation",
                        lambda **k: orig(**{**k, "mixing": "convex"}))
    assert verdict("ppfe.fig3_local_flat_in_alpha") is Verdict.FAILS


def test_printed_exponent_verdicts(monkeypatch):
    assert verdict("plgu.perturbation_norm_printed_exponent") is Verdict.ERRATUM
    orig = plgu._norm_deviation
    monkeypatch.setattr(plgu, "_norm_deviation",  # both readings miss ρ
                        lambda ctx, exponent, ps: {k: v + 1.0 for k, v in orig(ctx, exponent, ps).items()})
    assert verdict("plgu.perturbation_norm_printed_exponent") is Verdict.FAILS
    monkeypatch.setattr(plgu, "_norm_deviation",  # the printed one would be right
                        lambda ctx, exponent, ps: {f"p={p:g}": 0.0 for p in ps})
    assert verdict("plgu.perturbation_norm_printed_exponent") is Verdict.HOLDS


def test_corollary_readings_fail_when_no_reading_follows(monkeypatch):
    assert verdict("pfedme.corollary1_rate_reading") is Verdict.ERRATUM
    assert verdict("pfedme.corollary2_rate_reading") is Verdict.ERRATUM
    import dataclasses

    for name in ("corollary1_derivation", "corollary2_derivation"):
        orig = getattr(pfedme_theory.rates, name)
        monkeypatch.setattr(pfedme_theory.rates, name,
                            lambda *a, _o=orig, **k: dataclasses.replace(_o(*a, **k), follows=False))
    assert verdict("pfedme.corollary1_rate_reading") is Verdict.FAILS
    assert verdict("pfedme.corollary2_rate_reading") is Verdict.FAILS
