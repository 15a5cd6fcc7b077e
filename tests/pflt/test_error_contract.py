"""The error contract of the CLI (issue 18): every anticipated user error is one line on
stderr, ``pflt <command>: error: …``, exit code 2, no traceback; nothing is silently
recorded differently from what ran."""

import json

import pytest

from pflt.cli import main

TINY = ["--clients", "10", "--rounds", "1", "--max-client-size", "30", "--no-progress"]


def _one_line_exit_2(argv, capsys, expected):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse errors
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and "error" in ln]
    assert code == 2, err
    assert len(lines) == 1 and expected in lines[0], err
    assert "Traceback" not in err


RUN_ERRORS = [
    (["--device", "cuda:99"], "--device"),
    (["--device", "banana"], "--device"),
    (["--threads", "0"], "--threads"),
    (["--threads", "100000"], "--threads"),
    (["--clients", "99999999999999999999999"], "--clients"),
    (["--clients", "50000000"], "GiB"),
    (["--batch-size", "2000000000"], "GiB"),
    (["--hidden", "0", "--model", "dnn"], "--hidden"),
    (["--hidden", "-3", "--model", "mlp"], "--hidden"),
    (["--hidden", "8", "--model", "mlr"], "does not apply"),
    (["--hidden", "8,8", "--model", "dnn"], "one --hidden"),
    (["--seed", "-1"], "--seed"),
    (["--seed", "1" + "0" * 30], "--seed"),
    (["--data-seed", "-5"], "--data-seed"),
    (["--l2", "nan"], "--l2"),
    (["--rounds", "0"], "--rounds"),
    (["--eval-every", "0"], "--eval-every"),
    (["--checkpoint-every", "0"], "--checkpoint-every"),
    (["--lr", "inf", "--algorithm", "fedavg"], "lr"),
    (["--local-rounds", "99999999999999"], "too large"),
    (["--clients", "abc"], "invalid int"),
    (["--dtype", "float16"], "invalid choice"),
    (["--model", "resnet"], "invalid choice"),
    (["--algorithm", "plgu-grep", "--model", "mlr"], "representation layer"),
    (["--data", "digits", "--clients", "2000"], "cannot feed"),
    (["--size-range", "10", "5", "--data", "digits"], "LO <= HI"),
    (["--synthetic-beta", "1e308"], "NaN or inf in float32 (--synthetic-beta too large?)"),
    # the feature-shift options were blamed on --synthetic-alpha/beta
    (["--data", "digits", "--partition", "feature-shift", "--shift-contrast", "1e308"],
     "NaN or inf in float32 (--shift-contrast too large?)"),
    # data options the chosen data would ignore (they were silently recorded as given)
    (["--partition", "dirichlet"], "--partition do not apply to --data synthetic"),
    (["--dirichlet-alpha", "0.1", "--data", "synthetic-iid"], "--dirichlet-alpha do not apply"),
    (["--data", "digits", "--synthetic-alpha", "1"], "--synthetic-alpha do not apply"),
    (["--data", "digits", "--partition", "dirichlet", "--size-range", "5", "9"],
     "--size-range do not apply to --data digits --partition dirichlet"),
    (["--data", "digits", "--dirichlet-alpha", "0.1"], "--dirichlet-alpha do not apply"),
]


@pytest.mark.parametrize("extra,expected", RUN_ERRORS, ids=[" ".join(e) for e, _ in RUN_ERRORS])
def test_run_user_errors_are_one_line_exit_2(extra, expected, tmp_path, capsys):
    _one_line_exit_2(["run", "--out", str(tmp_path / "o"), *TINY, *extra], capsys, expected)


TOML_ERRORS = [
    ('dtype = "float16"', "invalid choice"),
    ('model = "resnet"', "invalid choice"),
    ("rounds = 2.5", "invalid int"),
    ("rounds = true", "invalid value"),
    ('rounds = "many"', "invalid int"),
    ("clients = [1, 2]", "single value"),
    ("hidden = 0\nmodel = \"dnn\"", "--hidden"),
    ("no_progress = 3", "true or false"),
    ("size_range = [1]", "list of 2"),
    ("[hyperparameters]\nlam = \"big\"", "invalid float"),
    ("[hyperparameters]\nlam = -1", "lam must be > 0"),
    ("bogus = 1", "unknown key"),
    ("[hyperparameters]\nnope = 1", "'nope in [hyperparameters]'"),
    ("rounds = [", "not valid TOML"),
    ('partition = "dirichlet"', "do not apply to --data synthetic"),
]


