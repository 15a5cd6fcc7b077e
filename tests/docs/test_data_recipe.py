"""docs/data.md's first real-data recipe (the block marked "needs the Fashion-MNIST files and
minutes of CPU") run as written, in the slow tier: each ``pflt`` line of the block exits 0
and writes the outputs it names, and FedAvg's accuracy rises over its run, as the page says.
Skipped, saying why, when Fashion-MNIST is not on this machine."""

from __future__ import annotations

import csv
import shlex
from pathlib import Path

import pytest

from pflt.cli import main

ROOT = Path(__file__).resolve().parents[2]
MARK = "needs the Fashion-MNIST files and minutes of CPU"


def _recipe() -> list[list[str]]:
    import importlib.util
    import sys
    spec = importlib.util.spec_from_file_location("docs_code_blocks",
                                                  Path(__file__).with_name("test_code_blocks.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    found = [b for b in module.blocks(ROOT / "docs" / "data.md") if b.skip == MARK]
    assert len(found) == 1, "docs/data.md has no (or several) real-data recipe blocks"
    return [shlex.split(line.split("#", 1)[0]) for line in found[0].code.splitlines()
            if line.strip().startswith("pflt ")]


def test_the_recipe_block_is_found_and_runs_three_commands():
    lines = _recipe()
    assert [ln[1] for ln in lines] == ["run", "run", "compare"]


@pytest.mark.slow
def test_the_real_data_recipe_runs_as_written(tmp_path, monkeypatch):
    from synthetic.real_data.home import find_dataset
    if find_dataset("fmnist") is None:
        pytest.skip("Fashion-MNIST is not on this machine (apt-get install dataset-fashion-mnist, "
                    "or pflt data fetch fmnist)")
    monkeypatch.chdir(tmp_path)
    for argv in _recipe():
        assert main(argv[1:] + (["--no-progress"] if argv[1] == "run" else [])) == 0, argv
    rows = list(csv.DictReader(open(tmp_path / "runs/fmnist-fedavg/history.csv")))
    acc = [float(r["global_accuracy"]) for r in rows if r.get("global_accuracy")]
    assert len(acc) >= 2 and acc[-1] > acc[0], acc
    assert any((tmp_path / "runs/fmnist-cmp").iterdir())
