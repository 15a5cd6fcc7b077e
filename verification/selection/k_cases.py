"""Cases and training budgets of the CGPFL K-selection benchmark
(:mod:`verification.selection.k_benchmark`): the planted federations (:class:`SelectionCase`, built by
:mod:`verification.selection.k_data`) of the quick, medium and full grids, and
:class:`BenchConfig` with its ``QUICK`` and ``FULL`` sizes.

CGPFL: Tang, Guo, Guo, IJCAI 2022 (docs/formulas.md §A.5, §A.9).
"""

from __future__ import annotations

from dataclasses import dataclass

from verification.selection.k_data import SelectionCase

__all__ = ["TRAIN_RESTARTS", "BenchConfig", "QUICK", "FULL", "quick_cases", "medium_cases",
           "full_cases"]

TRAIN_RESTARTS = 3  # server k-means restarts inside CGPFL training (budget; the clusters are stable)


@dataclass(frozen=True)
class BenchConfig:
    """Training budget of the benchmark (``rounds`` CGPFL rounds per K, ``seeds`` training
    seeds, K ≤ ``k_cap``, selection on the round-``select_round`` models, k-means
    ``restarts`` of the selectors; the validation selectors hold out 1/``val_folds`` of each
    client's training data, warm up ``val_warmup`` rounds and train ``val_rounds`` rounds per
    K — ``val_rounds = 0`` leaves them out; ``val_variants`` adds the cross-validated
    ``val_cv*`` (4× the validation cost); ``large_test`` samples per client score the
    ``large`` scoring)."""

    rounds: int = 10
    seeds: int = 2
    k_cap: int = 10
    select_round: int = 3
    restarts: int = 30
    val_warmup: int = 3
    val_rounds: int = 7
    val_folds: int = 4
    val_cv: int = 1
    val_variants: bool = False
    large_test: int = 1000


QUICK = BenchConfig(rounds=8, seeds=2, k_cap=6, select_round=3, restarts=10, val_rounds=5,
                    val_variants=True)
FULL = BenchConfig(val_variants=True)


def quick_cases() -> list[SelectionCase]:
    """Four N = 20 cases (one per kind × size law; the hard ones included): < 30 s."""
    return [SelectionCase("label", 20, 4, "equal", "easy"),
            SelectionCase("label", 20, 3, "unequal", "hard"),
            SelectionCase("feature", 20, 2, "equal", "easy"),
            SelectionCase("feature", 20, 4, "unequal", "hard")]


def medium_cases() -> list[SelectionCase]:
    """Eight cases, both kinds, N ∈ {20, 50}, K₀ ∈ {2, 4, 6, 8}, hard and unequal included
    (the ``--full`` size of the verification check ``cgpfl.heur_khat_planted``)."""
    spec = [("label", 20, 4, "equal", "easy"), ("label", 20, 6, "unequal", "hard"),
            ("label", 50, 8, "equal", "hard"), ("label", 50, 2, "unequal", "easy"),
            ("feature", 20, 4, "equal", "easy"), ("feature", 20, 6, "unequal", "hard"),
            ("feature", 50, 8, "equal", "hard"), ("feature", 50, 2, "unequal", "easy")]
    return [SelectionCase(k, n, k0, sz, d, seed=100 * k0 + n) for k, n, k0, sz, d in spec]


def full_cases() -> list[SelectionCase]:
    """60 cases: N = 20 with K₀ ∈ {2, 4, 6, 8}, N = 50 with K₀ ∈ {3, 5, 7}, each × sizes
    (equal, unequal) × difficulty (easy, hard) × kind (label, feature); N = 200 with K₀ ∈
    {2, 8}, hard, K₀ = 2 equal and K₀ = 8 unequal sizes, both kinds."""
    grid = [(20, k0) for k0 in (2, 4, 6, 8)] + [(50, k0) for k0 in (3, 5, 7)]
    cases = [SelectionCase(kind, n, k0, sizes, diff, seed=100 * k0 + n)
             for kind in ("label", "feature") for n, k0 in grid
             for sizes in ("equal", "unequal") for diff in ("easy", "hard")]
    cases += [SelectionCase(kind, 200, k0, sizes, "hard", seed=100 * k0 + 200)
              for kind in ("label", "feature") for k0, sizes in ((2, "equal"), (8, "unequal"))]
    return cases
