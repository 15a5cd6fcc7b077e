"""pflt/commands/_run_saved.py: what a run stores in run_options.json and how --resume reads
it back (key by key, one error naming the file and the key)."""

import json

import pytest

from algorithms.engine.run_files import RunFileError
from pflt.cli import UserError, main
from pflt.commands._run_saved import NOT_SAVED, SAVED_REQUIRED, saved
from pflt.commands.run_options import read_saved


@pytest.fixture(scope="module")
def saved_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("r") / "run"
    assert main(["run", "--algorithm", "fedavg", "--clients", "4", "--max-client-size", "20",
                 "--rounds", "1", "--clients-per-round", "2", "--no-progress",
                 "--out", str(out)]) == 0
    return out / "run_options.json"


def test_saved_drops_what_is_not_a_run_option():
    options = {k: 1 for k in NOT_SAVED} | {"algorithm": "fedavg", "rounds": 3}
    assert saved(options) == {"algorithm": "fedavg", "rounds": 3}


def test_a_real_run_reads_back_with_every_required_key(saved_file):
    back = read_saved(saved_file)
    assert set(SAVED_REQUIRED) <= set(back) and back["algorithm"] == "fedavg"


@pytest.mark.parametrize("edit,key", [(lambda d: d.pop("seed"), "seed"),
                                      (lambda d: d.update(backend="ray"), "backend"),
                                      (lambda d: d.update(rounds="many"), "rounds")])
def test_a_tampered_file_names_its_key(saved_file, tmp_path, edit, key):
    data = json.loads(saved_file.read_text())
    edit(data)
    bad = tmp_path / "run_options.json"
    bad.write_text(json.dumps(data))
    with pytest.raises((RunFileError, UserError)) as info:
        read_saved(bad)
    assert key in str(info.value) and str(bad) in str(info.value)


def test_the_reading_commands_own_keys_are_accepted(saved_file, tmp_path):
    data = json.loads(saved_file.read_text()) | {"backend": "inprocess"}
    f = tmp_path / "run_options.json"
    f.write_text(json.dumps(data))
    assert read_saved(f, {"backend"})["backend"] == "inprocess"   # flower-sim's own option
