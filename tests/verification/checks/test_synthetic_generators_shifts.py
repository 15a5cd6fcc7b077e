"""The permuted-label and feature-shift checks hold at two seeds and FAIL on realistic
mutants of the generators' source."""

from __future__ import annotations

import inspect
import sys
import types

import pytest

from synthetic import feature_shift, permuted_labels
from verification.core.registry import Verdict, load_all, run_check

IDS = ["permuted_labels_moments", "feature_shift_moments"]


def _verdict(name, seed=0):
    return run_check(load_all()[f"synthetic.{name}"], size="quick", seed=seed).verdict


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", IDS)
def test_holds_on_the_real_generators(name, seed):
    assert _verdict(name, seed) is Verdict.HOLDS


def _mutate(monkeypatch, module, attr, old, new):
    """``module.attr`` replaced by its version from ``module``'s source with ``old`` → ``new``."""
    src = inspect.getsource(module)
    assert src.count(old) == 1, old
    mutant = types.ModuleType(module.__name__ + "_mutant")
    monkeypatch.setitem(sys.modules, mutant.__name__, mutant)
    exec(compile(src.replace(old, new), module.__file__, "exec"), mutant.__dict__)
    monkeypatch.setattr(module, attr, getattr(mutant, attr))


@pytest.mark.parametrize("old,new", [
    ("means = sep * rng.normal", "means = np.sqrt(sep) * rng.normal"),  # √ scope
    ("means[z] + sd * rng.normal", "means[z] + 2 * sd * rng.normal"),  # noise ×2
    ("means = sep * rng.normal", "means = rng.normal"),  # dropped factor
    ("n_perm = int(round(frac * n))", "n_perm = int(round(frac * n / 2))"),
])
def test_a_wrong_permuted_label_generator_fails(monkeypatch, old, new):
    _mutate(monkeypatch, permuted_labels, "_draw", old, new)
    assert _verdict("permuted_labels_moments") is Verdict.FAILS


@pytest.mark.parametrize("attr,old,new", [
    ("client_shifts", "rng.uniform(0.0, noise, n)", "rng.uniform(0.0, 2 * noise, n)"),
    ("client_shifts", "rng.uniform(-log_c, log_c, n)", "rng.uniform(-log_c / 2, log_c, n)"),
    ("client_shifts", "log_c = math.log(contrast)", "log_c = math.log10(contrast)"),  # log base
    ("apply_shift", "rng.normal(0.0, shift.noise, out.shape)",
     "rng.normal(0.0, 2 * shift.noise, out.shape)"),
    ("apply_shift", "mean + shift.contrast * (out - mean)",
     "mean + shift.contrast ** 0.5 * (out - mean)"),
])
def test_a_wrong_feature_shift_fails(monkeypatch, attr, old, new):
    _mutate(monkeypatch, feature_shift, attr, old, new)
    assert _verdict("feature_shift_moments") is Verdict.FAILS
