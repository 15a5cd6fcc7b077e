"""verification.selection.k_scores: the noise-aware set of best K, the records and the summary."""

import numpy as np
import pytest

from verification.selection.k_data import SelectionCase
from verification.selection.k_scores import argmax_first, best_set, records, summarise


def test_best_set_uses_the_seed_to_seed_standard_error():
    acc = np.array([[0.50, 0.80, 0.82, 0.79],
                    [0.52, 0.78, 0.80, 0.83]])
    good, se = best_set(acc)
    # s²_K with ddof 1 over 2 seeds = (a − b)²/2; pooled over K, divided by S = 2
    expected = np.sqrt(np.mean([(a - b) ** 2 / 2 for a, b in acc.T]) / 2)
    assert se == pytest.approx(expected, rel=1e-12)
    mean = acc.mean(0)                    # [0.51, 0.79, 0.81, 0.81]
    assert good.tolist() == [k + 1 for k in range(4) if mean[k] >= mean.max() - se - 1e-12]
    assert 3 in good and 1 not in good
    one, nan = best_set(acc[:1])          # one seed: no variance, the strict best only
    assert one.tolist() == [argmax_first(acc[0])] and np.isnan(nan)


def test_records_score_strict_and_noise_aware():
    acc = np.array([[0.5, 0.8, 0.81, 0.7, 0.7], [0.5, 0.8, 0.81, 0.7, 0.7]])
    acc[1, 4] += 0.1                       # seed noise at K = 5: se = 0.022, K = 2, 3 in the set
    case = SelectionCase("label", 10, 3, "equal", "easy")
    best, good, se, recs = records(case, acc, [{"a": 2, "b": 5}, {"a": 1, "b": 3}])
    assert best == 3 and set(good.tolist()) == {2, 3}
    by = {(r["seed"], r["selector"]): r for r in recs}
    assert by[0, "a"]["set_exact"] and not by[0, "a"]["exact"] and by[0, "a"]["within1"]
    assert not by[0, "b"]["set_within1"] and not by[0, "b"]["within1"]
    assert by[1, "a"]["set_within1"] and not by[1, "a"]["set_exact"]
    s = summarise([{"records": recs, "seconds": {"a": 2.0}}], order=("b", "a"))
    assert list(s) == ["b", "a"] and s["a"]["seconds"] == 2.0 and "seconds" not in s["b"]
    assert s["a"]["set_exact"] == 0.5 and s["a"]["set_within1"] == 1.0
    assert s["b"]["set_within1"] == 0.5 and s["b"]["max_lost"] == pytest.approx(0.06)


def test_halves_are_the_balanced_mod4_split_of_the_grid():
    from verification.selection.k_cases import full_cases
    from verification.selection.k_scores import HALVES, half, split_halves

    assert [half(i) for i in range(8)] == ["dev", "held_out", "held_out", "dev"] * 2
    cases = full_cases()
    parts = split_halves(cases)
    assert set(parts) == set(HALVES) and len(parts["dev"]) == len(parts["held_out"]) == 30
    assert parts["dev"][:2] == [cases[0], cases[3]] and parts["held_out"][:2] == cases[1:3]
    # each (kind, N, K0) block of 4 gives dev its equal/easy and unequal/hard cases
    assert {(c.sizes, c.difficulty) for c in parts["dev"][:56 // 2]} == {("equal", "easy"),
                                                                         ("unequal", "hard")}