@pytest.mark.parametrize("text,expected", TOML_ERRORS, ids=[t for t, _ in TOML_ERRORS])
def test_toml_values_are_validated_like_the_command_line(text, expected, tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text + "\n")
    _one_line_exit_2(["run", "--config", str(cfg), "--out", str(tmp_path / "o"), *TINY],
                     capsys, expected)


def test_config_and_out_of_the_wrong_kind(tmp_path, capsys):
    _one_line_exit_2(["run", "--config", str(tmp_path), "--out", str(tmp_path / "o"), *TINY],
                     capsys, "not a file")
    (tmp_path / "file").write_text("x")
    _one_line_exit_2(["run", "--out", str(tmp_path / "file"), *TINY], capsys,
                     "not a directory")
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00")
    _one_line_exit_2(["run", "--config", str(tmp_path / "binary.toml"), *TINY], capsys,
                     "UTF-8")
    _one_line_exit_2(["run", "--resume", str(tmp_path / "file")], capsys, "run_options")


def test_toml_dtype_float64_is_what_runs_and_is_recorded(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('dtype = "float64"\n')
    out = tmp_path / "o"
    assert main(["run", "--config", str(cfg), "--out", str(out), *TINY]) == 0
    hist = json.loads((out / "history.json").read_text())
    assert hist["config"]["dtype"] == "torch.float64"
    assert json.loads((out / "run_options.json").read_text())["dtype"] == "float64"


SWEEP_ERRORS = [
    ("[sweep]\nseed = 3", "non-empty list"),
    ("[sweep]\nout = [\"/tmp/elsewhere\"]", "cannot set out"),
    ('out = "/tmp/elsewhere"\n[sweep]\nseed = [0]', "cannot be set"),
    ("[sweep]\nrounds = [\"x\"]", "invalid int"),
    ("[sweep]\nnope = [1]", "unknown option"),
    ("sweep = 3", "table of lists"),
    ("[sweep", "not valid TOML"),
    ("rounds = 1", "no [sweep]"),
]


@pytest.mark.parametrize("text,expected", SWEEP_ERRORS, ids=[t for t, _ in SWEEP_ERRORS])
def test_malformed_sweep_files_are_one_line_errors(text, expected, tmp_path, capsys):
    cfg = tmp_path / "s.toml"
    cfg.write_text(text + "\n")
    _one_line_exit_2(["sweep", str(cfg), "--out", str(tmp_path / "sw"), "--no-progress"],
                     capsys, expected)
    assert not (tmp_path / "elsewhere").exists()


SELECT_ERRORS = [
    (["select-k", "--planted", "100000000,3,1000000"], "fit in memory"),
    (["select-k", "--planted", "20,3,5", "--restarts", "999999999999"], "--restarts"),
    (["select-k", "--planted", "20,3,5", "--separation", "inf"], "--separation"),
    (["select-k", "--planted", "20,3,5", "--mu", "1e308"], "overflow"),
    (["select-stages", "--gamma", "0.1", "--n", "100", "--kappa0", "1e300"], "float64"),
    (["select-stages", "--gamma", "0.1", "--n", "100", "--t-max", "99999999999999"], "t_max"),
    (["select-stages", "--gamma", "nan", "--n", "100"], "gamma"),
]


@pytest.mark.parametrize("argv,expected", SELECT_ERRORS, ids=[" ".join(a) for a, _ in SELECT_ERRORS])
def test_selection_inputs_that_overflow_are_one_line_errors(argv, expected, capsys):
    _one_line_exit_2(argv, capsys, expected)


def test_unanticipated_exception_keeps_its_traceback(monkeypatch):
    """A bug (here a RuntimeError raised inside a sub-command) is not turned into a user
    error."""
    import pflt.commands.run as run_cmd

    def boom(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(run_cmd, "run", boom)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["run", "--no-progress"])


# ---- a reader that closes standard output early (`pflt … | head -1`) -------------------

@pytest.mark.parametrize("argv", [["select-k", "--planted", "40,3,5", "--k-max", "4"],
                                  ["--help"], ["list"]], ids=lambda a: " ".join(a))
def test_stdout_closed_by_its_reader_ends_quietly_with_141(argv):
    # the read end is closed before the child writes (its start-up imports torch, seconds),
    # so its first write or its final flush meets EPIPE: deterministic, unlike a `head -1`
    # that may read everything first
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pflt.cli import CLOSED_STDOUT

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen([sys.executable, "-m", "pflt", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=root)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=300)
    assert err == ""    # before: `pflt select-k: error: [Errno 32] Broken pipe`, exit 2
    # argparse's own help writer ignores OSError (the help is lost either way): exit 0 there
    assert code == (0 if argv == ["--help"] else CLOSED_STDOUT) and CLOSED_STDOUT == 141


def test_without_the_handler_a_closed_stdout_is_an_error_line(monkeypatch, capsys):
    # what the handler above replaces: BrokenPipeError is an OSError, which the error
    # contract would report as `pflt list: error: [Errno 32] Broken pipe` with exit 2
    import pflt.cli as cli
    import pflt.commands.list as list_cmd

    def closed(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(list_cmd, "run", closed)
    monkeypatch.setattr(cli, "_stdout_to_devnull", lambda: None)  # keep the test's own fd 1
    assert main(["list"]) == cli.CLOSED_STDOUT
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cli, "_anticipated", lambda exc: isinstance(exc, OSError))
    assert main(["list"]) == 2
    assert capsys.readouterr().err == "pflt list: error: [Errno 32] Broken pipe\n"


OUT_IS_A_FILE = [
    ["verify", "--quick", "--only", "pfedme.beta_extrapolation", "--no-progress"],
    ["figures", "--quick", "--only", "pfedme_rates", "--no-progress"],
    ["compare", "RUN"],
    ["flower-sim", *TINY],
]


@pytest.mark.parametrize("argv", OUT_IS_A_FILE, ids=[a[0] for a in OUT_IS_A_FILE])
def test_out_that_is_a_file_is_named_as_such(argv, tmp_path, capsys):
    """Every command writing into --out says what is wrong with a file there (it said
    ``OUT: File exists`` from mkdir for verify, figures and compare), before any work."""
    if argv[0] == "flower-sim":
        pytest.importorskip("flwr")
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "file").write_text("x")
    argv = [str(run) if a == "RUN" else a for a in argv]
    _one_line_exit_2([*argv, "--out", str(tmp_path / "file")], capsys,
                     "exists and is not a directory")


