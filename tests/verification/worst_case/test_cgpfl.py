"""verification/worst_case/cgpfl.py: the CGPFL fixed-assignment PEP, its engine instance,
and the reductions a worst case over the class must satisfy."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from verification.worst_case import cgpfl as W

pytest.importorskip("PEPit")

from verification.worst_case import counterexample  # noqa: E402

#: 'optimal_inaccurate' non-convex solves: Clarabel and SCS agree to ~0.1% (tested below)
PEP_TOL = 2e-2


def test_the_engine_instance_is_below_the_worst_case_and_close_to_it():
    s = W.CGPFLSetting()
    worst, meas = W.worst_case(s).value, W.measured(s)
    assert meas <= worst * (1 + PEP_TOL)
    assert meas > 0.5 * worst      # a quadratic instance nearly attains it (1.02 measured)


def test_two_independent_contexts_have_the_worst_case_of_one():
    one = W.worst_case(W.CGPFLSetting(contexts=1, per_context=2, n_total=4, rounds=2))
    two = W.worst_case(W.CGPFLSetting(contexts=2, per_context=2, rounds=2))
    assert two.value == pytest.approx(one.value, rel=PEP_TOL)


def test_the_worst_case_is_linear_in_the_budget():
    s = W.CGPFLSetting(rounds=2)
    assert W.worst_case(replace(s, Delta=3.0)).value == pytest.approx(
        3.0 * W.worst_case(s).value, rel=PEP_TOL)


def test_a_smaller_step_gives_a_larger_normalised_worst_case():
    # (1/T)Σ‖∇G‖² ≈ Δ_G/(α̂T) for small steps: halving β about doubles it
    s = W.CGPFLSetting(rounds=2)
    small = W.worst_case(replace(s, beta=s.beta_max / 2)).value
    assert small == pytest.approx(2 * W.worst_case(s).value, rel=0.05)


def test_clarabel_and_scs_agree():
    s = W.CGPFLSetting(rounds=2)
    assert W.worst_case(s, solver="scs").value == pytest.approx(W.worst_case(s).value,
                                                                 rel=PEP_TOL)


def test_extracted_instance_names_the_context_models():
    s = W.CGPFLSetting(rounds=2, local_rounds=1)
    data = counterexample.extract(W.worst_case(s, reduce_dimension=True), s)
    assert len(data["omega0"]) == 1 and len(data["omega0"][0]) == data["rank"]
    assert len(data["clients"]) == 2 and data["worst_case"] > 0


@pytest.mark.parametrize("kw,match", [({"contexts": 0}, "contexts"),
                                      ({"lam": 1.5}, "lam >= 2L"),
                                      ({"alpha": 1.5}, "alpha"),
                                      ({"n_total": 1}, "n_total"),
                                      ({"beta": -1.0}, "beta"),
                                      ({"mu": 2.0}, "mu")])
def test_invalid_settings_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        W.CGPFLSetting(**kw)


def test_beta_max_is_the_smaller_of_the_stated_and_the_proofs_condition():
    s = W.CGPFLSetting(local_rounds=3, per_context=4)         # N = 4, L_G = 2/N = 0.5
    assert s.L_G == 0.5
    assert s.beta_max == pytest.approx(min(1 / (2 * np.sqrt(12) * 0.5), 1 / (np.sqrt(416) * 3 * 0.5)))
    assert s.alpha_hat == pytest.approx(3 * 1.0 * s.beta_max)


def test_a_clustering_that_leaves_the_assignment_is_refused():
    s = W.CGPFLSetting(contexts=2, per_context=2, rounds=1)
    clients, _ = W.instance(s)
    together = [np.zeros(4), np.zeros(4) + 1e-3]    # two contexts at one place: k-means regroups
    with pytest.raises(RuntimeError, match="assignment"):
        W.engine_trajectory(s, clients, together)


def test_the_engine_records_the_printed_gradient_k_times_cluster_size_the_proofs():
    # grad_G_sq_over_K after round 0 is (1/K)Σ_k‖(2K/N)Σ_{C_k}(ω_k − θ̂_j)‖² = m²·(proof's),
    # m = K|C_k| — the scaling the printed-normalisation check relies on
    import torch

    from algorithms.engine.base import State
    from verification.worst_case import quadratic_clients as qc

    s = W.CGPFLSetting(contexts=2, per_context=2, rounds=1, lam=3.0, mu=0.1, beta=0.5)
    clients, omega0 = W.instance(s, seed=4)
    fed, model = qc.federation(clients)
    alg = W.engine_algorithm(s)
    state = alg.init(fed, model, 0)
    state = State(0, 0, {**state.models, "context": {"theta": torch.tensor(np.stack(omega0))}},
                  {**state.tensors, "assignment": torch.tensor(s.assignment)})
    recorded = float(alg.round(state, fed, model).tensors["grad_G_sq_over_K"])
    proof = W.grad_sq(clients, omega0, s, lambda v: float(v @ v))
    assert recorded == pytest.approx(16 * proof, rel=1e-12)
