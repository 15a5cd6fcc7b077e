"""verification/experiments/reproduction_tune.py: lr chosen on validation, tuned rows, the
side-by-side markdown."""

from __future__ import annotations

from verification.experiments.reproduction import cells
from verification.experiments.reproduction_tune import (choose, side_by_side, tune_label,
                                                        tuned_reproduction)
from verification.experiments.reproductions import (CGPFL_TABLE1_FMNIST,
                                                     CGPFL_TABLE1_FMNIST_TUNE, cgpfl_rows)


def _row(method, lr, col, value, status="ok"):
    return dict(method=tune_label(method, lr), column=col, value=str(value), status=status)


def test_choose_takes_the_best_validation_lr_smaller_on_ties():
    # mutations caught: argmin, ties to the larger lr, failed rows counted
    rows = [_row("FedAvg", 0.005, "fmnist_mlr", 0.70), _row("FedAvg", 0.02, "fmnist_mlr", 0.80),
            _row("FedAvg", 0.05, "fmnist_mlr", 0.99, status="exit 1"),
            _row("Ditto", 0.01, "fmnist_mlr", 0.85), _row("Ditto", 0.05, "fmnist_mlr", 0.85)]
    ch = choose(rows)
    assert ch[("FedAvg", "fmnist_mlr")] == (0.02, 80.0)
    assert ch[("Ditto", "fmnist_mlr")][0] == 0.01


def test_the_tune_entry_evaluates_on_validation_and_the_tuned_rows_on_test():
    tune_cells = cells(CGPFL_TABLE1_FMNIST_TUNE)
    assert all("--validation-fraction" in c.command(None, "o") for c in tune_cells)
    assert len({c.row.label for c in tune_cells}) == 4 * len(CGPFL_TABLE1_FMNIST.rows)
    tuned = tuned_reproduction(CGPFL_TABLE1_FMNIST, lambda lr: cgpfl_rows(lr=lr),
                               {("Per-FedAvg (HF)", "fmnist_mlr"): (0.02, 85.0)})
    cmds = {c.row.label + c.column.key: c.command(None, "o") for c in cells(tuned)}
    # Per-FedAvg's every step moves with lr (α = β); the DNN column keeps the printed 0.005
    assert "--lr 0.02" in cmds["Per-FedAvg (HF)fmnist_mlr"]
    assert "--inner-lr 0.02" in cmds["Per-FedAvg (HF)fmnist_mlr"]
    assert "--lr 0.005" in cmds["Per-FedAvg (HF)fmnist_dnn"]
    assert not any("--validation-fraction" in c for c in cmds.values())
    md = side_by_side(CGPFL_TABLE1_FMNIST, {("FedAvg", "fmnist_mlr"): (77.1, 0.26, 3)},
                      {("FedAvg", "fmnist_mlr"): (80.0, 0.1, 3)},
                      {("FedAvg", "fmnist_mlr"): (0.02, 80.5)})
    assert "| FedAvg | 82.44 | 77.10 ± 0.26 | 80.00 ± 0.10 | 0.02 (80.50) |" in md
