"""synthetic.degenerate: a federation whose labels are >= 99 % one class warns (issue 23)."""

import warnings

import pytest
import torch

from pflt.cli import main
from synthetic import fedprox
from synthetic.degenerate import DOMINANT_SHARE, DegenerateDataWarning, check_labels


def test_check_labels_finds_the_dominant_class_and_its_share():
    labels = torch.tensor([2] * 99 + [0])
    assert check_labels(labels, 3) == (2, pytest.approx(0.99))
    assert check_labels(torch.tensor([], dtype=torch.long), 3) == (0, 0.0)


def test_huge_alpha_warns_and_the_paper_setting_does_not():
    with pytest.warns(DegenerateDataWarning, match="class 0"):
        fed = fedprox.federation(1e20, 0.5, num_clients=4, seed=0, max_client_size=50)
    assert check_labels(fed.train.y, fed.num_classes)[1] >= DOMINANT_SHARE
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateDataWarning)
        fed = fedprox.federation(0.5, 0.5, num_clients=4, seed=0, max_client_size=50)
    assert check_labels(fed.train.y, fed.num_classes)[1] < DOMINANT_SHARE


def test_pflt_prints_the_warning_as_one_line(tmp_path, capsys):
    assert main(["run", "--algorithm", "fedavg", "--clients", "4", "--clients-per-round", "2",
                 "--rounds", "1", "--max-client-size", "20", "--synthetic-alpha", "1e20",
                 "--no-progress", "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "degenerate" in ln]
    assert len(lines) == 1 and lines[0].startswith("pflt run: warning: ")
    assert "Warning:" not in err        # not Python's two-line default format
