import json

import pytest

from pflt.cli import main

SMALL = ["--clients", "12", "--rounds", "2", "--local-rounds", "2", "--inner-steps", "2",
         "--clients-per-round", "3", "--no-progress", "--synthetic-alpha", "0.5"]


def test_run_pfedme_writes_history_with_named_models(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "--algorithm", "pfedme", "--out", str(out)] + SMALL) == 0
    printed = capsys.readouterr().out
    assert "personalized" in printed and "global" in printed and "local" in printed
    hist = json.loads((out / "history.json").read_text())
    assert hist["config"]["hyperparameters"]["lam"] == 20.0  # the paper's synthetic λ
    entry = hist["entries"][-1]
    assert entry["round"] == 2
    for key in ("personalized_accuracy", "global_accuracy", "local_accuracy"):
        assert 0.0 <= entry[key] <= 1.0
    assert (out / "history.csv").exists() and (out / "summary.json").exists()


def test_hyperparameter_flags_reach_the_algorithm(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "--algorithm", "pfedme", "--lam", "7.5", "--beta", "2",
                 "--out", str(out)] + SMALL) == 0
    hp = json.loads((out / "history.json").read_text())["config"]["hyperparameters"]
    assert hp["lam"] == 7.5 and hp["beta"] == 2.0 and hp["local_rounds"] == 2


@pytest.mark.parametrize("argv,message", [
    (["--algorithm", "nope"], "unknown algorithm"),
    (["--data", "imagenet"], "unknown dataset"),
    (["--lam", "0"], "lam must be > 0"),
    (["--lam", "-3"], "lam must be > 0"),
    (["--clients-per-round", "50"], "clients_per_round"),
    (["--inner-steps", "0"], "inner_steps"),
    (["--local-rounds", "0"], "local_rounds"),
    (["--batch-size", "0"], "batch_size"),
    (["--algorithm", "fedavg", "--lam", "3"], "do not apply to fedavg"),
    (["--rounds", "0"], "--rounds"),
    (["--data", "mnist:/nonexistent/pflt-data"], "pflt data fetch mnist"),
])
def test_user_errors_exit_2_without_traceback(tmp_path, capsys, argv, message):
    base = ["run", "--out", str(tmp_path / "x"), "--clients", "12", "--rounds", "1",
            "--no-progress"]
    assert main(base + argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_divergence_exits_1_and_names_the_round(tmp_path, capsys):
    code = main(["run", "--algorithm", "fedavg", "--lr", "1e38", "--out", str(tmp_path / "d"),
                 "--clients", "12", "--rounds", "3", "--local-rounds", "3", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "non-finite parameters of model 'global' after round 1" in err


def test_help_documents_every_option(capsys):
    assert main(["run", "--help"]) == 0
    common = capsys.readouterr().out
    assert main(["run", "--algorithm", "pfedme", "--help"]) == 0
    text = capsys.readouterr().out
    for opt in ("--model", "--data", "--out"):
        assert opt in common and opt in text
    for opt in ("--lam", "--personal-lr", "--inner-steps", "--local-rounds", "--batch-size",
                "--beta", "--clients-per-round"):
        assert opt in text


def test_help_with_a_config_shows_its_algorithm_and_values(tmp_path, capsys):
    cfg = tmp_path / "f.toml"
    cfg.write_text('algorithm = "ditto"\nrounds = 7\nclients = 12\n'
                   '[hyperparameters]\nlam = 0.5\n')
    assert main(["run", "--config", str(cfg), "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())       # argparse's wrapping undone
    assert "ditto hyper-parameters:" in text and "pfedme hyper-parameters" not in text
    assert "--rounds ROUNDS communication rounds T (default: the algorithm's own schedule " \
        "where it has one — PPFE: --total-rounds, all its stages — else 50) [f.toml: 7]" in text
    assert "--clients CLIENTS number of clients N (default 100) [f.toml: 12]" in text
    assert "global model (default: 0.1) [f.toml: 0.5]" in text
    assert "--seed SEED training seed" in text and "[f.toml: 0]" not in text  # not in the file
    # the command line's algorithm wins (the file's lam does not apply to it: not shown)
    assert main(["run", "--config", str(cfg), "--algorithm", "fedavg", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "fedavg hyper-parameters:" in text and "[f.toml: 0.5]" not in text
    assert "[f.toml: 7]" in text
    # a file that would not run is the same one-line error as for the run itself
    cfg.write_text("bogus = 1\n")
    assert main(["run", "--config", str(cfg), "--help"]) == 2
    assert "unknown key 'bogus'" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["x%(prog)s%d.toml", "y%d.toml", "100%.toml", "%%.toml"])
@pytest.mark.parametrize("algorithm", [[], ["--algorithm", "pfedme"]])
def test_help_with_a_config_named_with_percent_signs(tmp_path, capsys, name, algorithm):
    """argparse %-formats its epilog when it holds ``%(prog)``: ``x%(prog)s%d.toml`` was a
    TypeError traceback; the name is shown as it is."""
    cfg = tmp_path / name
    cfg.write_text('algorithm = "fedavg"\nrounds = 7\n')
    assert main(["run", "--config", str(cfg), *algorithm, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"[{name}: 7]" in out and f"the value set by --config {name}," in out


@pytest.mark.parametrize("depth", [3000, 100_000])
@pytest.mark.parametrize("command", [["run"], ["run", "--help"], ["flower-sim"]])
def test_a_deeply_nested_config_is_one_line(tmp_path, capsys, depth, command):
    """A 3,000-deep nested TOML list was a RecursionError traceback inside tomllib."""
    cfg = tmp_path / "deep.toml"
    cfg.write_text("x = " + "[" * depth + "]" * depth + "\n")
    assert main([*command, "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"pflt {command[0]}: error: {cfg} is nested too deeply to be a config file"


def _registered():
    from algorithms.engine.base import registry
    return sorted(registry())


@pytest.mark.parametrize("name", _registered())
def test_every_registered_algorithm_runs_from_the_cli(name, tmp_path, capsys):
    out = tmp_path / name
    code = main(["run", "--algorithm", name, "--model", "dnn", "--clients", "12", "--rounds", "2",
                 "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    entry = json.loads((out / "history.json").read_text())["entries"][-1]
    accuracies = [v for k, v in entry.items() if k.endswith("_accuracy") and isinstance(v, float)]
    assert accuracies and all(0.0 <= a <= 1.0 for a in accuracies)


def test_all_finite_checks_every_block():
    import torch

    from pflt.commands.run import all_finite

    x = torch.zeros(10, 3)
    assert all_finite(x, rows=3)
    for row, bad in ((0, float("nan")), (5, float("inf")), (9, -float("inf"))):
        y = x.clone()
        y[row, 1] = bad                       # first, a middle and the last (short) block
        assert not all_finite(y, rows=3), (row, bad)
