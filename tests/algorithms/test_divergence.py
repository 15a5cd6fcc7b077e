"""The divergence contract of the runner (issue 18): non-finite state, non-finite or
exploded loss (> EXPLOSION_FACTOR × max(round-0 loss, 1)) and internal NaN guards all stop
the run with DivergenceError naming the round and the model, history kept; the CLI exits 1."""

import json
import re

import pytest

from algorithms.engine import runner
from algorithms.engine.runner import EXPLOSION_FACTOR, DivergenceError, divergence
from pfl_theory.validation import NonFiniteValueError
from pflt.cli import main

SMALL = ["--clients", "10", "--max-client-size", "40", "--rounds", "3", "--no-progress"]


def test_divergence_criterion_at_its_threshold():
    initial = {"global_loss": 2.0}
    below = {"round": 4, "global_loss": EXPLOSION_FACTOR * 2.0}
    above = {"round": 4, "global_loss": EXPLOSION_FACTOR * 2.0 * 1.01}
    assert divergence(below, initial) is None
    reason, model = divergence(above, initial)
    assert model == "global" and "after round 4" in reason
    # the reference is max(L0, 1): a tiny initial loss does not make ordinary losses explode
    assert divergence({"round": 1, "global_loss": 5.0}, {"global_loss": 1e-6}) is None
    assert divergence({"round": 1, "local_train_loss": float("nan")}, {})[1] == "local"


@pytest.mark.parametrize("algorithm", ["fedavg", "apfl", "ifca"])
def test_huge_step_exits_1_naming_round_and_model(algorithm, tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["run", "--algorithm", algorithm, "--lr", "1e8", "--out", str(out), *SMALL])
    err = capsys.readouterr().err
    assert code == 1, err
    assert re.search(r"of model '\w+' (is \S+ )?after round [123]", err) and "diverged" in err
    saved = json.loads((out / "history.json").read_text())
    assert saved["initial_evaluation"]  # kept


def test_cgpfl_former_default_step_is_caught(tmp_path, capsys):
    """lr = 1 (β·λ = 12) was the old default: test loss 1e6 after round 1, exit 0. Now exit 1."""
    code = main(["run", "--algorithm", "cgpfl", "--lr", "1", "--out", str(tmp_path / "o"),
                 *SMALL])
    assert code == 1 and "'personalized'" in capsys.readouterr().err


def test_internal_nan_guard_reports_through_the_same_path(tmp_path, capsys, monkeypatch):
    """A k-means / prox guard (NonFiniteValueError inside a round) is a divergence, exit 1
    naming the round — not a user error (exit 2)."""
    from algorithms.methods.clustered.cgpfl import CGPFL

    def bad_kmeans(self, uploads, k, seed):
        raise NonFiniteValueError("points contain NaN or inf")

    monkeypatch.setattr(CGPFL, "_kmeans", bad_kmeans)
    code = main(["run", "--algorithm", "cgpfl", "--out", str(tmp_path / "o"), *SMALL])
    err = capsys.readouterr().err
    assert code == 1 and "round 1 produced non-finite values" in err


def test_divergence_error_carries_round_model_and_history():
    hist = runner.History({})
    exc = DivergenceError(3, hist, model="global")
    assert exc.round == 3 and exc.model == "global" and exc.history is hist
    assert "of model 'global' after round 3" in str(exc)