def test_data_options_that_apply_are_accepted(tmp_path):
    # the counterpart of the "do not apply" errors: each option with the data it partitions
    base = ["run", "--data", "digits", "--clients", "10", "--rounds", "1", "--no-progress"]
    assert main([*base, "--partition", "dirichlet", "--dirichlet-alpha", "0.1",
                 "--out", str(tmp_path / "d")]) == 0
    assert main([*base, "--size-range", "5", "9", "--classes-per-client", "3",
                 "--out", str(tmp_path / "l")]) == 0
    assert main(["run", *TINY, "--synthetic-alpha", "1", "--partition", "label-skew",
                 "--out", str(tmp_path / "s")]) == 0      # defaults may be repeated


EMPTY_OUT = [["run", *TINY], ["sweep", "S.toml"], ["verify", "--quick"],
             ["figures", "--quick"], ["compare", "RUN"], ["flower-sim", *TINY]]


@pytest.mark.parametrize("argv", EMPTY_OUT, ids=[a[0] for a in EMPTY_OUT])
def test_empty_out_is_refused_not_the_current_directory(argv, tmp_path, capsys, monkeypatch):
    """``--out ""`` (an unset shell variable) wrote into the current directory."""
    monkeypatch.chdir(tmp_path)
    argv = [{"S.toml": str(tmp_path / "s.toml"), "RUN": str(tmp_path)}.get(a, a) for a in argv]
    _one_line_exit_2([*argv, "--out", ""], capsys, "empty output directory")
    assert list(tmp_path.iterdir()) == []
    if argv[0] == "run":                  # the same from a config file
        (tmp_path / "c.toml").write_text('out = ""\n')
        _one_line_exit_2([*argv, "--config", str(tmp_path / "c.toml")], capsys,
                         "empty output directory")
        assert [p.name for p in tmp_path.iterdir()] == ["c.toml"]
