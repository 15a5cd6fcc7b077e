"""verification.selection.stages_nn_cv: cross-validated stage count for neural PPFE."""

import numpy as np
import pytest
import torch

from synthetic.permuted_labels import permuted_label_federation
from verification.selection import stages_nn as nn
from verification.selection import stages_nn_cv as cv

TINY = dict(rounds_per_stage=2, num_clients=6)
CFG = dict(permuted=0.5, size_range=(10, 20))


def _fed(seed=1, size_range=(7, 16)):
    return permuted_label_federation(num_clients=5, num_clusters=4, classes_per_client=2, dim=3,
                                     size_range=size_range, seed=seed, device="cpu")


def _rows(split, i):
    o, c = int(split.offsets[i]), int(split.counts[i])
    return split.x[o:o + c]


def _covers_once(fed, parts) -> bool:
    """Every client's held-out folds together are its training rows, each exactly once, and
    each fold's training part is the rest of the client's rows."""
    for i in range(fed.num_clients):
        mine = _rows(fed.train, i).sort(0).values
        held = torch.cat([_rows(h, i) for _, h in parts])
        if held.shape != mine.shape or not torch.equal(held.sort(0).values, mine):
            return False
        for rest, h in parts:
            both = torch.cat([_rows(rest.train, i), _rows(h, i)])
            if both.shape != mine.shape or not torch.equal(both.sort(0).values, mine):
                return False
    return True


@pytest.mark.parametrize("folds", [2, 3, 5])
def test_kfold_holds_out_each_training_sample_exactly_once(folds):
    fed = _fed()
    parts = cv.kfold(fed, folds, seed=3)
    assert len(parts) == folds and _covers_once(fed, parts)
    sizes = torch.stack([h.counts for _, h in parts])          # balanced: sizes differ by <= 1
    assert torch.all(sizes.max(0).values - sizes.min(0).values <= 1)
    assert all(rest.test is fed.test for rest, _ in parts)
    again, other = cv.kfold(fed, folds, seed=3), cv.kfold(fed, folds, seed=4)   # seeded
    assert all(torch.equal(a.x, b.x) for (_, a), (_, b) in zip(parts, again))
    assert not all(torch.equal(a.x, b.x) for (_, a), (_, b) in zip(parts, other))


def test_overlapping_folds_are_caught(monkeypatch):
    # mutant: fold 0 also takes fold 1's first sample (overlap, and one sample trained on twice)
    split = np.array_split

    def overlapping(a, k):
        p = split(a, k)
        return [np.concatenate([p[0], p[1][:1]])] + p[1:]
    fed = _fed()
    monkeypatch.setattr(cv.np, "array_split", overlapping)
    assert not _covers_once(fed, cv.kfold(fed, 3, seed=3))


def test_fold0_is_the_benchmarks_validation_split():
    # the benchmark's own run is fold 0's run: same held-out samples, same training federation
    for seed, sizes in ((0, (7, 16)), (1, (10, 40)), (2, (30, 90))):
        fed = _fed(seed, sizes)
        rest, held = cv.kfold(fed, 5, seed)[0]
        rest_h, val = nn.holdout(fed, nn.VAL_FRACTION, seed)
        for a, b in ((held, val), (rest.train, rest_h.train)):
            assert all(torch.equal(getattr(a, k), getattr(b, k)) for k in ("x", "y", "offsets", "counts"))
    c = nn.stage_curves(CFG, 0, t_max=2, large_test=0, **TINY)
    correct, nll = cv.fold_curves(CFG, 0, 0, t_max=2, **TINY)
    assert np.array_equal(correct, c["val"]) and np.array_equal(nll, c["val_nll"])


def test_cv_curve_is_the_sum_over_folds_of_a_direct_computation(monkeypatch):
    got5 = cv.cv_curves(CFG, 1, folds=5, t_max=2, **TINY)
    base = nn.stage_curves(CFG, 1, t_max=2, large_test=0, **TINY)
    reused = cv.cv_curves(CFG, 1, folds=5, first=(base["val"], base["val_nll"]), t_max=2, **TINY)
    assert np.array_equal(reused["nll"], got5["nll"]) and np.array_equal(reused["correct"], got5["correct"])
    got = cv.cv_curves(CFG, 1, folds=3, t_max=2, **TINY)
    # direct: the benchmark's own loop (stage_curves) with its validation split replaced by fold j
    total_nll, total_correct, m = np.zeros(2), np.zeros(2), 0
    for j in range(3):
        monkeypatch.setattr(nn, "holdout", lambda fed, frac, seed, j=j: cv.kfold(fed, 3, seed)[j])
        d = nn.stage_curves(CFG, 1, t_max=2, large_test=0, **TINY)
        total_nll += d["val_nll"].sum(1)
        total_correct += d["val"].sum(1)
        m += d["val"].shape[1]
    fed = permuted_label_federation(num_clients=6, seed=1, **nn.GENERATOR, **CFG, device="cpu")
    assert got["nll"].shape == (2, m) and m == int(fed.train.counts.sum())
    # summation order differs (per fold, then folds): float64 sums of ~100 terms agree to 1e-12
    np.testing.assert_allclose(got["nll"].sum(1), total_nll, rtol=1e-12)
    assert np.array_equal(got["correct"].sum(1), total_correct)   # integer counts
    with pytest.raises(ValueError, match="fold 0 only with 5 folds"):
        cv.cv_curves(CFG, 1, folds=3, first=(base["val"], base["val_nll"]), t_max=2, **TINY)


