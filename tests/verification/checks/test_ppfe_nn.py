"""ppfe.stage_accuracy_improves (verification/checks/ppfe_nn.py): only significant
differences decide (issue 41)."""

from __future__ import annotations

from verification.checks.ppfe_nn import stage_verdict
from verification.core.registry import Verdict


def _v(acc, n=400):
    return stage_verdict(acc, float(n), [1, 2, 3], acc)


def test_a_step_inside_its_error_bar_decides_nothing():
    # stage 1 → 2 loses 0.01 (2se ≈ 0.07 at n = 400): not significant; the gain 0.2 is
    out = _v([0.50, 0.71, 0.70])
    assert out.holds and "a step inside its band decides nothing" in out.detail
    # the same steps with an overall gain inside the noise: INCONCLUSIVE, not HOLDS
    assert _v([0.50, 0.53, 0.52]).verdict is Verdict.INCONCLUSIVE
    assert _v([0.50, 0.51, 0.52]).verdict is Verdict.INCONCLUSIVE  # all steps up, gain small


def test_a_significant_loss_fails_and_the_level_is_printed():
    assert not _v([0.50, 0.80, 0.60]).holds  # a stage loses 0.2 ≫ 2se
    assert _v([0.50, 0.80, 0.60]).verdict is None  # FAILS (holds=False, no explicit verdict)
    assert not _v([0.60, 0.50, 0.40]).holds
    assert "one-sided level 97.7%" in _v([0.5, 0.6, 0.7]).detail
