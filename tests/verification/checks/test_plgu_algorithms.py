"""plgu.lowest5_lift (verification/checks/plgu_algorithms.py): the lowest-5% is computed
twice, and a tail of ⌊0.05N⌋ clients in the engine's summary fails the check (issue 41)."""

from __future__ import annotations

import math

import algorithms.engine.evaluation as ev
from verification.core.registry import Verdict, load_all, run_check


def test_a_floor_tail_in_the_engines_summary_fails(monkeypatch):
    monkeypatch.setattr(ev, "tail_size", lambda n, fraction=0.05: max(1, math.floor(fraction * n)))
    res = run_check(load_all()["plgu.lowest5_lift"], size="quick", seed=0)
    assert res.verdict is Verdict.FAILS and "the tail size or its mean is wrong" in res.detail
