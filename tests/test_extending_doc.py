"""docs/extending.md, executed: its plugin file is assembled from the doc's code blocks in a
temporary directory (and is examples/plugin_example.py), its shell commands run as written
(``pflt …`` through pflt.cli.main, ``export`` through the environment, ``python -m pytest``
by running the doc's test file's tests in this process), nothing inside the package edited."""

import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

from pflt.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"
EXAMPLE = ROOT / "examples" / "plugin_example.py"


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every fenced block."""
    return re.findall(r"```(\w+)\n(.*?)```", text, flags=re.S)


def files_of_the_doc() -> dict[str, str]:
    """File name -> text: python/toml blocks opening with ``# <name>`` are that file, the
    other python blocks (sections 2–4) make up ``my_plugin.py``."""
    files: dict[str, str] = {"my_plugin.py": ""}
    for lang, code in blocks(DOC.read_text()):
        first = code.splitlines()[0]
        named = re.fullmatch(r"# ([\w.]+\.(py|toml))", first)
        if named:
            files[named.group(1)] = code
        elif lang == "python":
            files["my_plugin.py"] += code + "\n\n"
    return files


def test_the_doc_plugin_is_the_example_file():
    assert files_of_the_doc()["my_plugin.py"].split() == EXAMPLE.read_text().split()


def _run_test_file(path: Path) -> int:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
        tests = [getattr(module, n) for n in dir(module) if n.startswith("test_")]
        for test in tests:
            test()
    finally:
        sys.modules.pop(path.stem, None)
    return len(tests)


def test_the_walk_through_runs_as_written(isolated_plugins, tmp_path, monkeypatch, capsys):
    for name, text in files_of_the_doc().items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))       # `from my_plugin import …` (pytest's
    bash = [code for lang, code in blocks(DOC.read_text()) if lang == "bash"]  # rootdir)
    assert bash, "the doc has no commands"
    ran = []
    for line in (ln.split("  #")[0].strip() for ln in bash[-1].splitlines()):
        if line.startswith("export "):
            key, value = line[len("export "):].split("=", 1)
            monkeypatch.setenv(key, value)
        elif line.startswith("pflt "):
            argv = shlex.split(line)[1:]
            argv += ["--no-progress"] if argv[0] in ("run", "sweep", "flower-sim", "verify") \
                and "--help" not in argv else []
            assert main(argv) == 0, line
        elif line.startswith("python -m pytest"):
            assert _run_test_file(tmp_path / shlex.split(line)[-1]) == 2
        else:
            pytest.fail(f"the test does not know how to run {line!r}")
        ran.append(line.split()[0:2])
    out = capsys.readouterr().out
    assert "my-fedprox" in out and "MLSys 2020" in out          # pflt list, run --help
    assert (tmp_path / "runs/mine/history.json").is_file()
    assert len(list((tmp_path / "runs/sweep-mine").glob("*/history.json"))) == 3
    assert (tmp_path / "runs/mine-flower").is_dir()
    report = (tmp_path / "verify_mine/report.md").read_text()
    assert "mine.gd_strongly_convex" in report and "HOLDS" in report
    assert ["pflt", "flower-sim"] in ran and ["pflt", "verify"] in ran


def test_a_misspelt_plugin_is_one_line(isolated_plugins, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["list", "algorithms", "--plugin", "my_plugn.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "pflt list: error: plugin 'my_plugn.py' could not be loaded: FileNotFoundError")


def _doc_files_in(tmp_path, monkeypatch):
    for name, text in files_of_the_doc().items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("my_momentum", "my_plugin"):      # imported afresh: they register on import
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_server_state_stays_on_the_server(isolated_plugins, tmp_path, monkeypatch, capsys):
    """Section 3b: the momentum buffer is server state and is not sent (a newcomer who left
    out ``send=`` doubled the downlink without noticing)."""
    import runpy

    _doc_files_in(tmp_path, monkeypatch)
    runpy.run_path(str(tmp_path / "what_is_sent.py"), run_name="__main__")
    assert capsys.readouterr().out.strip() == "['global']"
    import dataclasses

    from algorithms.engine.contract import sent_models
    from my_momentum import MyFedAvgM
    from synthetic import fedprox
    from algorithms.engine.models import build_model

    fed = fedprox.federation(0.5, 0.5, seed=0, num_clients=6)
    model = build_model("mlr", fed)
    alg = MyFedAvgM(clients_per_round=3)
    state = alg.init(fed, model, 0)
    unsent = dataclasses.replace(alg.first_phase(state, fed, model), send=None)
    assert sorted(sent_models(alg, state, unsent)) == ["global", "velocity"]   # the mistake


def test_momentum_zero_is_fedavg_and_the_contract_holds(isolated_plugins, tmp_path,
                                                        monkeypatch):
    import torch

    from algorithms import get_algorithm, run
    from algorithms.engine.models import build_model
    from algorithms.testing import contract_battery
    from synthetic import fedprox

    _doc_files_in(tmp_path, monkeypatch)
    from my_momentum import MyFedAvgM

    fed = fedprox.federation(0.5, 0.5, seed=0, num_clients=6, dtype=torch.float64)
    model = build_model("mlr", fed)
    hp = {"clients_per_round": 3, "local_rounds": 2}

    def final(alg):
        return run(alg, fed, model, rounds=3, seed=1, eval_every=3,
                   progress=False).state.models["global"]

    plain = final(get_algorithm("fedavg")(**hp))
    same = final(MyFedAvgM(momentum=0.0, server_lr=1.0, **hp))
    moved = final(MyFedAvgM(momentum=0.9, server_lr=1.0, **hp))
    for k in plain:
        # float64; w − (w − mean) = mean up to one rounding per coordinate and round
        assert torch.allclose(same[k], plain[k], rtol=0, atol=1e-12)
    assert max(float((moved[k] - plain[k]).abs().max()) for k in plain) > 1e-6
    results = contract_battery(MyFedAvgM)
    assert results["reference_loop"] == "ok" and results["resume"] == "ok"
