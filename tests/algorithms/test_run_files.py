"""The form checks of run files name the file and the key (algorithms/engine/run_files.py)."""

import json

import pytest

from algorithms.engine.run_files import (RunFileError, check_history, read_history_lines, read_json,
                                  read_summary)

ENTRY = {"round": 1, "global_accuracy": 0.5, "global_loss": 1.0,
         "global_client_accuracy": [0.5, 0.5]}


def test_a_valid_history_passes():
    data = {"config": {}, "entries": [ENTRY, {**ENTRY, "round": 2}],
            "initial_evaluation": {"global_loss": 2.0}}
    assert check_history("h.json", data) is data


@pytest.mark.parametrize("data, where", [
    ([1, 2], "h.json: expected a history object"),
    ({"entries": []}, "h.json: config: missing"),
    ({"config": [], "entries": []}, "h.json: config: expected an object"),
    ({"config": {}, "entries": [1, 2]}, "h.json: entries[0]: expected an object, got 1"),
    ({"config": {}, "entries": [{"global_loss": 1.0}]}, "h.json: entries[0].round: missing"),
    ({"config": {}, "entries": [{"round": "1"}]}, "entries[0].round: expected an integer"),
    ({"config": {}, "entries": [{"round": True}]}, "entries[0].round: expected an integer"),
    ({"config": {}, "entries": [{**ENTRY, "global_loss": "x"}]}, "entries[0].global_loss"),
    ({"config": {}, "entries": [{**ENTRY, "global_client_accuracy": 3}]},
     "entries[0].global_client_accuracy: expected a list of numbers"),
    ({"config": {}, "entries": [ENTRY, ENTRY]}, "entries[1].round: round 1 after round 1"),
    ({"config": {}, "entries": [], "initial_evaluation": {"global_loss": None}},
     "initial_evaluation.global_loss"),
])
def test_a_bad_history_names_file_and_key(data, where):
    with pytest.raises(RunFileError) as info:
        check_history("h.json", data)
    assert where in str(info.value)


def test_json_files_that_are_not_json(tmp_path):
    for content, problem in ((b"{", "not valid JSON"), (b"\xff\xfe", "not a UTF-8"),
                             (b"[" * 100_000, "not valid JSON|nested too deeply")):
        (tmp_path / "f.json").write_bytes(content)
        with pytest.raises(RunFileError, match=problem):
            read_json(tmp_path / "f.json")


def test_history_lines_drop_only_a_cut_last_line(tmp_path):
    path = tmp_path / "history.jsonl"
    lines = [json.dumps({**ENTRY, "round": r}) for r in (1, 2, 3)]
    path.write_text("\n".join(lines[:2]) + "\n" + lines[2][:10])
    assert [e["round"] for e in read_history_lines(path)] == [1, 2]
    path.write_text("7\n" + "\n".join(lines) + "\n")
    with pytest.raises(RunFileError, match="line 1: expected an object, got 7"):
        read_history_lines(path)
    path.write_text("\n".join(lines[::-1]) + "\n")
    with pytest.raises(RunFileError, match="not increasing"):
        read_history_lines(path)


def test_summary(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"round": 3, "global_accuracy": 0.5}))
    assert read_summary(path)["round"] == 3
    for data, where in (([], "expected a JSON object"), ({"round": None}, "round: expected"),
                        ({"round": 1, "x": [1]}, "x: expected a scalar")):
        path.write_text(json.dumps(data))
        with pytest.raises(RunFileError, match=where):
            read_summary(path)
