"""``pflt run --client-chunk`` / ``--memory-budget``: the clients trained in chunks give the
history of the unchunked run; bad values are one-line errors."""

import json

import pytest

from pflt.cli import main

BASE = ["--algorithm", "fedavg", "--clients", "10", "--rounds", "2", "--no-progress"]


def _last(out):
    return json.loads((out / "history.json").read_text())["entries"][-1]


def test_chunked_run_writes_the_same_history(tmp_path, capsys):
    assert main(["run", "--out", str(tmp_path / "a")] + BASE) == 0
    assert "at a time" not in capsys.readouterr().err          # 10 clients fit: no chunks
    assert main(["run", "--out", str(tmp_path / "b"), "--client-chunk", "3"] + BASE) == 0
    assert "training the clients 3 at a time (--client-chunk 3)" in capsys.readouterr().err
    a, b = _last(tmp_path / "a"), _last(tmp_path / "b")
    for key in ("global_loss", "global_accuracy", "global_train_loss"):
        assert a[key] == b[key], key


def test_a_tiny_memory_budget_chunks_the_clients(tmp_path, capsys):
    assert main(["run", "--out", str(tmp_path / "c"), "--memory-budget", "1e-6"] + BASE) == 0
    assert "training the clients 1 at a time (memory budget 1e-06 GiB)" in \
        capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--client-chunk", "0"], ["--client-chunk", "x"],
                                  ["--memory-budget", "-1"], ["--memory-budget", "nan"]])
def test_bad_chunk_options_exit_2_without_traceback(tmp_path, capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--out", str(tmp_path / "x")] + BASE + argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "positive" in err and "Traceback" not in err
