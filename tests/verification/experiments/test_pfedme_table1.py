"""Tests of verification/experiments/pfedme_table1.py (the pFedMe Table 1 reproduction)."""

import pytest

from verification.experiments import pfedme_table1 as ex


# ------------------------------------------------------------------- Table 1 pieces
# pFedMe Table 1, Synthetic column, typed from the paper (NeurIPS 2020): (model, algorithm,
# accuracy %, std, λ or learning rate(s))
PAPER_TABLE1_SYNTHETIC = [
    ("mlr", "FedAvg", 77.62, 0.11, 0.02), ("mlr", "Per-FedAvg", 81.49, 0.09, (0.02, 0.002)),
    ("mlr", "pFedMe-GM", 78.65, 0.25, 20), ("mlr", "pFedMe-PM", 83.20, 0.06, 20),
    ("dnn", "FedAvg", 83.64, 0.22, 0.03), ("dnn", "Per-FedAvg", 85.01, 0.10, (0.01, 0.001)),
    ("dnn", "pFedMe-GM", 84.17, 0.35, 30), ("dnn", "pFedMe-PM", 86.36, 0.15, 30),
]


def test_paper_numbers_match_the_paper_table():
    for model, algorithm, acc, std, setting in PAPER_TABLE1_SYNTHETIC:
        assert ex.PAPER_SYNTHETIC[model][algorithm] == (acc, std)
        if algorithm == "FedAvg":
            assert ex.TABLE1_SETTINGS[model]["fedavg_lr"] == setting
        elif algorithm == "Per-FedAvg":
            assert tuple(ex.TABLE1_SETTINGS[model]["perfedavg"]) == setting
        else:
            assert ex.TABLE1_SETTINGS[model]["lam"] == setting


def test_table1_algorithms_hyperparameters():
    algs = ex.table1_algorithms("dnn")
    assert algs["fedavg"].lr == 0.03
    assert (algs["perfedavg"].inner_lr, algs["perfedavg"].lr) == (0.01, 0.001)
    code = algs["perfedavg-code"]  # the public code's evaluation: same training, test adaptation
    assert (code.inner_lr, code.lr, code.adapt_on, algs["perfedavg"].adapt_on) == \
        (0.01, 0.001, "test", "train")
    p = algs["pfedme"]
    assert (p.lam, p.lr, p.personal_lr, p.inner_steps, p.local_rounds, p.batch_size, p.beta,
            p.clients_per_round) == (30.0, 0.01, 0.01, 5, 20, 20, 2.0, 10)
    with pytest.raises(ValueError, match="mlr"):
        ex.table1_algorithms("cnn")


def test_table1_tiny_run_structure_and_determinism():
    a = ex.table1(seeds=[3], rounds=1, model="mlr", quick=True, eval_every=1)
    b = ex.table1(seeds=[3], rounds=1, model="mlr", quick=True, eval_every=1)
    assert set(a["rows"]) == set(ex.ROWS)
    for label, row in a["rows"].items():
        assert set(row) == set(ex.METRICS)
        for metric, vals in row.items():
            assert len(vals) == 1 and 0.0 <= vals[0] <= 1.0
            assert vals == b["rows"][label][metric]
        assert row["weighted_best"][0] >= row["weighted_final"][0]
    with pytest.raises(ValueError):
        ex.table1(seeds=[], rounds=1, quick=True)


def _fake(model, seeds, accs):
    rows = {label: {m: [accs[label]] * len(seeds) for m in ex.METRICS} for label in ex.ROWS}
    return {"rows": rows, "seeds": list(seeds), "rounds": 5, "model": model,
            "federation": "fake", "seconds": {"pfedme": [1.0] * len(seeds)}}


ACCS = {"FedAvg": 0.7, "Per-FedAvg": 0.8, "pFedMe-GM": 0.75, "pFedMe-PM": 0.85,
        "pFedMe-local (code's 'PM')": 0.84, ex.CODE_PERFEDAVG: 0.86}


def test_ordering_and_merge():
    res = _fake("mlr", [0], ACCS)
    assert ex.ordering(res) == {"PM > GM": True, "PM > Per-FedAvg": True,
                                "Per-FedAvg > FedAvg": True}
    bad = _fake("mlr", [1], {**ACCS, "Per-FedAvg": 0.6})
    assert ex.ordering(bad)["Per-FedAvg > FedAvg"] is False
    merged = ex.merge_table1([res, bad])
    assert merged["seeds"] == [0, 1]
    assert merged["rows"]["Per-FedAvg"]["weighted_best"] == [0.8, 0.6]
    with pytest.raises(ValueError):
        ex.merge_table1([res, _fake("dnn", [2], ACCS)])
