"""verification/experiments/reproduction.py and the registry: cells, their commands, the
paper numbers beside the paper's own text."""

from __future__ import annotations

import shlex

import pytest

from algorithms.engine.base import get_algorithm
from verification.experiments.reproduction import cells, cost_seconds
from verification.experiments.reproductions import REPRODUCTIONS, get_reproduction


def test_cgpfl_fmnist_cells_are_the_papers_setting():
    # mutation caught: a dropped option (lr, λ, S, R, K, hidden 128, N = 40, partition)
    rep = get_reproduction("cgpfl_table1_fmnist")
    cs = cells(rep)
    assert len(cs) == 9 * 2 * 3
    by = {(c.row.label, c.column.key, c.seed): c for c in cs}
    argv = by[("CGPFL (K=4)", "fmnist_dnn", 1)].argv(None, "OUT")
    opts = dict(zip(argv[::2], argv[1::2]))
    assert opts["--algorithm"] == "cgpfl" and opts["--data"] == "fmnist"
    assert opts["--partition"] == "cgpfl" and opts["--clients"] == "40"
    assert opts["--hidden"] == "128" and opts["--model"] == "dnn"
    assert float(opts["--lam"]) == 12 and float(opts["--lr"]) == 0.005
    assert opts["--inner-steps"] == "5" and opts["--local-rounds"] == "10"
    assert opts["--num-contexts"] == "4" and opts["--rounds"] == "200"
    assert opts["--seed"] == "1" and opts["--data-seed"] == "0"
    fedavg = by[("FedAvg", "fmnist_mlr", 0)].argv("/d", "OUT")
    assert fedavg[fedavg.index("--data") + 1] == "fmnist:/d"
    assert by[("FedAvg", "fmnist_mlr", 0)].metric == "global_accuracy"
    assert by[("IFCA (K=4)", "fmnist_mlr", 0)].metric == "cluster_accuracy"


def test_command_round_trips_through_the_shell_and_overrides_replace():
    rep = get_reproduction("ppfe_table1")
    c = cells(rep, seeds=[2], rounds=3, columns=["cifar10_(100,2)"], methods=["PPFE"],
              overrides={"clients": 4})[0]
    cmd = c.command("/data dir", "runs/x")
    assert shlex.split(cmd)[2:] == c.argv("/data dir", "runs/x")
    argv = c.argv(None, "o")
    assert argv.count("--clients") == 1 and argv[argv.index("--clients") + 1] == "4"
    assert argv[argv.index("--rounds") + 1] == "3"


def test_rows_restricted_to_columns_and_column_hp():
    rep = get_reproduction("cgpfl_table2_lambda")
    cs = cells(rep)
    # every (method, λ) appears only on the columns whose λ list holds it: 9 λ × 4 methods × 4
    assert len(cs) == 4 * 4 * 9 * 3
    keys = {(c.row.label, c.column.key) for c in cs}
    assert ("pFedMe (PM) λ=19", "mnist_mlr") in keys and ("pFedMe (PM) λ=19", "fmnist_mlr") not in keys
    assert all((c.row.label, c.column.key) in rep.numbers for c in cs)
    pf = get_reproduction("pfedme_table1_mnist")
    lam = {c.column.key: c.argv(None, "o")[c.argv(None, "o").index("--lam") + 1]
           for c in cells(pf, methods=["pFedMe-PM"], seeds=[0])}
    assert lam == {"mnist_mlr": "15.0", "mnist_dnn": "30.0"}


@pytest.mark.parametrize("name", sorted(REPRODUCTIONS))
def test_every_row_builds_its_algorithm(name):
    # an option the algorithm does not have (or a bad value) is an error at construction:
    # mutation caught: a typo in any entry's hyper-parameters
    rep = get_reproduction(name)
    for c in cells(rep, seeds=[0]):
        hp = {**c.row.hp, **c.column.hp, **c.row.column_hp.get(c.column.key, {})}
        get_algorithm(c.row.algorithm)(**hp)


def test_cost_uses_measured_round_times():
    rep = get_reproduction("cgpfl_table1_fmnist")
    one = cells(rep, seeds=[0], rounds=100, methods=["FedAvg"], columns=["fmnist_dnn"])
    assert cost_seconds(rep, one) == pytest.approx(12 + 100 * rep.round_seconds[("fedavg", "dnn")])


def test_unknown_reproduction_is_one_line():
    with pytest.raises(ValueError, match="unknown reproduction 'nope'; known: .*cgpfl_table1_fmnist"):
        get_reproduction("nope")


