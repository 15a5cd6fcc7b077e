"""The synthetic-generator checks: they hold at two seeds on the real generators, and a
realistic mutant of a generator's source (a constant ×2, an exponent off by ½, α and β
swapped, a dropped square root, a concentration ×2) makes them FAIL."""

from __future__ import annotations

import inspect
import sys
import types

import pytest

from synthetic import fedprox, linear, partition
from verification.core.registry import Verdict, load_all, run_check

IDS = ["fedprox_reference_replay", "fedprox_feature_moments", "dirichlet_share_variance",
       "ppfe_linear_moments", "label_skew_counts"]


def _verdict(name, seed=0):
    return run_check(load_all()[f"synthetic.{name}"], size="quick", seed=seed).verdict


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", IDS)
def test_holds_on_the_real_generators(name, seed):
    assert _verdict(name, seed) is Verdict.HOLDS


def _mutate(monkeypatch, module, attr, old, new):
    """Replace ``old`` by ``new`` (once, must be present) in ``module``'s source, run the
    result in a fresh namespace and patch ``module.attr`` with the mutant's ``attr``."""
    src = inspect.getsource(module)
    assert src.count(old) == 1, old
    mutant = types.ModuleType(module.__name__ + "_mutant")
    monkeypatch.setitem(sys.modules, mutant.__name__, mutant)  # dataclasses look it up
    exec(compile(src.replace(old, new), module.__file__, "exec"), mutant.__dict__)
    monkeypatch.setattr(module, attr, getattr(mutant, attr))


FEDPROX_MUTANTS = {
    "exponent -1.2 -> -0.6": ("np.power(np.arange(1, dim + 1), -1.2)",
                              "np.power(np.arange(1, dim + 1), -0.6)"),
    "client-mean noise x2": ("rng.normal(b_feat[i], 1, dim)", "rng.normal(b_feat[i], 2, dim)"),
    "alpha and beta swapped": ("mean_w = rng.normal(0, alpha, n_clients)\n"
                               "    mean_b = mean_w\n    b_feat = rng.normal(0, beta, n_clients)",
                               "mean_w = rng.normal(0, beta, n_clients)\n"
                               "    mean_b = mean_w\n    b_feat = rng.normal(0, alpha, n_clients)"),
    "sqrt dropped": ("root = np.sqrt(s)[:, None] * v", "root = s[:, None] * v"),
    "beta x2": ("b_feat = rng.normal(0, beta, n_clients)",
                "b_feat = rng.normal(0, 2 * beta, n_clients)"),
}


@pytest.mark.parametrize("name", ["fedprox_reference_replay", "fedprox_feature_moments"])
@pytest.mark.parametrize("mutant", sorted(FEDPROX_MUTANTS))
def test_a_wrong_synthetic_generator_fails(monkeypatch, name, mutant):
    _mutate(monkeypatch, fedprox, "generate", *FEDPROX_MUTANTS[mutant])
    assert _verdict(name) is Verdict.FAILS


def test_a_wrong_model_mean_fails_the_replay(monkeypatch):
    # only the labels see the model; its noise ×2 changes the argmax (shifting mean_w or
    # mean_b would not: a per-client constant adds the same to every class's score)
    _mutate(monkeypatch, fedprox, "generate", "rng.normal(mean_w[i], 1, (dim, n_classes))",
            "rng.normal(mean_w[i], 2, (dim, n_classes))")
    assert _verdict("fedprox_reference_replay") is Verdict.FAILS


@pytest.mark.parametrize("old,new", [
    ("np.full(n_clients, alpha)", "np.full(n_clients, 2 * alpha)"),
    ("np.full(n_clients, alpha)", "np.full(n_clients, alpha / 2)"),
])
def test_a_wrong_dirichlet_concentration_fails(monkeypatch, old, new):
    _mutate(monkeypatch, partition, "dirichlet_partition", old, new)
    assert _verdict("dirichlet_share_variance") is Verdict.FAILS


@pytest.mark.parametrize("old,new", [
    ("eps = np.sqrt(sigma2) * rng", "eps = sigma2 * rng"),  # √ scope: noise sd 0.25, not 0.5
    ("w_local = scale[:, None] * rng", "w_local = rng"),  # dropped factor s_i
    ("w_global = rng.standard_normal(d)", "w_global = 2 * rng.standard_normal(d)"),
    ("(1.0 - alphas, alphas) if", "(alphas, 1.0 - alphas) if"),  # α and 1-α swapped
    ("* np.sqrt(cov_diag)[:, None, :]", "* cov_diag[:, None, :]"),  # Σ read as its root
    ("rng.uniform(lo, hi, size=(n_clients, d))", "rng.uniform(lo, 2 * hi, size=(n_clients, d))"),
])
def test_a_wrong_linear_generator_fails(monkeypatch, old, new):
    _mutate(monkeypatch, linear, "make_linear_federation", old, new)
    assert _verdict("ppfe_linear_moments") is Verdict.FAILS


@pytest.mark.parametrize("old,new", [
    ("rng.integers(lo, hi + 1, size=n_clients)", "rng.integers(lo, 2 * hi, size=n_clients)"),
    # the remainder n_i mod c dropped
    ("counts = sizes[:, None] // c + extra", "counts = sizes[:, None] // c + 0 * extra"),
    ("np.argsort(rng.random((n_clients, len(labels))), axis=1)[:, :c]",  # non-uniform labels
     "np.argsort(rng.random((n_clients, len(labels))) * np.arange(1, len(labels) + 1), "
     "axis=1)[:, :c]"),
])
def test_a_wrong_label_skew_partition_fails(monkeypatch, old, new):
    _mutate(monkeypatch, partition, "label_skew_partition", old, new)
    assert _verdict("label_skew_counts") is Verdict.FAILS
