"""algorithms.methods.ppfe.ppfe_stage_validation: cross-validated PPFE stage curves and T̂."""

import numpy as np
import pytest
import torch

from algorithms.methods.ppfe import ppfe_stage_validation as sv
from algorithms.engine.base import get_algorithm
from algorithms.engine.models import MLP
from synthetic.permuted_labels import permuted_label_federation


def _fed(seed=1, size_range=(10, 20)):
    return permuted_label_federation(num_clients=4, num_clusters=4, classes_per_client=2, dim=6,
                                     size_range=size_range, seed=seed, device="cpu")


def _alg(**kw):
    hp = dict(total_rounds=6, stages=3, stage_fractions="1,1,4", clients_per_round=2,
              batch_size=5, local_rounds=2, head_steps=2)
    return get_algorithm("ppfe")(**{**hp, **kw})


def test_stage_ensembles_yields_one_ensemble_per_stage_end():
    fed, model = _fed(), MLP(6, 10, hidden=(8, 8))
    alg = _alg()
    assert alg.schedule(model) == [2, 1, 3]   # unequal stages: yields after rounds 2, 3, 6
    out = list(sv.stage_ensembles(alg, fed, model, 0))
    # T = 1, 2, 3 stages: T members with T rows of α, one per client
    assert [len(m) for m, _, _ in out] == [1, 2, 3]
    assert [tuple(a.shape) for _, a, _ in out] == [(1, 4), (2, 4), (3, 4)]
    assert all(s["eps"].shape == (4,) for _, _, s in out)


def test_stage_validation_sums_the_folds_and_picks_the_argmin():
    fed, model = _fed(), MLP(6, 10, hidden=(8, 8))
    res = sv.stage_validation(_alg(), fed, model, folds=3, cv=2, seed=4, init_seed=1)
    splits = sv.kfold(fed, 3, 4)
    # every held-out sample of the first cv folds counted once
    assert res.samples == sum(int(h.counts.sum()) for _, h in splits[:2])
    nll = np.concatenate([p[1] for p in res.per_fold], 1)
    correct = np.concatenate([p[0] for p in res.per_fold], 1)
    np.testing.assert_array_equal(res.loss_curve, nll.mean(1))
    np.testing.assert_array_equal(res.accuracy_curve, correct.mean(1))
    assert res.ts.tolist() == [1, 2, 3] and np.all(res.loss_curve > 0)
    assert res.t_hat == int(np.argmin(res.loss_curve)) + 1
    # fold 1's scores are a direct run on fold 1's training part, scored on fold 1
    rest, held = splits[1]
    direct = sv.fold_scores(_alg(), rest, held, model, 1)
    np.testing.assert_array_equal(direct[1], res.per_fold[1][1])


def test_pick_t_is_the_argmin_with_the_smallest_t_on_ties():
    assert sv.pick_t([0.9, 0.5, 0.5, 0.7]) == 2
    assert sv.pick_t([0.3, 0.5, 0.9]) == 1     # argmax (the mutation) would give 3
    with pytest.raises(ValueError, match="finite"):
        sv.pick_t([0.3, float("nan")])


def test_errors():
    fed, model = _fed(size_range=(3, 6)), MLP(6, 10, hidden=(8, 8))
    with pytest.raises(ValueError, match="cv must be"):
        sv.stage_validation(_alg(), fed, model, folds=3, cv=4)
    with pytest.raises(ValueError, match="training samples per client"):
        sv.stage_validation(_alg(), fed, model, folds=50)
    with pytest.raises(ValueError, match="folds must be"):
        sv.kfold(fed, 1, 0)


def test_evaluate_votes_changes_the_accuracy_not_the_loss():
    fed, model = _fed(), MLP(6, 10, hidden=(8, 8))
    members = [model.init(4, seed=s) for s in (0, 1, 2)]
    alphas = torch.tensor([[0.2] * 4, [0.3] * 4, [0.4] * 4], dtype=torch.float64)
    c_p, l_p = sv.evaluate(model, members, alphas, fed.test)
    c_v, l_v = sv.evaluate(model, members, alphas, fed.test, kind="votes")
    np.testing.assert_array_equal(l_p, l_v)   # the loss is always the softmax mixture's
    assert c_p.shape == c_v.shape == l_p.shape == (int(fed.test.counts.sum()),)
