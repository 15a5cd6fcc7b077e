"""pflt.run_dirs: last/best values and the defensive readers of run directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pflt.run_dirs import Run, load_run, run_config


def _run(entries, final=None, status="finished"):
    return Run(Path("."), {}, 0, entries, final or {}, status)


def test_last_is_the_final_value_and_best_the_best_round():
    r = _run([{"round": 1, "a_accuracy": 0.9, "a_loss": 0.5, "gap": 3.0},
              {"round": 2, "a_accuracy": 0.7, "a_loss": 0.2, "gap": 1.0}],
             final={"a_accuracy": 0.7, "a_loss": 0.2, "gap": 1.0})
    assert r.value("a_accuracy", "last") == 0.7 and r.value("a_accuracy", "best") == 0.9
    assert r.value("a_loss", "best") == 0.2                  # lowest loss
    assert r.value("gap", "best") is None                    # no direction: undefined
    assert r.value("missing", "best") is None


def test_a_null_seed_or_deep_nesting_is_a_value_error():
    with pytest.raises(ValueError, match="config.seed is null"):
        run_config({"seed": None})
    deep: dict = {}
    cur = deep
    for _ in range(50):
        cur["x"] = {}
        cur = cur["x"]
    with pytest.raises(ValueError, match="nested more than"):
        run_config(deep)


BAD_HISTORIES = [
    # the file, then the key, then what is wrong (algorithms.engine.run_files' wording)
    ({"config": [], "entries": []}, "config: expected an object"),
    ({"config": {}, "entries": {}}, "entries: expected a list"),
    ({"config": {}, "entries": [3]}, "entries[0]: expected an object, got 3"),
    ({"config": {}, "entries": [{"round": "x"}]}, "entries[0].round"),
    ({"config": {"seed": None}, "entries": []}, "config.seed is null"),
    ([1, 2], "history object"),
]


@pytest.mark.parametrize("history,message", BAD_HISTORIES, ids=[m for _, m in BAD_HISTORIES])
def test_malformed_history_names_the_file_and_key(tmp_path, history, message):
    (tmp_path / "history.json").write_text(json.dumps(history))
    with pytest.raises(ValueError, match="history") as info:
        load_run(tmp_path)
    assert message in str(info.value) and str(tmp_path) in str(info.value)


def test_malformed_summary_names_the_file(tmp_path):
    (tmp_path / "history.json").write_text(json.dumps({"config": {}, "entries": []}))
    (tmp_path / "summary.json").write_text("[1]")
    with pytest.raises(ValueError, match="summary.json holds list, not an object"):
        load_run(tmp_path)
    (tmp_path / "summary.json").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ValueError, match="nested too deeply"):
        load_run(tmp_path)
