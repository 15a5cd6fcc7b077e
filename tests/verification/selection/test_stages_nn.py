"""verification.selection.stages_nn: PPFE stage-count benchmark on the MLP setting."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from algorithms.engine.models import MLP
from algorithms.methods.ppfe.ppfe_ensemble import ensemble_accuracy
from synthetic.permuted_labels import permuted_label_federation
from verification.selection import stages_nn as nn
from verification.selection.stage_selectors import REFERENCES, one_se_pick

TINY = dict(rounds_per_stage=2, num_clients=6)


def test_holdout_partitions_each_clients_training_data():
    fed = permuted_label_federation(num_clients=5, num_clusters=4, classes_per_client=2, dim=3,
                                    size_range=(5, 12), seed=1, device="cpu")
    rest, val = nn.holdout(fed, 0.2, seed=0)
    assert torch.equal(rest.train.counts + val.counts, fed.train.counts)
    assert torch.all(val.counts >= 1) and torch.all(rest.train.counts >= 1)
    for i in range(5):   # together the two parts are exactly client i's training rows
        o, c = int(fed.train.offsets[i]), int(fed.train.counts[i])
        a = rest.train.x[int(rest.train.offsets[i]):][:int(rest.train.counts[i])]
        b = val.x[int(val.offsets[i]):][:int(val.counts[i])]
        got = torch.cat([a, b]).sort(0).values
        assert torch.equal(got, fed.train.x[o:o + c].sort(0).values)
    assert rest.test is fed.test


def test_t_stage_run_is_the_prefix_of_the_t_max_run():
    # the benchmark reads PPFE with T stages off one T_max run: it must be the same model
    long = nn.stage_curves(dict(permuted=0.5, size_range=(10, 20)), 0, t_max=3, large_test=40, **TINY)
    short = nn.stage_curves(dict(permuted=0.5, size_range=(10, 20)), 0, t_max=2, large_test=40, **TINY)
    for k in ("test", "val", "val_nll", "train", "large"):
        assert long[k].shape[0] == 3 and np.array_equal(long[k][:2], short[k])
    assert long["eps"][:2] == short["eps"]


def test_large_test_is_only_evaluated():
    # drawing and scoring the large test changes nothing the selectors see (same run)
    cfg = dict(permuted=0.5, size_range=(10, 20))
    with_big = nn.stage_curves(cfg, 1, t_max=2, large_test=50, **TINY)
    without = nn.stage_curves(cfg, 1, t_max=2, large_test=0, **TINY)
    assert "large" not in without and with_big["large"].shape == (2, 6)
    assert np.all((with_big["large"] >= 0) & (with_big["large"] <= 1))
    for k in ("test", "val", "val_nll", "train"):
        assert np.array_equal(with_big[k], without[k])
    assert with_big["eps"] == without["eps"] and with_big["test_sizes"] == without["test_sizes"]
    assert np.all(with_big["val_nll"] > 0)


def test_evaluate_cross_entropy_is_the_ensemble_loss():
    fed = permuted_label_federation(num_clients=4, num_clusters=4, classes_per_client=2, dim=20,
                                    size_range=(6, 12), seed=2, device="cpu")
    model = MLP(20, 10, hidden=(32, 32, 16))
    members = [model.init(4, seed=s) for s in (0, 1)]
    alphas = torch.tensor([[0.7, 0.2, 1.0, 0.5], [0.3, 0.9, 0.0, 0.5]], dtype=torch.float64)
    correct, nll = nn.evaluate(model, members, alphas, fed.test)
    acc, summ = ensemble_accuracy(model, members, alphas, fed.test)
    assert nll.mean() == pytest.approx(summ["loss"], rel=1e-12)
    w = fed.test.counts.double()
    assert correct.mean() == pytest.approx(float((acc * w).sum() / w.sum()), rel=1e-12)
    # one stage: the mixture is that stage's softmax, the loss its cross-entropy
    _, one = nn.evaluate(model, members[:1], alphas[:1], fed.test)
    ce = F.cross_entropy(nn.per_sample_logits(model, members[0], fed.test).double(), fed.test.y,
                         reduction="none")
    np.testing.assert_allclose(one, ce.numpy(), rtol=1e-6)   # float32 logits


def test_loss_pick_is_the_argmin():
    l = np.array([[0.9, 1.1], [0.5, 0.7], [0.5, 0.7], [0.8, 0.4]])   # means .9 .6 .6 .6
    assert nn.loss_pick(l) == 2                                        # smallest T on ties
    assert nn.loss_pick(l[[0, 3]]) == 2
    with pytest.raises(ValueError, match="finite"):
        nn.loss_pick(np.array([[np.nan]]))
    with pytest.raises(ValueError, match="t_max"):
        nn.loss_pick(np.ones(3))


def _fake_curves(nll_best: int) -> dict:
    """Curves where the validation 0-1 loss is least at T = 2 and the cross-entropy at
    ``nll_best``: a selector reading the wrong curve is caught."""
    rng = np.random.default_rng(0)
    val = np.zeros((4, 40))
    val[1] = 1.0
    val[[0, 2, 3]] = rng.random((3, 40)) < 0.6
    nll = 1.0 + 0.1 * rng.random((4, 40))
    nll[nll_best - 1] -= 0.5
    return {"val": val, "val_nll": nll, "train": np.tile([[0.5], [0.7], [0.8], [0.9]], (1, 40)),
            "eps": [0.5, 0.4, 0.3, 0.3], "sizes": [30, 40], "num_classes": 10}


@pytest.mark.parametrize("nll_best", [1, 3, 4])
def test_val_loss_selectors_read_the_cross_entropy(nll_best):
    c = _fake_curves(nll_best)
    p = nn._picks(c)
    assert p["validation"] == 2 and p["validation_1se"] == one_se_pick(1.0 - c["val"])
    assert p["val_loss"] == nll_best == nn.loss_pick(c["val_nll"])
    assert p["val_loss_1se"] == one_se_pick(c["val_nll"]) == nll_best  # a clear minimum
    assert p["paper_T4"] == 4 and set(nn.NN_SELECTORS) <= set(p)


def test_run_config_weights_large_accuracy_by_test_size(monkeypatch):
    def fake(config, seed, **kw):
        c = _fake_curves(3)
        large = np.array([[0.2, 0.6], [0.5, 0.9], [0.7, 0.7], [0.6, 0.8]]) + 0.01 * seed
        test = np.tile(np.array([[0.3], [0.6], [0.7], [0.65]]) + 0.01 * seed, (1, 12))
        return {**c, "test": test, "large": large, "test_sizes": [10, 30]}
    monkeypatch.setattr(nn, "stage_curves", fake)
    res = nn.run_config({"x": 1}, seeds=2)
    w = np.array([10, 30]) / 40
    expect = np.array([[0.2, 0.6], [0.5, 0.9], [0.7, 0.7], [0.6, 0.8]]) @ w
    np.testing.assert_allclose(res["large"]["accuracy"][0], expect, rtol=1e-12)
    assert res["large"]["best_t"] == 2 and res["best_t"] == 3   # large: 0.8 at T = 2 (not 0.7)
    assert {r["selector"] for r in res["large"]["records"]} == set(nn.NN_SELECTORS + REFERENCES)
    rec = {r["selector"]: r for r in res["large"]["records"] if r["seed"] == 0}
    assert rec["val_loss"]["t_hat"] == 3 and rec["val_loss"]["within1"]
    assert rec["val_loss"]["excess"] == pytest.approx(0.8 - 0.7, abs=1e-12)
    assert rec["oracle_seed"]["t_hat"] == 2   # per-seed oracle scored on the large test


def test_run_config_records():
    res = nn.run_config(dict(permuted=0.5, size_range=(10, 20)), seeds=2, t_max=3, large_test=30,
                        **TINY)
    for r in (res, res["large"]):
        acc = np.asarray(r["accuracy"])
        assert acc.shape == (2, 3) and np.all((acc >= 0) & (acc <= 1))
        assert r["best_t"] == int(np.argmax(acc.mean(0))) + 1 and r["best_t"] in r["near_best"]
        assert {x["selector"] for x in r["records"]} == set(nn.NN_SELECTORS + REFERENCES)
        assert all(1 <= x["t_hat"] <= 3 and x["excess"] >= -1e-12 for x in r["records"])
    for scoring in nn.SCORINGS:
        s = nn.summarise_nn([res], scoring=scoring)
        assert set(s) == set(nn.NN_SELECTORS + REFERENCES) and all(v["records"] == 2 for v in s.values())
    with pytest.raises(ValueError, match="scoring"):
        nn.summarise_nn([res], scoring="medium")
    small_only = nn.run_config(dict(permuted=0.0, size_range=(10, 20)), seeds=2, t_max=2,
                               large_test=0, **TINY)
    assert "large" not in small_only and nn.summarise_nn([small_only], scoring="small")
    with pytest.raises(ValueError, match="large test"):
        nn.summarise_nn([small_only])


def test_full_grid_size():
    assert len(nn.full_configs()) == 9
    with pytest.raises(ValueError, match="2 training samples"):
        nn.holdout(permuted_label_federation(num_clients=2, size_range=(2, 2), seed=0,
                                             train_fraction=0.5, device="cpu"), 0.2, 0)
