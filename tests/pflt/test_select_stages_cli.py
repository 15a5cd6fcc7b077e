"""Tests of ``pflt select-stages``."""

import json
import math

import numpy as np
import pytest

from pflt.cli import main


def test_json_output_matches_grid_search(capsys):
    assert main(["select-stages", "--gamma", "0.2", "--kappa0", "0.3", "--n", "100",
                 "--t-max", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    t = np.arange(1, 41)
    phi = np.exp(-2 * 0.04 * t) + 0.3 * np.sqrt(t / 100)
    assert out["t_star"] == int(np.argmin(phi)) + 1
    assert len(out["curve"]) == 40 and math.isclose(out["curve"][0]["bound"], phi[0])


def test_table_and_kappa0_from_ingredients(capsys):
    assert main(["select-stages", "--gamma", "0.2", "--n", "100", "--loss-bound", "2",
                 "--coef-bound", "1", "--eps-alpha", "0.1"]) == 0
    text = capsys.readouterr().out
    kappa0 = 2 * math.sqrt(math.log(11) / 2)  # B sqrt(log(ceil(A/eps)+1)/2)
    assert f"kappa0={kappa0:.6g}" in text and "<- T*" in text and "T* =" in text


def test_user_error_exit_code(capsys):
    assert main(["select-stages", "--gamma", "0.7", "--n", "10"]) == 2
    assert "gamma" in capsys.readouterr().err


def _ppfe_run(tmp_path, errors):
    entries = [{"round": 10 * (i + 1), "stage": float(s), "stage_weighted_error": e}
               for i, (s, e) in enumerate(errors)]
    (tmp_path / "history.json").write_text(json.dumps({"config": {}, "entries": entries}))


def test_from_run_estimates_gamma(tmp_path, capsys):
    # stage 1 is seen twice: its last evaluation (0.30) counts; gamma = min(0.5 - eps) = 0.2
    _ppfe_run(tmp_path, [(0, 0.1), (1, 0.35), (1, 0.30), (2, 0.25)])
    assert main(["select-stages", "--from-run", str(tmp_path), "--n", "100", "--kappa0", "0.3",
                 "--t-max", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert math.isclose(out["inputs"]["gamma"], 0.2)
    assert out["inputs"]["stage_errors"] == {"0": 0.1, "1": 0.30, "2": 0.25}
    t = np.arange(1, 41)
    assert out["t_star"] == int(np.argmin(np.exp(-2 * 0.04 * t) + 0.3 * np.sqrt(t / 100))) + 1


def test_from_run_errors(tmp_path, capsys):
    _ppfe_run(tmp_path, [(0, 0.1)])
    assert main(["select-stages", "--from-run", str(tmp_path)]) == 2  # no n (no run_options)
    assert "--n is required" in capsys.readouterr().err
    _ppfe_run(tmp_path, [(0, 0.1), (1, 0.6)])
    assert main(["select-stages", "--from-run", str(tmp_path), "--n", "10"]) == 2
    assert "weak-learning" in capsys.readouterr().err
    (tmp_path / "history.json").write_text(json.dumps({"config": {}, "entries": [{"round": 1}]}))
    assert main(["select-stages", "--from-run", str(tmp_path), "--n", "10"]) == 2
    assert "not a PPFE run" in capsys.readouterr().err


def test_from_run_multiclass_edge_and_observed_accuracy(tmp_path, capsys):
    # C = 10 given explicitly: stage 0 error 0.7 > 1/2 is still better than chance (0.9);
    # SAMME edge (0.9 - eps) * 10/18: min over stages = (0.9 - 0.7) * 10/18
    entries = [{"round": 5, "stage": 0.0, "stage_weighted_error": 0.7, "ensemble_accuracy": 0.3},
               {"round": 10, "stage": 1.0, "stage_weighted_error": 0.2, "ensemble_accuracy": 0.6}]
    (tmp_path / "history.json").write_text(json.dumps({"config": {}, "entries": entries}))
    assert main(["select-stages", "--from-run", str(tmp_path), "--n", "30", "--num-classes", "10",
                 "--t-max", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert math.isclose(out["inputs"]["gamma"], 0.2 * 10 / 18)
    assert "SAMME" in out["inputs"]["gamma_source"]
    assert out["inputs"]["observed_ensemble_test_accuracy"] == {"1": 0.3, "2": 0.6}
    assert main(["select-stages", "--from-run", str(tmp_path), "--n", "30"]) == 2  # C = 2: fails
    assert "no better than chance" in capsys.readouterr().err


def test_from_run_end_to_end(tmp_path, capsys):
    """A real `pflt run --algorithm ppfe` (MLP, 10 classes) read back by select-stages."""
    run = tmp_path / "run"
    assert main(["run", "--algorithm", "ppfe", "--model", "mlp", "--hidden", "8,8", "--data",
                 "synthetic", "--clients", "6", "--rounds", "6", "--total-rounds", "6",
                 "--stages", "3", "--stage-fractions", "1,1,1", "--clients-per-round", "3",
                 "--device", "cpu", "--no-progress", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["select-stages", "--from-run", str(run), "--t-max", "6", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    inputs = out["inputs"]
    assert inputs["num_classes"] == 10 and set(inputs["stage_errors"]) == {"0", "1", "2"}
    assert 0 < inputs["gamma"] <= 0.49 and inputs["n"] > 0
    assert inputs["n_source"].startswith("harmonic mean")
    assert set(inputs["observed_ensemble_test_accuracy"]) == {"1", "2", "3"}
    assert 1 <= out["t_star"] <= 6 and len(out["curve"]) == 6
    # the table form works on the same run
    assert main(["select-stages", "--from-run", str(run), "--t-max", "6"]) == 0
    assert "<- T*" in capsys.readouterr().out


def test_an_optimum_beyond_t_max_is_said_to_be_the_grids_edge(capsys):
    # γ = 0.1, κ₀ = 0.5, n = 200 (the README's example): the continuous optimum is T ≈ 127,
    # so T* = 20 = t_max is where the grid stops, not where the bound is smallest
    assert main(["select-stages", "--gamma", "0.1", "--kappa0", "0.5", "--n", "200"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("T* = 20 ") and "beyond --t-max 20" in last
    assert main(["select-stages", "--gamma", "0.1", "--kappa0", "0.5", "--n", "200",
                 "--t-max", "200"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("T* = 127 ") and "beyond" not in last


# ---- --validation: cross-validated held-out cross-entropy (algorithms.methods.ppfe.ppfe_stage_validation)

TINY_PPFE = ["--model", "mlp", "--hidden", "8,8", "--data", "synthetic", "--clients", "4",
             "--rounds", "6", "--total-rounds", "6", "--stages", "3", "--stage-fractions",
             "1,1,1", "--clients-per-round", "2", "--batch-size", "5", "--local-rounds", "2",
             "--head-steps", "2", "--max-client-size", "40", "--device", "cpu", "--no-progress"]


@pytest.fixture(scope="module")
def ppfe_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("ppfe") / "run"
    assert main(["run", "--algorithm", "ppfe", *TINY_PPFE, "--seed", "3", "--out", str(run)]) == 0
    return run


def test_validation_json_is_the_direct_cross_validation(ppfe_run, capsys):
    from algorithms.engine.base import get_algorithm
    from algorithms.methods.ppfe.ppfe_stage_validation import stage_validation
    from pflt.commands._run_dir import run_federation

    capsys.readouterr()
    assert main(["select-stages", "--from-run", str(ppfe_run), "--validation", "--val-folds", "4",
                 "--val-cv", "2", "--seed", "5", "--json", "--no-progress"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert "2 fold(s) × 6 PPFE rounds" in cap.err            # the cost, up front on stderr
    assert set(out) >= {"t_hat", "ts", "loss_curve", "accuracy_curve", "inputs"}
    inputs = out["inputs"]
    assert (inputs["folds"], inputs["cv"], inputs["seed"], inputs["init_seed"]) == (4, 2, 5, 3)
    assert inputs["t_max"] == 3 and inputs["rounds_per_stage"] == [2, 2, 2]
    assert inputs["hyperparameters"]["stages"] == 3 and inputs["source"].endswith("run_options.json")
    assert out["ts"] == [1, 2, 3]
    loss = np.array(out["loss_curve"])
    assert len(set(loss.tolist())) == 3                       # distinct: argmin ≠ argmax
    assert out["t_hat"] == int(np.argmin(loss)) + 1
    # the same numbers through the shared function, on the federation rebuilt from the run
    fed, model, hp, _ = run_federation(ppfe_run, algorithm="ppfe")
    res = stage_validation(get_algorithm("ppfe")(**hp), fed, model, folds=4, cv=2, seed=5,
                           init_seed=3)
    np.testing.assert_array_equal(loss, res.loss_curve)       # JSON floats round-trip exactly
    np.testing.assert_array_equal(out["accuracy_curve"], res.accuracy_curve)
    assert all(0 <= a <= 1 for a in out["accuracy_curve"]) and np.all(loss > 0)


def test_validation_table_marks_the_argmin(ppfe_run, capsys):
    capsys.readouterr()
    assert main(["select-stages", "--from-run", str(ppfe_run), "--validation", "--val-cv", "1",
                 "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    rows = [ln.split() for ln in lines if ln.split() and ln.split()[0].isdigit()]
    assert [int(r[0]) for r in rows] == [1, 2, 3]
    loss = [float(r[1]) for r in rows]
    marked = [int(r[0]) for r in rows if "<-" in r]
    assert marked == [int(np.argmin(loss)) + 1]
    assert lines[-1].startswith(f"T_hat = {marked[0]} ")


def test_validation_argmax_mutation_is_caught(ppfe_run, capsys, monkeypatch):
    """The JSON check t_hat = argmin of the curve fails when the pick is the argmax."""
    import algorithms.methods.ppfe.ppfe_stage_validation as sv

    monkeypatch.setattr(sv, "pick_t", lambda curve: int(np.argmax(curve)) + 1)
    capsys.readouterr()
    assert main(["select-stages", "--from-run", str(ppfe_run), "--validation", "--val-cv", "1",
                 "--json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["t_hat"] != int(np.argmin(out["loss_curve"])) + 1


def test_validation_errors(ppfe_run, tmp_path, capsys):
    def err(*argv):
        assert main(["select-stages", *argv]) == 2
        text = capsys.readouterr().err.strip()
        assert len(text.splitlines()) == 1, text
        return text

    capsys.readouterr()
    assert "--from-run DIR" in err("--validation")
    assert "no run directory" in err("--from-run", str(tmp_path / "nope"), "--validation")
    assert "--val-folds must lie in [2, 100]" in err("--from-run", str(ppfe_run), "--validation",
                                                    "--val-folds", "1")
    assert "--val-cv must lie in [1, --val-folds = 5]" in err(
        "--from-run", str(ppfe_run), "--validation", "--val-cv", "6")
    assert "--val-cv must lie" in err("--from-run", str(ppfe_run), "--validation", "--val-cv", "0")
    assert "the smallest has 30" in err("--from-run", str(ppfe_run), "--validation",
                                                "--val-folds", "100", "--no-progress")
    fedavg = tmp_path / "fedavg"
    assert main(["run", "--algorithm", "fedavg", "--model", "mlp", "--hidden", "8", "--data",
                 "synthetic", "--clients", "4", "--rounds", "1", "--clients-per-round", "2",
                 "--max-client-size", "40", "--device", "cpu",
                 "--no-progress", "--out", str(fedavg)]) == 0
    capsys.readouterr()
    assert "not PPFE" in err("--from-run", str(fedavg), "--validation")


@pytest.mark.parametrize("stages_seen, possible, expected", [
    # a run stopped in stage 0 of 2 (the Quickstart's --rounds 50 against --total-rounds 160)
    ([(0, 0.1)], 2, ["ended in stage 0 of its 2", "more stages than this run's model"]),
    # every stage done, but T* beyond what the model can train
    ([(0, 0.1), (1, 0.2)], 2, ["more stages than this run's model"]),
    # every stage of the grid done, T* within them: nothing to qualify
    ([(s, 0.2) for s in range(20)], 20, []),
])
def test_from_run_qualifies_a_t_star_the_run_did_not_reach(tmp_path, capsys, stages_seen,
                                                           possible, expected):
    entries = [{"round": 10 * (i + 1), "stage": float(s), "stage_weighted_error": e,
                "num_stages": float(possible)} for i, (s, e) in enumerate(stages_seen)]
    (tmp_path / "history.json").write_text(json.dumps({"config": {}, "entries": entries}))
    argv = ["select-stages", "--from-run", str(tmp_path), "--n", "100", "--kappa0", "0.3"]
    assert main(argv + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["t_star"] > 2 and out["inputs"]["stages_run"] == len(stages_seen)
    assert len(out["notes"]) == len(expected)
    for note, needle in zip(out["notes"], expected):
        assert needle in note
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert ("qualified by the notes below" in text) == bool(expected)
    assert text.count("\nnote: ") == len(expected)


@pytest.mark.parametrize("value, shown", [("x", "'x'"), (1.5, "1.5"), (-0.1, "-0.1"),
                                          (float("nan"), "nan"), (None, "None")])
def test_from_run_a_bad_value_names_the_file(tmp_path, capsys, value, shown):
    # mutation caught: float(entry[...]) unchecked ("could not convert string to float: 'x'"
    # with no file named; 1.5 or NaN silently taken as a stage error; issue 43)
    _ppfe_run(tmp_path, [(0, 0.1), (1, value)])
    assert main(["select-stages", "--from-run", str(tmp_path), "--n", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and (
        f"--from-run: {tmp_path / 'history.json'}: round 20's stage_weighted_error = {shown} "
        f"is not a number in [0, 1]") in err


def test_from_run_an_unreadable_run_options_names_it_instead_of_two_classes(ppfe_run,
                                                                              tmp_path, capsys):
    # mutation caught: run_data's silent fallback (C = 2 and no n) when run_options.json is
    # there but damaged: the bound was computed from defaults the run never had
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(ppfe_run, copy)
    (copy / "run_options.json").write_bytes(bytes(range(256)))
    assert main(["select-stages", "--from-run", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"--from-run: {copy / 'run_options.json'}" in err
