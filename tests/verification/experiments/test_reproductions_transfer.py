"""verification/experiments/reproductions_transfer.py: the transfer entries are labelled as
transfers, run the papers' settings on Fashion-MNIST, and name the methods their claims need."""

from __future__ import annotations

import numpy as np
import pytest

from synthetic.real_data.paper_partitions import equal_fill_size
from verification.checks.reproduction_transfer import CLAIMS
from verification.experiments.reproduction import cells
from verification.experiments.reproductions import REPRODUCTIONS
from verification.experiments.reproductions_transfer import (PFEDME_TRANSFER, PLGU_GLOBAL_TRANSFER,
                                                             PPFE_ABLATIONS_TRANSFER, TRANSFERS)


@pytest.mark.parametrize("rep", TRANSFERS, ids=lambda r: r.name)
def test_every_transfer_is_registered_labelled_and_never_compared_to_the_paper(rep):
    assert REPRODUCTIONS[rep.name] is rep
    assert "transfer (Fashion-MNIST in place of " in rep.table
    assert "transfer, not a reproduction" in rep.notes
    assert rep.numbers == {}                         # the paper's numbers are on other data
    assert {c.data for c in rep.columns} == {"fmnist"}
    assert len(rep.seeds) >= 3


def test_every_claim_names_rows_and_columns_of_its_entry():
    # mutation caught: a claim on a method label the entry does not run (it would stay NOT RUN)
    by_name = {r.name: r for r in TRANSFERS}
    for claim in CLAIMS:
        for entry, column, better, worse, kind, which in claim.pairs:
            rep = by_name[entry]
            assert column in {c.key for c in rep.columns}, claim.id
            assert {better, worse} <= {r.label for r in rep.rows}, claim.id
            assert kind in ("gt", "ge") and which in ("", "low5", "top5")
    papers = {c.paper for c in CLAIMS}
    assert papers == {"pFedMe (NeurIPS 2020)", "PPFE (arXiv 2602.14244)", "PLGU (CVPR 2023)"}


def test_pfedme_cells_use_the_papers_mnist_hyper_parameters():
    argv = {c.row.label + "/" + c.column.key: c.command(None, "o")
            for c in cells(PFEDME_TRANSFER, seeds=[0])}
    pm = argv["pFedMe-PM/fmnist_mlr"]
    for opt in ("--lam 15.0", "--beta 2.0", "--lr 0.01", "--size-range 1165 3834",
                "--clients 20", "--classes-per-client 2", "--clients-per-round 5",
                "--local-rounds 20", "--batch-size 20", "--inner-steps 5", "--rounds 800"):
        assert opt in pm, opt
    assert "--lam 30.0" in argv["pFedMe-GM/fmnist_dnn"] and "--hidden 100" in argv["pFedMe-GM/fmnist_dnn"]
    per = argv["Per-FedAvg/fmnist_mlr"]
    assert "--inner-lr 0.03" in per and "--lr 0.003" in per and "--variant fo" in per


def test_plgu_size_fills_fashion_mnist_without_replacement():
    y = np.repeat(np.arange(10), 7000)               # Fashion-MNIST: 7,000 images per class
    col = PLGU_GLOBAL_TRANSFER.columns[0]
    assert col.options["size_range"] == (equal_fill_size(y, 100, 3),) * 2
    assert PLGU_GLOBAL_TRANSFER.metric == "accuracy_mean"


def test_ppfe_ablation_rows_are_the_papers_switches():
    hp = {r.label: r.hp for r in PPFE_ABLATIONS_TRANSFER.rows}
    assert hp["w/o MR"]["reduction"] == "none" and hp["PPFE (Sparse)"]["reduction"] == "mask"
    assert [hp[f"M{k}"]["fixed_head"] for k in (1, 2, 3)] == [1, 2, 3]
    assert hp["WP"].get("reweighting", True) and hp["WPW"]["reweighting"] is False
    assert {r.evaluated for r in PPFE_ABLATIONS_TRANSFER.rows} == {"ensemble"}