def test_cv_picks_are_the_argmin_of_the_summed_loss():
    nll = np.array([[2.0, 2.0, 2.0], [1.0, 1.5, 0.5], [1.2, 0.1, 1.4], [3.0, 3.0, 3.0]])  # sums 6, 3, 2.7, 9
    correct = np.array([[0, 0, 1], [1, 1, 1], [1, 1, 1], [0, 1, 1]], dtype=float)      # 1, 3, 3, 2
    p = cv.cv_picks({"nll": nll, "correct": correct})
    assert p == {"val_cv_loss": 3, "val_cv": 2}              # most correct: ties -> smallest T
    assert p["val_cv_loss"] != 1 + int(np.argmax(nll.sum(1)))   # an argmax mutant is caught
    assert p["val_cv"] != 1 + int(np.argmin(correct.sum(1)))


def test_config_halves_balanced():
    dev, held = cv.config_halves()
    assert len(dev) == 5 and len(held) == 4
    for half in (dev, held):
        assert {c["permuted"] for c in half} == set(cv.PERMUTED)
        assert {tuple(c["size_range"]) for c in half} == set(cv.SIZES)
    assert dict(permuted=0.0, size_range=(10, 30)) in dev      # the two best-T = 2 configurations
    assert dict(permuted=0.0, size_range=(20, 60)) in held     # (earlier run): one in each half


def test_protocol_pick_order():
    s = {"val_cv_loss": dict(lost_le_1pt=0.9, mean_lost=0.004, within1=0.7),
         "val_loss": dict(lost_le_1pt=0.9, mean_lost=0.003, within1=0.6),
         "paper_T4": dict(lost_le_1pt=0.8, mean_lost=0.001, within1=0.9),
         "oracle_seed": dict(lost_le_1pt=1.0, mean_lost=0.0, within1=1.0)}   # not a candidate
    assert cv.protocol_pick(s) == "val_loss"                  # <= 1 point, then the mean loss
    s["val_loss"]["mean_lost"] = 0.004
    assert cv.protocol_pick(s) == "val_cv_loss"               # then ±1
    s["bound"] = dict(lost_le_1pt=0.95, mean_lost=0.01, within1=0.1)
    assert cv.protocol_pick(s) == "bound"
    with pytest.raises(ValueError, match="candidate"):
        cv.protocol_pick({"oracle_seed": s["oracle_seed"]})


def test_run_cv_benchmark_records_and_seed_offset():
    kw = dict(t_max=2, large_test=20, **TINY)
    res = cv.run_cv_benchmark([CFG], seeds=3, cv_seeds=2, **kw)
    recs = res[0]["large"]["records"]
    cv_recs = [r for r in recs if r["selector"] in cv.CV_SELECTORS]
    assert sorted({r["seed"] for r in cv_recs}) == [0, 1] and len(cv_recs) == 4
    assert {r["selector"] for r in recs} >= set(nn.NN_SELECTORS + cv.CV_SELECTORS)
    full, first2 = cv.summarise_cv(res), cv.summarise_cv(res, cv_seeds=2)
    assert full["val_loss"]["records"] == 3 and full["val_cv_loss"]["records"] == 2
    assert first2["val_loss"]["records"] == 2
    # the CV pick of a record is the argmin of its own CV curve
    c = cv.cv_curves(CFG, 1, t_max=2, **TINY)
    rec = next(r for r in cv_recs if r["seed"] == 1 and r["selector"] == "val_cv_loss")
    assert rec["t_hat"] == cv.cv_picks(c)["val_cv_loss"]
    shifted = cv.run_cv_benchmark([CFG], seeds=2, seed_offset=1, **kw)   # seeds 1, 2
    assert shifted[0]["seed_offset"] == 1
    np.testing.assert_array_equal(shifted[0]["large"]["accuracy"], res[0]["large"]["accuracy"][1:])


def test_bad_input():
    fed = _fed()
    with pytest.raises(ValueError, match="folds must be"):
        cv.kfold(fed, 1, 0)
    with pytest.raises(ValueError, match="training samples per client"):
        cv.kfold(_fed(size_range=(2, 4)), 5, 0)
    with pytest.raises(ValueError, match="fold must be"):
        cv.fold_curves(CFG, 0, 5, folds=5, t_max=2, **TINY)
