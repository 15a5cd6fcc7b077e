"""verification.selection_stages_nn: PPFE stage-count benchmark on the MLP setting."""

import numpy as np
import pytest
import torch

from synthetic.permuted_labels import permuted_label_federation
from verification import selection_stages_nn as nn
from verification.stage_selectors import REFERENCES

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
    long = nn.stage_curves(dict(permuted=0.5, size_range=(10, 20)), 0, t_max=3, **TINY)
    short = nn.stage_curves(dict(permuted=0.5, size_range=(10, 20)), 0, t_max=2, **TINY)
    for k in ("test", "val", "train"):
        assert long[k].shape[0] == 3 and np.array_equal(long[k][:2], short[k])
    assert long["eps"][:2] == short["eps"]


def test_run_config_records():
    res = nn.run_config(dict(permuted=0.5, size_range=(10, 20)), seeds=2, t_max=3, **TINY)
    acc = np.asarray(res["accuracy"])
    assert acc.shape == (2, 3) and np.all((acc >= 0) & (acc <= 1))
    assert res["best_t"] == int(np.argmax(acc.mean(0))) + 1 and res["best_t"] in res["near_best"]
    assert {r["selector"] for r in res["records"]} == set(nn.NN_SELECTORS + REFERENCES)
    assert all(1 <= r["t_hat"] <= 3 and r["excess"] >= -1e-12 for r in res["records"])
    s = nn.summarise_nn([res])
    assert set(s) == set(nn.NN_SELECTORS + REFERENCES) and all(v["records"] == 2 for v in s.values())


def test_full_grid_size():
    assert len(nn.full_configs()) == 6
    with pytest.raises(ValueError, match="2 training samples"):
        nn.holdout(permuted_label_federation(num_clients=2, size_range=(2, 2), seed=0,
                                             train_fraction=0.5, device="cpu"), 0.2, 0)
