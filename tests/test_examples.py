"""Every file of examples/ runs (at a tiny size): the run, sweep and paper-reproduction
configurations through pflt.cli.main, the custom-model script through its main()."""

import csv
import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from pflt.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TINY = {"rounds": 1, "clients": 6, "local_rounds": 1, "clients_per_round": 3, "eval_every": 1}


def _shrink(text: str) -> str:
    """The example with tiny sizes and one seed (everything else unchanged)."""
    for key, value in TINY.items():
        text = re.sub(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    return re.sub(r"(?m)^seed = \[.*\]$", "seed = [0]", text)


def test_every_example_is_covered_by_a_test():
    covered = {"run_pfedme.toml", "sweep_algorithms.toml", "pfedme_table1_synthetic.toml",
               "custom_model.py", "README.md",
               "plugin_example.py"}   # tests/test_extending_doc.py, tests/pflt/test_plugin_cli.py
    assert {p.name for p in EXAMPLES.iterdir() if not p.name.startswith(".")} <= covered


def test_run_config_example(tmp_path):
    out = tmp_path / "run"
    argv = ["run", "--config", str(EXAMPLES / "run_pfedme.toml"), "--out", str(out),
            "--no-progress", "--rounds", "1", "--clients", "6", "--local-rounds", "1",
            "--clients-per-round", "3"]
    assert main(argv) == 0
    hp = json.loads((out / "history.json").read_text())["config"]["hyperparameters"]
    assert hp["lam"] == 20.0 and hp["inner_steps"] == 5  # from the file, not overridden


@pytest.mark.parametrize("name,configs", [("sweep_algorithms.toml", 3),
                                          ("pfedme_table1_synthetic.toml", 3)])
def test_sweep_examples(tmp_path, capsys, name, configs):
    cfg = tmp_path / name
    cfg.write_text(_shrink((EXAMPLES / name).read_text()))
    out = tmp_path / "sweep"
    assert main(["sweep", str(cfg), "--out", str(out), "--no-progress"]) == 0
    rows = list(csv.DictReader(open(out / "summary_by_config.csv")))
    assert len(rows) == configs
    assert main(["compare", str(out), "--metric", "*_accuracy", "--out", str(tmp_path / "c")]) == 0
    assert f"{configs} configuration(s)" in capsys.readouterr().out


def test_table1_example_has_the_settings_of_the_reproduction_code():
    from verification.experiments.pfedme_table1 import (COMMON, PAPER_ROUNDS, PFEDME_COMMON,
                                                        TABLE1_SETTINGS)

    raw = tomllib.loads((EXAMPLES / "pfedme_table1_synthetic.toml").read_text())
    s = TABLE1_SETTINGS["mlr"]
    assert raw["rounds"] == PAPER_ROUNDS and raw["model"] == "mlr" and raw["clients"] == 100
    assert all(raw[k] == v for k, v in COMMON.items())
    algs = raw["algorithms"]
    assert algs["fedavg"]["lr"] == s["fedavg_lr"]
    assert (algs["perfedavg"]["inner_lr"], algs["perfedavg"]["lr"]) == s["perfedavg"]
    assert algs["pfedme"]["lam"] == s["lam"] and algs["pfedme"]["lr"] == s["lr"]
    assert all(algs["pfedme"][k] == v for k, v in PFEDME_COMMON.items())


def test_custom_model_example(capsys):
    spec = importlib.util.spec_from_file_location("custom_model", EXAMPLES / "custom_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    last = module.main(["--rounds", "1", "--clients", "6"])
    assert 0.0 <= last["personalized_accuracy"] <= 1.0
    assert "personalized_accuracy" in capsys.readouterr().out
