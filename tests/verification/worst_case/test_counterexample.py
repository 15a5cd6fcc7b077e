"""Worst-case instances extracted from a solved PEP (verification/worst_case/counterexample.py)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PEPit")

from verification.worst_case import counterexample as C  # noqa: E402
from verification.worst_case import problems as P  # noqa: E402


def test_gradient_descent_worst_case_is_a_quadratic_the_engine_reproduces(tmp_path):
    s = P.Setting(method="fedavg", clients=2, rounds=2, local_rounds=2, lr=1.5, mu=0.1)
    solved = P.federated(s, "dist", reduce_dimension=True)
    data = C.extract(solved, s)
    assert data["rank"] == 1 and data["quadratic"]
    # the worst direction has curvature μ (|1 − 1.5·0.1| = 0.85 > |1 − 1.5|)
    assert data["clients"][0]["A"][0][0] == pytest.approx(0.1, rel=1e-3)
    assert C.replay(data, s, "dist") == pytest.approx(0.85 ** 8, rel=1e-3)
    saved = json.loads(C.save(data, tmp_path / "x" / "inst.json").read_text())
    assert saved["rank"] == 1


def test_a_non_quadratic_worst_case_is_saved_but_not_replayed():
    s = P.Setting(clients=2, rounds=2, local_rounds=2, lr=0.3, lam=2.0, mu=0.2)
    data = C.extract(P.federated(s, "gap_avg", reduce_dimension=True), s)
    assert not data["quadratic"] and data["fit_residual"] > C.FIT_TOL
    with pytest.raises(ValueError, match="not a quadratic"):
        C.replay(data, s, "gap_avg")
