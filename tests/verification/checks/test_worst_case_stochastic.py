"""The stochastic worst_case checks hold on their parameters, name every term, and FAIL when
the bound is made 10% too small (below the engine's mean: refuted on an instance); a bound
10% below the relaxed worst case is no longer HOLDS (INCONCLUSIVE: the relaxation is an
upper bound, not an instance).  Budget: ~40 s on a loaded 2-core CPU (few seeds)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("PEPit")

from verification.core.registry import Verdict, load_all, run_check  # noqa: E402

CHECKS = {"pfedme.worst_case_thm1_noise_sampling": ("initial", "sampling", "drift",
                                                    "neighbourhood"),
          "pfedme.worst_case_thm2_noise": ("initial", "drift", "neighbourhood"),
          "fedavg.worst_case_local_sgd_noise": ("optimization", "statistical", "drift")}


def _run(check_id, **params):
    chk = load_all()[check_id]
    return run_check(dataclasses.replace(chk, quick={**chk.quick, "seeds": 6, **params}),
                     size="quick", seed=0)


@pytest.mark.parametrize("check_id", sorted(CHECKS))
def test_holds_names_every_term_and_fails_ten_percent_below(check_id):
    res = _run(check_id)
    assert res.verdict is Verdict.HOLDS, res.detail
    ex = res.extra
    assert ex["measured_engine"] <= ex["worst_case"] <= ex["bound"] and not ex["exact"]
    assert ex["measured_se"] > 0 and "mean ± se" in res.detail
    assert all(f"{term} " in res.detail for term in CHECKS[check_id])
    below_engine = 0.9 * (ex["measured_engine"] - 3 * ex["measured_se"]) / ex["bound"]
    bad = _run(check_id, mutate_bound=below_engine)
    assert bad.verdict is Verdict.FAILS and "measured above the bound" in bad.detail
    below_worst = _run(check_id, mutate_bound=0.9 * ex["worst_case"] / ex["bound"])
    assert below_worst.verdict is Verdict.INCONCLUSIVE


def test_the_theorem2_noise_check_uses_the_theorems_own_initial_condition():
    # F(w⁰) − F* ≤ Δ_F caps ‖∇F‖² by smoothness; the relaxed F(w⁰) − E F(w_T) ≤ Δ_F alone
    # lets the worst case reach ≈ Δ_F/(ηT) ≈ the bound's initial term
    res = _run("pfedme.worst_case_thm2_noise")
    assert res.extra["worst_case"] < 0.01 * res.extra["terms"]["initial"]