def test_paper_numbers_transcribed():
    # spot values read off the papers' tables (CGPFL Table 1, pFedMe Table 1, PPFE Table 1,
    # PLGU Table 2): mutation caught: a shifted column
    assert get_reproduction("cgpfl_table1_fmnist").numbers[("CGPFL-Heur", "fmnist_dnn")] == 96.00
    assert get_reproduction("cgpfl_table1_fmnist").numbers[("FedAvg", "fmnist_mlr")] == 82.44
    assert get_reproduction("cgpfl_table1_cifar10").numbers[("APFL", "cifar10_cnn")] == 72.12
    assert get_reproduction("pfedme_table1_mnist").numbers[("pFedMe-PM", "mnist_dnn")] == 99.46
    assert get_reproduction("ppfe_table1").numbers[("Ditto", "emnist_(100,10)")] == 91.17
    assert get_reproduction("plgu_table2_personalized").numbers[("FedRep", "cifar100_C10")] == 62.92
    assert get_reproduction("cgpfl_table2_lambda").numbers[("CGPFL (K=4) λ=13", "fmnist_dnn")] == 93.21


@pytest.mark.parametrize("key", ["algorithm", "seed", "rounds", "eval_every", "out",
                                 "overwrite", "data", "model", "data_seed", "config", "variant"])
def test_options_the_cell_sets_or_that_define_a_row_are_refused(key):
    # mutation caught (issue 43.3): --option algorithm=pfedme ran pFedMe under "FedAvg";
    # seed/rounds/… were silently overridden by the cell's own values
    from verification.experiments.reproduction import check_overrides

    with pytest.raises(ValueError, match=f"--option {key}=…: .*cannot be replaced"):
        check_overrides(get_reproduction("cgpfl_table1_fmnist"), {key: "1"})


def test_options_that_tell_rows_apart_are_refused_the_others_pass():
    from verification.experiments.reproduction import check_overrides

    with pytest.raises(ValueError, match="num_contexts tells the rows of cgpfl_fig2_fmnist apart"):
        check_overrides(get_reproduction("cgpfl_fig2_fmnist"), {"num_contexts": "3"})
    with pytest.raises(ValueError, match="lam tells the rows"):
        check_overrides(get_reproduction("cgpfl_table2_lambda"), {"lam": "3"})
    with pytest.raises(ValueError, match="lr tells the rows"):
        check_overrides(get_reproduction("cgpfl_table1_fmnist_lr_grid"), {"lr": "0.1"})
    # a setting every row shares is a smoke test's business (the CSV records it)
    check_overrides(get_reproduction("cgpfl_table1_fmnist"),
                    {"clients": "4", "clients_per_round": "4", "lr": "0.01", "hidden": "16"})


def test_methods_by_label_or_registry_name_and_ambiguity_lists_choices():
    # issue 45.10: the registry's names too; mutation caught: an ambiguous name taking the
    # first row silently
    from verification.experiments.reproduction import resolve_methods

    rep = get_reproduction("cgpfl_table1_fmnist")
    assert resolve_methods(rep, ["pfedme", "cgpfl", "cgpfl-heur", "FedAvg", "per-fedavg-hf",
                                 "pFedMe (PM)"]) == ["pFedMe (PM)", "CGPFL (K=4)", "CGPFL-Heur",
                                                     "FedAvg", "Per-FedAvg (HF)"]
    with pytest.raises(ValueError, match=r"ambiguous in pfedme_table1_mnist: it names "
                                         r"\['pFedMe-GM', 'pFedMe-PM'\]"):
        resolve_methods(get_reproduction("pfedme_table1_mnist"), ["pfedme"])
    with pytest.raises(ValueError, match="unknown method 'nope'.*by algorithm: .*cgpfl-heur"):
        resolve_methods(rep, ["nope"])


def test_options_text_names_the_replacements():
    rep = get_reproduction("pfedme_table1_mnist")
    c = cells(rep, seeds=[0], methods=["FedAvg"], columns=["mnist_mlr"],
              overrides={"clients": "3", "size_range": ["20", "40"]})[0]
    assert c.options_text == "clients=3, size_range=20 40"
    assert cells(rep, seeds=[0])[0].options_text == ""


def test_an_option_reaches_every_row_whose_algorithm_accepts_it():
    """``--option personal_lr=0.1`` on CGPFL's Table 1: Ditto sets personal_lr itself, pFedMe
    leaves it at its default — the option must reach both (it was dropped for pFedMe, so
    its cells ran the baseline under an ablation's options), and never FedAvg (no such
    hyper-parameter)."""
    rep = get_reproduction("cgpfl_table1_fmnist")
    got = {c.row.algorithm: dict(c.overrides) for c in
           cells(rep, seeds=[0], columns=["fmnist_mlr"], overrides={"personal_lr": 0.1})}
    assert got["pfedme"].get("personal_lr") == 0.1
    assert got["ditto"].get("personal_lr") == 0.1
    assert "personal_lr" not in got["fedavg"]
