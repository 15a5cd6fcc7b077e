"""algorithms.methods.clustered.cgpfl_validation: hold-out split, the paired standard error, the choice rules and
a tiny run of the validation selector."""

import numpy as np
import pytest
import torch

from algorithms.methods.clustered.cgpfl_validation import (RULES, _paired_se, choose, first_folds, holdout_split,
                                         smooth, validation_select_k)
from algorithms.engine.models import build_model
from verification.experiments.cgpfl import planted_federation

HP = dict(lam=12.0, personal_lr=0.05, inner_steps=2, lr=0.02, local_scale=12.0, alpha=1.0,
          local_rounds=2, batch_size=10)


@pytest.fixture(scope="module")
def planted():
    pl = planted_federation(8, 2, dim=6, size_range=(30, 40), seed=3)
    return pl.fed, build_model("mlr", pl.fed)


def test_holdout_split_is_a_partition_of_the_training_data(planted):
    fed, _ = planted
    a = holdout_split(fed, folds=4, fold=1, seed=5)
    assert torch.equal(a.train.counts + a.test.counts, fed.train.counts)
    assert a.test.counts.min() >= fed.train.counts.min() // 4
    b = holdout_split(fed, folds=4, fold=1, seed=5)
    assert torch.equal(a.test.x, b.test.x)  # deterministic in the seed
    with pytest.raises(ValueError, match="fold"):
        holdout_split(fed, folds=4, fold=4)


def test_paired_se_is_the_ratio_estimator_over_clients():
    rng = np.random.default_rng(0)
    counts = rng.integers(10, 20, size=7).astype(float)
    correct = np.floor(rng.uniform(0.3, 0.9, size=(3, 7)) * counts)
    se = _paired_se(correct, counts)
    best = int(np.argmax(correct.sum(1)))
    for k in range(3):  # brute force: variance of Σ d_i / Σ n_i with clients resampled
        d = correct[k] - correct[best]
        r = d.sum() / counts.sum()
        var = 7 / 6 * ((d - r * counts) ** 2).sum() / counts.sum() ** 2
        assert se[k] == pytest.approx(np.sqrt(var), rel=1e-12)
    assert se[best] == 0.0


def test_choose_rules():
    curve = np.array([0.50, 0.70, 0.78, 0.80, 0.79, 0.60])
    se = np.array([0.05, 0.04, 0.03, 0.0, 0.02, 0.05])
    assert choose(curve, se, "max") == 4
    assert choose(curve, se, "1se_small") == 3     # 0.78 ≥ 0.80 − 0.03
    assert choose(curve, se, "1se_large") == 5     # 0.79 ≥ 0.80 − 0.02; 0.60 is not
    assert choose([0.5, 0.5], [0.0, 0.0], "max") == 1  # smallest K on ties
    with pytest.raises(ValueError, match="rule"):
        choose(curve, se, "median")


def test_smooth_is_a_truncated_moving_average():
    c = np.array([0.2, 0.8, 0.5, 0.5, 0.9, 0.1])
    # differences of float64 cumulative sums of values ≤ 3: rounding error ≤ a few 1e-16
    assert smooth(c) == pytest.approx([0.5, 0.5, 0.6, 1.9 / 3, 0.5, 0.5], abs=1e-15)
    assert smooth(c, 1) == pytest.approx(c, abs=1e-15) and smooth([0.3]) == pytest.approx([0.3])
    with pytest.raises(ValueError, match="odd"):
        smooth(c, 2)


def test_choose_smooth_ignores_a_lone_spike():
    # K = 2 is a lone noisy spike; K = 4 … 6 a plateau: the smoothed argmax is inside it
    curve = np.array([0.50, 0.83, 0.60, 0.80, 0.81, 0.80, 0.79])
    assert choose(curve, np.zeros(7), "max") == 2
    assert choose(curve, np.zeros(7), "smooth") == 5
    # a clear single peak is kept
    assert choose([0.5, 0.6, 0.9, 0.6, 0.5], np.zeros(5), "smooth") == 3


def test_validation_select_k_runs_and_is_deterministic(planted):
    fed, model = planted
    a = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, seed=2)
    b = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, seed=2)
    assert a.curve.shape == (3,) and np.all((a.curve >= 0) & (a.curve <= 1))
    assert np.array_equal(a.curve, b.curve) and a.k_hat == b.k_hat
    assert set(a.k_hat) == set(RULES) and all(1 <= k <= 3 for k in a.k_hat.values())
    assert a.se[int(np.argmax(a.curve))] == 0.0 and len(a.warmups) == 1
    cv = validation_select_k(fed, model, HP, k_max=2, warmup_rounds=1, rounds=1, cv=2, seed=2)
    assert len(cv.warmups) == 2 and cv.correct.shape == (2, 2, 8) and len(cv.seconds) == 2
    # the cross-validated curve pools both folds: every training sample validated once at cv = folds
    assert cv.counts.sum() == pytest.approx(float(fed.train.counts.sum()) / 2, abs=8)
    assert np.allclose(cv.curve, cv.correct.sum((0, 2)) / cv.counts.sum())
    # its first fold alone is exactly the cv = 1 run (same split, warm-up and seeds)
    one = validation_select_k(fed, model, HP, k_max=2, warmup_rounds=1, rounds=1, seed=2)
    head = first_folds(cv, 1)
    assert np.array_equal(head.curve, one.curve) and head.k_hat == one.k_hat
    assert np.array_equal(head.se, one.se)
    with pytest.raises(ValueError, match="cv"):
        first_folds(cv, 3)
    with pytest.raises(ValueError, match="k_max"):
        validation_select_k(fed, model, HP, k_max=9)
    with pytest.raises(ValueError, match="cv"):
        validation_select_k(fed, model, HP, k_max=2, cv=5)


