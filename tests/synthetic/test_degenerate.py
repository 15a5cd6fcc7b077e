"""synthetic.degenerate: a federation whose labels are >= 99 % one class warns (issue 23).

The degenerate labels are injected (:func:`one_class_labels`), not drawn with a huge α: at
α = 1e20 every weight column of a client is the same float64, all logits tie and the argmax
is decided by the BLAS kernel's rounding — 99 % class 0 on one CPU, 63 % on an AMD EPYC
(issue 37). A test must not depend on one CPU's BLAS.
"""

import warnings

import numpy as np

import pytest
import torch

from pflt.cli import main
from synthetic import fedprox
from synthetic.degenerate import DOMINANT_SHARE, DegenerateDataWarning, check_labels


def test_check_labels_finds_the_dominant_class_and_its_share():
    labels = torch.tensor([2] * 99 + [0])
    assert check_labels(labels, 3) == (2, pytest.approx(0.99))
    assert check_labels(torch.tensor([], dtype=torch.long), 3) == (0, 0.0)


@pytest.fixture
def one_class_labels(monkeypatch):
    """FedProx's generator with every label replaced by class 0 (features as drawn)."""
    draw_clients = fedprox._clients

    def clients(*args, **kwargs):
        for x, y in draw_clients(*args, **kwargs):
            yield x, np.zeros_like(y)

    monkeypatch.setattr(fedprox, "_clients", clients)


def test_huge_alpha_ties_every_logit_on_any_blas():
    """Why α = 1e20 is degenerate everywhere, whatever class wins the ties: each client's
    weight columns are one float64 value (the N(·, 1) noise is below the ulp at 1e20)."""
    rng = np.random.RandomState(0)
    mean = rng.normal(0, 1e20)
    w = rng.normal(mean, 1, (60, 10))
    assert np.unique(w).size == 1


def test_one_class_labels_warn(one_class_labels):
    with pytest.warns(DegenerateDataWarning, match="class 0"):
        fed = fedprox.federation(0.5, 0.5, num_clients=4, seed=0, max_client_size=50)
    assert check_labels(fed.train.y, fed.num_classes)[1] >= DOMINANT_SHARE


def test_the_paper_setting_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DegenerateDataWarning)
        fed = fedprox.federation(0.5, 0.5, num_clients=4, seed=0, max_client_size=50)
    assert check_labels(fed.train.y, fed.num_classes)[1] < DOMINANT_SHARE


def test_pflt_prints_the_warning_as_one_line(tmp_path, capsys, one_class_labels):
    assert main(["run", "--algorithm", "fedavg", "--clients", "4", "--clients-per-round", "2",
                 "--rounds", "1", "--max-client-size", "20",
                 "--no-progress", "--out", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if "degenerate" in ln]
    assert len(lines) == 1 and lines[0].startswith("pflt run: warning: ")
    assert "Warning:" not in err        # not Python's two-line default format
