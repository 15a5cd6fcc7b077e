"""paper_figures.leaderboard_table: a leaderboard.csv read back gives the table the run
printed (the docs' benchmark page is made from the committed CSV)."""

import csv
import math

from paper_figures import leaderboard_table as lt


def _rows():
    rows = [{"setting": "s", "algorithm": a, "model": a, "headline": True, "last_mean": m,
             "last_sd": 0.01, "n": 3, "best_mean": m, "best_sd": 0.01,
             "seconds_per_round": None if a == "fedavg" else 0.5, "unfinished": 0}
            for a, m in (("local", 0.80), ("ditto", 0.83), ("fedavg", 0.805))]
    return lt.judge_against_local(rows)


def test_the_csv_read_back_renders_the_same_table(tmp_path):
    rows = _rows()
    path = tmp_path / "leaderboard.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    back = lt.read_csv(path)
    assert back[2]["seconds_per_round"] is None and back[1]["beats_local"] is True
    assert lt.markdown(back, "c") == lt.markdown(rows, "c")


def test_ranked_by_last_round_and_judged_against_local():
    md = lt.markdown(_rows(), "conditions")
    lines = [ln for ln in md.splitlines() if ln.startswith("| 1 ") or ln.startswith("| 2 ")
             or ln.startswith("| 3 ")]
    assert [ln.split(" | ")[1] for ln in lines] == ["ditto", "fedavg", "local"]
    assert "| better |" in lines[0] and "no better than Local" in lines[1]
    assert lt.beats({"last_mean": math.nan, "last_sd": 0, "n": 3},
                    {"last_mean": 0.8, "last_sd": 0, "n": 3}) is None