def _direct_ce_sums(params, split) -> np.ndarray:
    """Summed cross-entropy per client of MLR models ``params`` on ``split``, in numpy
    (logits x W_i + b_i, log-sum-exp), independent of algorithms.engine.evaluation."""
    w = params["fc.weight"].detach().cpu().double().numpy()
    b = params["fc.bias"].detach().cpu().double().numpy()
    x = split.x.detach().cpu().double().numpy().reshape(split.x.shape[0], -1)
    y = split.y.cpu().numpy()
    out = []
    for i, (off, cnt) in enumerate(zip(split.offsets.tolist(), split.counts.tolist())):
        z = x[off:off + cnt] @ w[i if w.shape[0] > 1 else 0] + b[i if b.shape[0] > 1 else 0]
        top = z.max(1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(z - top).sum(1))
        out.append(float((lse - z[np.arange(cnt), y[off:off + cnt]]).sum()))
    return np.asarray(out)


def test_loss_record_matches_a_direct_cross_entropy(planted, monkeypatch):
    # every (fold, K) evaluation is captured and its summed held-out cross-entropy recomputed
    # directly; float64 data, sums of ≤ 10 terms of order 1: agreement to 1e-10
    import algorithms.methods.clustered.cgpfl_validation as cv

    fed, model = planted
    seen = []
    orig = cv.evaluate
    monkeypatch.setattr(cv, "evaluate", lambda m, p, s: seen.append((p, s)) or orig(m, p, s))
    res = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, cv=2, seed=2)
    assert res.loss.shape == res.correct.shape == (2, 3, 8) and len(seen) == 6
    for j, (params, split) in enumerate(seen):
        fold, k = divmod(j, 3)
        assert np.allclose(res.loss[fold, k], _direct_ce_sums(params, split), rtol=1e-10, atol=1e-10)
        assert np.array_equal(res.counts[fold], split.counts.double().numpy())
    # the curve is the pooled mean loss; its paired SE the ratio estimator around the argmin
    tot, n = res.loss.sum(0), res.counts.sum(0)
    assert np.allclose(res.loss_curve, tot.sum(1) / n.sum(), rtol=1e-13)
    assert np.allclose(res.loss_se, _paired_se(-tot, n), rtol=1e-13)
    assert res.loss_se[int(np.argmin(res.loss_curve))] == 0.0


def test_loss_criterion_picks_the_argmin(planted):
    fed, model = planted
    res = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, seed=2)
    assert res.pick("loss") == int(np.argmin(res.loss_curve)) + 1 == res.k_hat_loss["max"]
    assert res.pick("accuracy") == res.k_hat["max"] == int(np.argmax(res.curve)) + 1
    near = np.flatnonzero(res.loss_curve <= res.loss_curve.min() + res.loss_se + 1e-12)
    assert res.pick("loss", "1se_small") == near[0] + 1
    assert set(res.k_hat_loss) == set(RULES)
    # first_folds keeps the loss: the first fold of a cv = 2 run is the cv = 1 result
    two = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, cv=2, seed=2)
    head = first_folds(two, 1)
    assert np.array_equal(head.loss_curve, res.loss_curve) and head.k_hat_loss == res.k_hat_loss
    with pytest.raises(ValueError, match="criterion"):
        res.pick("brier")
    with pytest.raises(ValueError, match="rule"):
        res.pick("loss", "median")


def test_choose_on_the_negated_loss_is_the_argmin_and_a_mutation_is_caught():
    # the loss criterion is `choose` on −L(K); the argmax of L (a sign error) picks the worst K
    loss = np.array([1.20, 0.70, 0.55, 0.56, 0.60])
    se = np.array([0.2, 0.05, 0.0, 0.02, 0.03])
    assert choose(-loss, se, "max") == 3
    assert choose(-loss, se, "1se_small") == 3 and choose(-loss, se, "1se_large") == 4
    assert choose(loss, se, "max") == 1 != choose(-loss, se, "max")   # the mutation differs
    from algorithms.methods.clustered.cgpfl_validation import ValidationResult
    r = ValidationResult(np.zeros(5), np.zeros(5), {r: 1 for r in RULES}, loss_curve=loss,
                         loss_se=se, k_hat_loss={r: choose(-loss, se, r) for r in RULES})
    assert r.pick("loss") == 3
    with pytest.raises(ValueError, match="no held-out loss"):
        ValidationResult(np.zeros(2), np.zeros(2), {}).pick("loss")


def test_progress_is_reported_after_every_short_run(planted):
    """``progress(done, total)`` after each (fold, K) run, so the CLI can show a bar for a
    selection that takes minutes (N = 100: 4 × 50 short runs); the result is unchanged."""
    fed, model = planted
    calls = []
    res = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, cv=2,
                              seed=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, 6) for i in range(1, 7)]
    plain = validation_select_k(fed, model, HP, k_max=3, warmup_rounds=1, rounds=1, cv=2, seed=2)
    assert np.array_equal(res.curve, plain.curve) and res.k_hat == plain.k_hat
