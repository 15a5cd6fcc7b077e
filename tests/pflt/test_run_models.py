"""``pflt run --model cnn3|resnet18-gn`` (the PPFE and PLGU networks) end to end on the
embedded MNIST subset, and their bad input: one line, exit 2."""

import json

import pytest

from pflt.cli import main

TINY = ["--data", "mnist5k", "--clients", "4", "--rounds", "1", "--max-client-size", "12",
        "--no-progress", "--local-rounds", "2", "--clients-per-round", "4"]


@pytest.mark.parametrize("model,hidden,algorithm", [("cnn3", "8,6", "ppfe"),
                                                    ("resnet18-gn", "2", "fedavg")])
def test_runs_and_records_the_model(model, hidden, algorithm, tmp_path, capsys):
    out = tmp_path / "run"
    extra = ["--total-rounds", "4"] if algorithm == "ppfe" else []
    code = main(["run", "--algorithm", algorithm, "--model", model, "--hidden", hidden,
                 "--out", str(out), *TINY, *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"model={model}" in err
    assert json.loads((out / "run_options.json").read_text())["model"] == model
    entries = json.loads((out / "history.json").read_text())["entries"]
    accuracies = [v for k, v in entries[-1].items()
                  if k.endswith("_accuracy") and isinstance(v, float)]
    assert accuracies and all(0.0 <= a <= 1.0 for a in accuracies)


@pytest.mark.parametrize("args,message", [
    (["--model", "cnn3", "--hidden", "8,6,4"], "takes two --hidden widths"),
    (["--model", "resnet18-gn", "--hidden", "8,8"], "takes one --hidden width"),
    (["--model", "resnet18-gn", "--hidden", "3"], "must be even"),
    (["--model", "resnet18-gn", "--data", "synthetic"], "square image features"),
    (["--model", "resnet", "--data", "mnist5k"], "invalid choice"),
])
def test_bad_model_options_are_one_line(args, message, tmp_path, capsys):
    try:
        code = main(["run", "--out", str(tmp_path / "r"), "--clients", "4", "--rounds", "1",
                     "--no-progress", *args])
    except SystemExit as exc:      # argparse's own errors (an unknown --model choice)
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
