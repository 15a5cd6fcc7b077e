"""Metamorphic tests in the style of PEPit's tests/test_uselessly_complexified_examples.py:
the same method written with useless complications has the same worst case.

Each variant is built from the same pieces as :func:`verification.worst_case.problems.
federated` (declared clients, optimum, stochastic clients, the sampling tree) with the method
rewritten — clients duplicated, a zero step inserted, clients permuted, the server average
written redundantly — and compared with ``federated`` itself, with gradient noise and
client sampling on.  A variant that does change the method (a half step instead of a zero
step, one client dropped from the average) moves the worst case: those are the mutations
these tests catch.  Budget: ~15 s on a loaded 2-core CPU.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("PEPit")
pytest.importorskip("cvxpy")

from pfl_theory import oracle_methods as om  # noqa: E402
from verification.worst_case import problems as P  # noqa: E402
from verification.worst_case import stochastic  # noqa: E402
from verification.worst_case.pep import solve  # noqa: E402

#: Clarabel 'optimal' on these FedAvg PEPs (~1e-8); PEPit's own suite allows 1e-3; 1e-6 kept
REL = 1e-6
#: pFedMe PEPs end 'optimal_inaccurate' (~1e-5 between formulations): 3e-4 kept
REL_INACCURATE = 3e-4

NOISY_FEDAVG = P.Setting(method="fedavg", clients=2, rounds=2, local_rounds=2, lr=0.5,
                         mu=0.1, L=1.0, sigma_sq=1.0, noise_sq=0.5)
SAMPLED_FEDAVG = P.Setting(method="fedavg", clients=3, rounds=1, local_rounds=2, lr=0.5,
                           mu=0.1, L=1.0, sigma_sq=1.0, noise_sq=0.5, sampled=2)
NOISY_PFEDME = P.Setting(clients=2, rounds=2, local_rounds=1, lr=0.1, lam=3.0, mu=0.5,
                         L=1.0, sigma_sq=1.0, noise_sq=0.5)


def variant_worst(s: P.Setting, *, clients=lambda cs: cs, round_fn=None) -> float:
    """E‖w^T − w*‖² worst case of ``s`` with the method's client list rewritten by
    ``clients`` and its round by ``round_fn(clients, w)``."""
    import PEPit

    pep = PEPit.PEP()
    fns = P._declare(pep, s)
    w_star, _ = P._optimum(pep, fns, s)
    w0 = pep.set_initial_point()
    pep.set_initial_condition((w0 - w_star) ** 2 <= s.Delta0)
    method = clients(stochastic.method_clients(pep, fns, s))
    one_round = round_fn or (lambda cs, w: P._round(cs, w, s))
    sub = replace(s, clients=len(method), sampled=s.sampled and s.sampled * len(method) // s.clients)
    paths = stochastic.tree(method, w0, sub, one_round, s.rounds)
    pep.set_performance_metric(om.average([(p[-1] - w_star) ** 2 for p in paths]))
    return solve(pep).value


def _fedavg_round(s):
    return lambda cs, w: om.fedavg_round(cs, w, lr=s.lr, local_steps=s.local_rounds)


@pytest.mark.parametrize("s", [NOISY_FEDAVG, replace(NOISY_FEDAVG, noise_sq=None)])
def test_rebuilt_method_equals_federated(s):
    # the harness itself: no rewriting gives federated's value
    assert variant_worst(s) == pytest.approx(P.federated(s, "dist").value, rel=REL)


@pytest.mark.parametrize("s", [NOISY_FEDAVG, SAMPLED_FEDAVG])
def test_clients_permuted(s):
    base = P.federated(s, "dist").value
    assert variant_worst(s, clients=lambda cs: cs[::-1]) == pytest.approx(base, rel=REL)


def test_client_duplicated_without_noise():
    # every client listed twice: the uniform mean over 2N equals the mean over N
    s = replace(NOISY_FEDAVG, noise_sq=None)
    base = P.federated(s, "dist").value
    assert variant_worst(s, clients=lambda cs: cs + cs) == pytest.approx(base, rel=REL)


def test_client_duplicated_with_its_noise_shared():
    # a duplicate that reuses its original's stochastic gradient (one draw per client
    # and call) is the same method; the copies' means are those of the originals
    s = NOISY_FEDAVG
    base = P.federated(s, "dist").value

    def twice(cs, w):
        ends = [om.fedavg_local(c, w, lr=s.lr, local_steps=s.local_rounds) for c in cs]
        return om.average(ends + ends)
    assert variant_worst(s, round_fn=twice) == pytest.approx(base, rel=REL)


def test_zero_step_inserted():
    # a local step with step size 0 evaluates a (noisy) gradient and moves nowhere
    s = NOISY_FEDAVG
    base = P.federated(s, "dist").value

    def with_zero_step(cs, w):
        ends = []
        for c in cs:
            x = w - 0.0 * c.grad(w)
            ends.append(om.fedavg_local(c, x, lr=s.lr, local_steps=s.local_rounds))
        return om.average(ends)
    assert variant_worst(s, round_fn=with_zero_step) == pytest.approx(base, rel=REL)
    # the mutation: a half step is not useless
    def with_half_step(cs, w):
        return om.average([om.fedavg_local(c, w - 0.05 * c.grad(w), lr=s.lr,
                                           local_steps=s.local_rounds) for c in cs])
    assert abs(variant_worst(s, round_fn=with_half_step) - base) > 1e-3 * base


def test_redundant_averaging():
    # the server mean written as the mean of the two half-means, and as w + mean(w_i − w)
    s = replace(NOISY_FEDAVG, clients=4, rounds=1)
    base = P.federated(s, "dist").value
    local = _fedavg_round(s)

    def halves(cs, w):
        return om.average([local(cs[:2], w), local(cs[2:], w)])

    def increments(cs, w):
        ends = [om.fedavg_local(c, w, lr=s.lr, local_steps=s.local_rounds) for c in cs]
        return w + om.average([e - w for e in ends])
    assert variant_worst(s, round_fn=halves) == pytest.approx(base, rel=REL)
    assert variant_worst(s, round_fn=increments) == pytest.approx(base, rel=REL)
    # the mutation: one client dropped from the average moves the worst case
    def dropped(cs, w):
        return local(cs[:3], w)
    assert abs(variant_worst(s, round_fn=dropped) - base) > 1e-3 * base


def test_pfedme_server_mixing_written_as_a_step():
    # (1 − β)w + β·mean w_{i,R} = w − β(w − mean w_{i,R}) (pFedMe Algorithm 1), noise via Lemma 1
    s = replace(NOISY_PFEDME, beta=0.7)
    base = P.federated(s, "dist").value

    def as_step(cs, w):
        ends = [om.pfedme_local(c, w, lam=s.lam, lr=s.lr, local_rounds=s.local_rounds)[1]
                for c in cs]
        return w - s.beta * (w - om.average(ends))
    assert variant_worst(s, round_fn=as_step) == pytest.approx(base, rel=REL_INACCURATE)
    assert variant_worst(s, clients=lambda cs: cs[::-1]) == pytest.approx(base,
                                                                          rel=REL_INACCURATE)
