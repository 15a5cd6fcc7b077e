"""A run configured to read its clients' test split says so and its summary records why
(Per-FedAvg's non-default ``adapt_on='test'``, the public pFedMe code's evaluation)."""

from __future__ import annotations

import json

import pytest

from pflt.cli import main

TINY = ["--clients", "3", "--clients-per-round", "3", "--rounds", "1", "--no-progress"]


@pytest.mark.parametrize("adapt_on, warned", [("test", True), ("train", False)])
def test_perfedavg_adapting_on_test_is_warned_and_recorded(tmp_path, capsys, adapt_on, warned):
    out = tmp_path / "o"
    assert main(["run", "--algorithm", "perfedavg", "--adapt-on", adapt_on, *TINY,
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    # mutation: drop the warning or the summary key -> the "test" case fails; print it
    # unconditionally -> the "train" case fails
    assert ("warning: this run reads the test split" in err) is warned
    assert ("reads_test_split" in summary) is warned
    if warned:
        assert "test mini-batches" in summary["reads_test_split"]
