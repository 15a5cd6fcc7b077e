"""verification/experiments/reproductions_ablations.py: PPFE Tables 3-6 and PLGU Tables 3, 4,
6-11 as ``pflt reproduce`` entries — each variant runs the option its ablation names, the
paper's numbers are transcribed, every entry is registered and named by its ledger item.
(End to end on small real-format files: tests/pflt/test_reproduce_cli.py, ``-m slow``.)"""

from __future__ import annotations

import pytest

from verification.experiments.reproduction import cells
from verification.experiments.reproductions import REPRODUCTIONS
from verification.experiments.reproductions_ablations import (ABLATIONS, PLGU_TABLE3,
                                                              PLGU_TABLE4, PLGU_TABLE8,
                                                              PLGU_TABLE10, PPFE_TABLE3,
                                                              PPFE_TABLE4, PPFE_TABLE5,
                                                              PPFE_TABLE6)
from verification.ledger import ITEMS


def _opts(rep, label, column=None) -> dict:
    """The ``pflt run`` options of ``label``'s first cell as ``{flag: value}``."""
    c = next(c for c in cells(rep, seeds=[0]) if c.row.label == label
             and (column is None or c.column.key == column))
    argv = c.argv(None, "o")
    return {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--")}


def test_every_entry_is_registered_and_named_by_its_ledger_item():
    # mutation caught: an entry left out of the registry, or a ledger item not naming it
    named = {r: i.label for i in ITEMS for r in i.reproductions}
    for rep in ABLATIONS:
        assert REPRODUCTIONS[rep.name] is rep
        assert named[rep.name] == rep.table.split(" (")[0], rep.name


@pytest.mark.parametrize("rep, label, flags", [
    (PPFE_TABLE3, "with MR", {}),
    (PPFE_TABLE3, "w/o MR", {"--reduction": "none"}),
    (PPFE_TABLE4, "M2", {"--fixed-head": "2"}),
    (PPFE_TABLE4, "M3", {"--fixed-head": "3"}),
    (PPFE_TABLE5, "WP", {"--fixed-head": "1", "--local-update": "joint"}),
    (PPFE_TABLE5, "WPW", {"--fixed-head": "1", "--local-update": "joint",
                          "--reweighting": "False"}),
    (PPFE_TABLE6, "PPFE (Sparse)", {"--reduction": "mask"}),
])
def test_each_ppfe_variant_runs_its_ablation_option(rep, label, flags):
    # mutation caught: a variant run as plain PPFE (a missing flag) or with another ablation
    opts = _opts(rep, label)
    assert opts["--algorithm"] == "ppfe"
    for k, v in flags.items():
        assert opts[k] == v, (label, k)
    ablation = {"--reduction", "--fixed-head", "--local-update", "--reweighting"}
    assert ablation & set(opts) == set(flags), label


def test_ppfe_numbers_and_claims():
    # spot values of PPFE Tables 3-6 (CIFAR-100 (100,20) and EMNIST columns)
    assert PPFE_TABLE3.numbers[("w/o MR", "cifar100_(100,20)")] == 54.07
    assert PPFE_TABLE4.numbers[("M3", "cifar10_(100,5)")] == 67.97
    assert PPFE_TABLE5.numbers[("WPW", "cifar100_(100,5)")] == 77.21
    assert PPFE_TABLE6.numbers[("PPFE (Sparse)", "emnist_(100,10)")] == 89.45
    assert all(PPFE_TABLE3.numbers[("with MR", c)] > PPFE_TABLE3.numbers[("w/o MR", c)]
               for c in (col.key for col in PPFE_TABLE3.columns))
    # the claims the entries judge hold in the paper's own numbers
    for rep in (PPFE_TABLE3, PPFE_TABLE4, PPFE_TABLE5):
        for col, better, worse in rep.claims:
            assert rep.numbers[(better, col)] > rep.numbers[(worse, col)], (rep.name, col)
    assert "Sent140" in PPFE_TABLE3.notes and "76.43" in PPFE_TABLE3.notes


def test_plgu_sweeps_set_k_epochs_as_steps_and_rho():
    # K epochs = 9 K steps of batch 50 over 450 training samples; mutation caught: K passed
    # as steps, GRep's K on the representation instead of the head, ρ not swept
    assert _opts(PLGU_TABLE3, "PLGU-LF (G) K=10")["--local-rounds"] == "90"
    assert _opts(PLGU_TABLE3, "PLGU-GRep K=1")["--head-steps"] == "9"
    assert _opts(PLGU_TABLE10, "PLGU-GHN K=5")["--local-rounds"] == "45"
    assert _opts(PLGU_TABLE4, "PLGU-GHN ρ=0.5")["--rho"] == "0.5"
    assert _opts(PLGU_TABLE4, "PLGU-LF (G) ρ=0.1")["--local-rounds"] == "45"
    assert {r.evaluated for r in PLGU_TABLE3.rows if "(G)" in r.label} == {"global"}
    assert {r.evaluated for r in PLGU_TABLE3.rows if "(G)" not in r.label} == {"personalized"}
    assert PLGU_TABLE3.numbers[("PLGU-GHN K=10", "cifar10_C10")] == 72.91
    assert PLGU_TABLE10.numbers[("PLGU-LF (P) K=1", "cifar100_C10")] == 59.65
    assert [c.data for c in PLGU_TABLE10.columns] == ["cifar100"]


def test_plgu_label_tables_run_the_labels_of_their_caption():
    # mutation caught: a table run at PLGU's default 3 / 10 labels (the plgu partition)
    assert _opts(PLGU_TABLE8, "FedAvg", "cifar10_C10_S8")["--classes-per-client"] == "8"
    assert _opts(PLGU_TABLE8, "FedAvg", "cifar100_C100_S50")["--classes-per-client"] == "50"
    assert _opts(PLGU_TABLE8, "FedAvg", "cifar100_C100_S50")["--clients-per-round"] == "100"
    assert _opts(PLGU_TABLE8, "PLGU-LF", "cifar10_C10_S8")["--partition"] == "label-skew"
    assert PLGU_TABLE8.numbers[("pFedMe", "cifar100_C10_S50")] == 58.30
    assert {r.evaluated for r in PLGU_TABLE8.rows} == {"global"}
    assert "Erratum" in PLGU_TABLE8.notes
