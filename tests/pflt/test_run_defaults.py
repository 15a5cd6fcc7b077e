"""``--rounds`` defaults to the algorithm's own schedule (PPFE: ``--total-rounds``), and a
run that ends before its stages finish says so."""

import json

import pytest

from pflt.cli import build_parser, main
from pflt.commands import run_options as opts

TINY = ["--clients", "4", "--clients-per-round", "2", "--local-rounds", "1", "--head-steps",
        "1", "--batch-size", "5", "--max-client-size", "30", "--no-progress"]


def _resolved(*argv):
    args = build_parser("run").parse_args(["run", *argv])
    args.argv = ["run", *argv]
    return opts.resolve(args)


@pytest.mark.parametrize("argv, rounds", [
    (["--algorithm", "ppfe"], 160),                           # PPFE's own total_rounds
    (["--algorithm", "ppfe", "--total-rounds", "12"], 12),
    (["--algorithm", "ppfe", "--rounds", "7"], 7),            # explicit wins
    (["--algorithm", "fedavg"], opts.DEFAULT_ROUNDS),         # no schedule: 50
])
def test_rounds_default_to_the_algorithms_schedule(argv, rounds):
    assert _resolved(*argv)["rounds"] == rounds


def test_a_config_file_sets_the_rounds_too(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('algorithm = "ppfe"\nrounds = 9\n')
    assert _resolved("--config", str(cfg))["rounds"] == 9


def test_the_default_run_finishes_every_stage_and_a_short_one_warns(tmp_path, capsys):
    out = tmp_path / "full"
    assert main(["run", "--algorithm", "ppfe", "--total-rounds", "4", *TINY,
                 "--out", str(out)]) == 0
    assert "warning" not in capsys.readouterr().err
    entries = json.loads((out / "history.json").read_text())["entries"]
    assert entries[-1]["round"] == 4 and {e["stage"] for e in entries} == {0.0, 1.0}
    assert main(["run", "--algorithm", "ppfe", "--total-rounds", "4", "--rounds", "2", *TINY,
                 "--out", str(tmp_path / "short")]) == 0
    err = capsys.readouterr().err
    assert ("warning: ppfe: --rounds 2 ends before its schedule of 4 rounds: 1 of its 2 "
            "stages finish, 1 start (stages start at rounds 0, 2); pass --rounds 4") in err


def test_schedule_note_counts_stages():
    class Staged:
        name = "staged"

        def schedule_rounds(self):
            return 10

        def schedule(self, model):
            return [4, 3, 3]

    assert opts.schedule_note(Staged(), None, 10) is None
    assert "0 of its 3 stages finish, 1 start" in opts.schedule_note(Staged(), None, 4 - 1)
    assert "2 of its 3 stages finish, 3 start" in opts.schedule_note(Staged(), None, 8)
    assert opts.schedule_note(object(), None, 1) is None
