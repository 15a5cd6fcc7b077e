"""``pflt flower-outcome`` (the exit status of a Flower deployment run, read from the
outcome file the ServerApp writes) and ``flower-sim --backend ray`` failing in one line."""

import json

import pytest

from pflt.cli import main


def write(tmp_path, **outcome):
    (tmp_path / "outcome.json").write_text(json.dumps(outcome))
    return str(tmp_path)


@pytest.mark.parametrize("status, flag, code", [
    ("completed", [], 0),
    ("completed-with-failures", [], 1),
    ("completed-with-failures", ["--allow-failed-clients"], 0),
    ("failed", [], 1),
    ("failed", ["--allow-failed-clients"], 1),
])
def test_outcome_exit_status(tmp_path, capsys, status, flag, code):
    out = write(tmp_path, status=status, round=4, clients_left_out=[1],
                clients_missing_at_end=[1], error="ValueError: boom")
    assert main(["flower-outcome", out, *flag]) == code
    line = capsys.readouterr().out.strip()
    assert line.startswith(status) and "\n" not in line
    if status == "failed":
        assert "boom" in line
    if status == "completed-with-failures":
        assert "[1]" in line and "history.json" in line


@pytest.mark.parametrize("content", [None, "not json", json.dumps({"status": "maybe"}),
                                     json.dumps(["completed"])])
def test_outcome_bad_or_missing_file_is_a_one_line_error(tmp_path, capsys, content):
    if content is not None:
        (tmp_path / "outcome.json").write_text(content)
    assert main(["flower-outcome", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pflt flower-outcome: error:") and "\n" not in err


def test_ray_failure_is_one_line_exit_1(tmp_path, capsys, monkeypatch):
    pytest.importorskip("flwr")
    import algorithms.flower.local as local

    def fails(*args, **kwargs):
        raise local.RaySimulationError("Flower's Ray simulation failed: node timed out")
    monkeypatch.setattr(local, "simulate", fails)
    code = main(["flower-sim", "--backend", "ray", "--clients", "2", "--clients-per-round", "2",
                 "--rounds", "1", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and err[-1] == ("pflt flower-sim: error: Flower's Ray simulation failed: "
                                     "node timed out")


@pytest.mark.parametrize("level, flood", [([], False), (["--flower-log", "info"], True)])
def test_flower_info_log_stays_quiet_unless_asked(tmp_path, capsys, level, flood):
    """Issue 36: Flower's per-round INFO lines buried the summary; by default only warnings
    reach Flower's handlers (a handler of ours on its logger counts what gets through)."""
    pytest.importorskip("flwr")
    import logging

    logger = logging.getLogger("flwr")
    before, seen = logger.level, []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)
    try:
        assert main(["flower-sim", "--algorithm", "fedavg", "--clients", "3",
                     "--clients-per-round", "3", "--rounds", "2", "--local-rounds", "1",
                     "--no-progress", "--out", str(tmp_path / "fl"), *level]) == 0
    finally:
        logger.removeHandler(handler)
    assert any("[ROUND 1/2]" in m for m in seen) is flood
    out = capsys.readouterr().out
    assert "global_accuracy" in out and "results:" in out
    assert logger.level == before          # restored
