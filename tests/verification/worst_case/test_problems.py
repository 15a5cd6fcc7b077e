"""The PEPs reproduce known tight results and the oracle form's properties (needs [pep]).

Budget: all of this file ≤ ~15 s on a loaded 2-core CPU (sizes kept to a few steps)."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("PEPit")
pytest.importorskip("cvxpy")

from verification.worst_case import problems as P  # noqa: E402

REL = 1e-6   # Clarabel reaches ~1e-8 relative on these small SDPs


@pytest.mark.parametrize("eta", [0.5, 1.5, 1.9])
def test_gradient_descent_textbook_rate(eta):
    # exact worst case of n steps of GD on S(μ, L): max(|1−ημ|, |1−ηL|)^{2n} (Taylor et al. 2017)
    mu, L, n = 0.1, 1.0, 3
    expected = max(abs(1 - eta * mu), abs(1 - eta * L)) ** (2 * n)
    assert P.gradient_descent(mu=mu, L=L, eta=eta, steps=n).value == pytest.approx(expected, rel=REL)


def test_proximal_point_textbook_rate():
    # f(x_n) − f* ≤ ‖x0 − x*‖²/(4γn), attained (Taylor, Hendrickx, Glineur 2017)
    assert P.proximal_point(gamma=2.0, steps=3).value == pytest.approx(1 / 24, rel=REL)


def test_envelope_constants_are_the_conjugate_duality_values():
    lam, mu, L = 15.0, 0.1, 1.0
    assert P.envelope_constant(mu=mu, L=L, lam=lam, which="L") == pytest.approx(
        lam * L / (lam + L), rel=REL)
    assert P.envelope_constant(mu=mu, L=L, lam=lam, which="mu") == pytest.approx(
        lam * mu / (lam + mu), rel=REL)


def test_two_clients_equal_three_in_the_homogeneous_case():
    s = P.Setting(clients=2, rounds=1, local_rounds=2, lr=0.3, lam=2.0, mu=0.2)
    two = P.federated(s, "dist").value
    three = P.federated(replace(s, clients=3), "dist").value
    assert two == pytest.approx(three, rel=1e-5)


def test_heterogeneity_raises_the_worst_case():
    s = P.Setting(clients=2, rounds=1, local_rounds=2, lr=0.3, lam=2.0, mu=0.2)
    values = [P.federated(replace(s, sigma_sq=v), "dist").value for v in (0.0, 1.0, 100.0)]
    # 0.799, 0.805, 1.111 (client drift adds O(η²σ²) per round): increasing beyond solver accuracy
    assert values[0] * (1 + 1e-4) < values[1] < values[2] / 1.2


def test_clarabel_and_scs_agree():
    s = P.Setting(clients=2, rounds=1, local_rounds=2, lr=0.3, lam=2.0, mu=0.2, sigma_sq=1.0)
    a = P.federated(s, "gap_avg", solver="clarabel").value
    b = P.federated(s, "gap_avg", solver="scs").value
    assert abs(a - b) <= 1e-4 * max(1.0, abs(a))


def test_homogeneous_fedavg_is_gradient_descent():
    # the oracle-form FedAvg with identical minimisers is R·T GD steps: textbook rate again
    s = P.Setting(method="fedavg", clients=2, rounds=2, local_rounds=2, lr=1.5, mu=0.1)
    assert P.federated(s, "dist").value == pytest.approx(0.85 ** 8, rel=REL)


def test_unrolled_recursion_upper_bounds_the_exact_multi_round_worst_case():
    s = P.Setting(clients=2, rounds=3, local_rounds=1, lr=0.3, lam=2.0, mu=0.2, sigma_sq=0.5)
    rho0 = P.one_round_rate(s)
    rho = rho0 + (1 - rho0) / 2
    c = P.one_round_offset(s, rho)
    exact = P.federated(s, "dist").value
    valid = P.unrolled_distances(rho, c, s, s.rounds)[-1]
    assert exact <= valid * (1 + REL)


def test_largest_contracting_step_of_gradient_descent_is_two_over_L():
    # FedAvg with one local step on identical clients: GD, contracts iff η < 2/L
    s = P.Setting(method="fedavg", clients=2, rounds=1, local_rounds=1, mu=0.1, L=1.0)
    assert P.largest_contracting_step(s, iters=10) == pytest.approx(2.0, rel=5e-3)
