"""engine.oracles_with_l2 (verification/checks/engine_oracles_l2.py): the oracles agree with
ℓ2 > 0, and an ℓ2 term changed on either side fails the check."""

from __future__ import annotations

import pytest

from verification.core.registry import Verdict, load_all, run_check


def _run():
    return run_check(load_all()["engine.oracles_with_l2"], size="quick", seed=0)


def test_every_covered_oracle_agrees_with_l2():
    res = _run()
    assert res.verdict is Verdict.HOLDS, res.detail
    assert len(res.extra["deviations"]) >= 26 and "pfedme" in res.extra["deviations"]


@pytest.mark.parametrize("side", ["engine", "oracle"])
def test_a_changed_l2_term_fails(monkeypatch, side):
    if side == "engine":   # the engine's ℓ2 gradient doubled (l2·W → 2·l2·W)
        from algorithms.engine import model_base

        original = model_base.Model.per_client_loss

        def doubled(self, params, x, y):
            extra = 0.5 * self.l2 * sum((params[k] ** 2).flatten(1).sum(1) for k in params
                                        if k.endswith("weight"))
            return original(self, params, x, y) + extra
        monkeypatch.setattr(model_base.Model, "per_client_loss", doubled)
    else:                  # the oracle without its ℓ2 term
        from verification.oracles import common

        monkeypatch.setattr(common, "loss", lambda model, params, x, y: __import__(
            "torch").nn.functional.cross_entropy(model.forward(params, x)[0], y[0]))
    assert _run().verdict is Verdict.FAILS


def test_non_default_hyperparameter_values_hold_and_a_differing_one_fails(monkeypatch):
    from verification.checks import engine_oracles_l2 as m

    chk = load_all()["engine.oracles_hyperparameter_values"]
    res = run_check(chk, size="quick", seed=0)
    assert res.verdict is Verdict.HOLDS, res.detail
    assert "scaffold aggregation='weighted'" in res.extra["deviations"]
    assert "ppfe reweighting=False" in res.extra["deviations"]
    # the engine's 'sampled' pFedMe keeps the other clients' rows, Algorithm 1's oracle
    # trains them: once it is no longer set aside, the check sees the difference
    monkeypatch.setattr(m, "NOT_MODELLED", {k: v for k, v in m.NOT_MODELLED.items()
                                            if k[0] != "pfedme"})
    assert run_check(chk, size="quick", seed=0).verdict is Verdict.FAILS
