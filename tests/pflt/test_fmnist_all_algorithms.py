"""Every registered algorithm runs 2 rounds on the real Fashion-MNIST (70,000 images, the
Debian ``dataset-fashion-mnist`` copy or any other the data home finds) at N = 40 — with
``--model dnn`` and with CGPFL's CNN (``--model cnn``) — through ``pflt run``, with the
algorithm's default hyper-parameters: exit 0 and every recorded number finite.  Slow tier
(minutes); skipped, saying why, when the data are absent."""

from __future__ import annotations

import json
import math

import pytest

from pflt.cli import main

pytestmark = pytest.mark.slow


def _algorithms() -> list[str]:
    from algorithms.engine.base import registry
    return sorted(registry())


@pytest.fixture(scope="module")
def fmnist() -> str:
    from synthetic.real_data.home import find_dataset

    found = find_dataset("fmnist")
    if found is None:
        pytest.skip("Fashion-MNIST is not on this machine (apt-get install "
                    "dataset-fashion-mnist, or pflt data fetch fmnist)")
    return f"fmnist:{found}"


@pytest.mark.parametrize("model", ["dnn", "cnn"])
@pytest.mark.parametrize("algorithm", _algorithms())
def test_two_rounds_at_n40(algorithm, model, fmnist, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--algorithm", algorithm, "--model", model, "--data", fmnist,
                 "--clients", "40", "--rounds", "2", "--out", str(out), "--no-progress",
                 "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 0, err
    entries = json.loads((out / "history.json").read_text())["entries"]
    assert [e["round"] for e in entries][-1] == 2, err
    for entry in entries:
        for key, value in entry.items():
            if isinstance(value, float):
                assert math.isfinite(value), f"{algorithm}/{model}: {key} = {value}"
