"""verification.selection.k_cases: the case grids and the benchmark budgets."""

from verification.selection.k_cases import (FULL, QUICK, BenchConfig, full_cases, medium_cases,
                                            quick_cases)


def test_grids():
    full = full_cases()
    assert len(full) == 60 and len(set(c.name for c in full)) == 60
    assert {c.k0 for c in full} == {2, 3, 4, 5, 6, 7, 8} and {c.n for c in full} == {20, 50, 200}
    assert {(c.kind, c.sizes, c.difficulty) for c in quick_cases()} >= {("label", "unequal", "hard")}


def test_medium_grid_and_budgets():
    medium = medium_cases()
    assert len(medium) == 8 and len(set(c.name for c in medium)) == 8
    assert {c.kind for c in medium} == {"label", "feature"} and {c.n for c in medium} == {20, 50}
    assert {c.k0 for c in medium} == {2, 4, 6, 8}
    assert {(c.sizes, c.difficulty) for c in medium} >= {("unequal", "hard")}
    # the cross-validated variants only in the named sizes; QUICK is the smaller budget
    assert QUICK.val_variants and FULL.val_variants and not BenchConfig().val_variants
    assert QUICK.rounds < FULL.rounds and QUICK.k_cap < FULL.k_cap and QUICK.val_rounds < FULL.val_rounds
