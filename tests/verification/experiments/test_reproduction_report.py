"""verification/experiments/reproduction_report.py: ours beside the paper, ordering claims."""

from __future__ import annotations

import math

import pytest

from verification.core.registry import Verdict
from verification.experiments.reproduction_report import markdown, ordering, summarize
from verification.experiments.reproductions import get_reproduction


def rows(values: dict, column="fmnist_mlr", model="mlr"):
    """CSV rows: ``{method: [last values per seed]}``, best = last + 0.01."""
    out = []
    for method, vals in values.items():
        for seed, v in enumerate(vals):
            out.append(dict(method=method, model=model, column=column, seed=str(seed),
                            metric="personalized_accuracy", value=repr(v),
                            best_value=repr(v + 0.01), rounds="200", status="ok", command="c"))
    return out


def test_summarize_mean_and_sample_sd_in_percent():
    s = summarize(rows({"A": [0.80, 0.82, 0.84]}))
    m, sd, n = s[("fmnist_mlr", "A")]["last"]
    # by hand: mean 82, deviations -2, 0, 2 -> sample variance 8/2 = 4 -> sd 2
    assert (m, sd, n) == (pytest.approx(82.0), pytest.approx(2.0), 3)
    assert s[("fmnist_mlr", "A")]["best"][0] == pytest.approx(83.0)


def test_failed_rows_count_as_failed_not_as_numbers():
    r = rows({"A": [0.8, 0.9]})
    r[1]["status"], r[1]["value"] = "exit 1", "nan"
    s = summarize(r)[("fmnist_mlr", "A")]
    assert s["last"][2] == 1 and s["failed"] == 1 and math.isnan(s["last"][1])


@pytest.mark.parametrize("a, b, verdict", [
    ([0.90, 0.91, 0.92], [0.80, 0.81, 0.82], Verdict.HOLDS),         # +10 points, se 0.8
    ([0.80, 0.81, 0.82], [0.90, 0.91, 0.92], Verdict.FAILS),
    ([0.80, 0.90, 0.85], [0.84, 0.86, 0.85], Verdict.INCONCLUSIVE),  # 0 ± 3
])
def test_ordering_three_verdicts(a, b, verdict):
    # mutation caught: se without the seeds' spread, or the comparison's sign flipped
    v, line = ordering(summarize(rows({"A": a, "B": b})), "fmnist_mlr", "A", "B")
    assert v is verdict and verdict.value in line


def test_ordering_one_seed_is_inconclusive_and_missing_method_raises():
    s = summarize(rows({"A": [0.99], "B": [0.1, 0.1]}))
    assert ordering(s, "fmnist_mlr", "A", "B")[0] is Verdict.INCONCLUSIVE
    with pytest.raises(KeyError):
        ordering(s, "fmnist_mlr", "A", "C")


def test_markdown_puts_paper_beside_ours_with_gap():
    rep = get_reproduction("cgpfl_table1_fmnist")
    text = markdown(rep, rows({"FedAvg": [0.80, 0.82, 0.84]}), claims=rep.claims)
    line = next(ln for ln in text.splitlines() if ln.startswith("| FedAvg |"))
    # paper 82.44 (CGPFL Table 1), ours 82.00 ± 2.00, gap -0.44; best 83.00, gap +0.56
    assert line.startswith("| FedAvg | 82.44 | 82.00 ± 2.00 | -0.44 | 83.00 ± 2.00 | +0.56 | 0,1,2 | 200 |")
    assert "| CGPFL-Heur | 95.18 | not run |" in text
    assert "## fmnist_dnn" in text and "not run here" in text


def test_selected_k_comes_from_the_csv_column_only(tmp_path):
    # mutations caught: K̂ read from the (git-ignored) run directories, which a fresh clone
    # lacks (issue 45.1: the committed K̂ lines were dropped); a missing k_hat left out
    # silently instead of "not recorded"
    import json

    rep = get_reproduction("cgpfl_table1_fmnist")
    r = rows({"CGPFL-Heur": [0.9, 0.91, 0.92]})
    r[0]["k_hat"], r[1]["k_hat"] = "4", "3"
    for i, row in enumerate(r):          # run directories saying otherwise are ignored
        run = tmp_path / f"run{i}"
        run.mkdir()
        (run / "summary.json").write_text(json.dumps({"k_hat": 7}))
        row["command"] = f"pflt run --algorithm cgpfl-heur --out {run}"
    text = markdown(rep, r)
    assert "CGPFL-Heur: seed 0 → 4, seed 1 → 3, seed 2 → not recorded" in text
    assert "→ 7" not in text
    assert "K̂" not in markdown(rep, rows({"FedAvg": [0.9]}))


def test_shipped_markdown_is_derived_from_its_csv_only():
    # mutation caught: a markdown with lines (K̂, seeds) that its CSV does not hold; the
    # shipped K̂ lines (read from run directories that a fresh clone lacks) stay
    from pathlib import Path

    from verification.experiments.reproduction_run import read_rows

    results = Path(__file__).resolve().parents[3] / "paper_figures" / "results"
    shipped = sorted(results.glob("*.csv"))
    assert shipped
    def measured(text):   # all but the entry's notes (line 5: the registry's prose)
        return [ln for i, ln in enumerate(text.splitlines()) if i != 4]

    for csv_path in shipped:
        if csv_path.stem.endswith(("_low5", "_top5")):
            continue    # a transfer's companion metric (test_transfer_metrics.py covers them)
        rep = get_reproduction(csv_path.stem)
        md = csv_path.with_suffix(".md").read_text()
        assert measured(md) == measured(markdown(rep, read_rows(csv_path), claims=rep.claims,
                                                 command=f"pflt reproduce {rep.name}"))
    md = (results / "cgpfl_table1_fmnist_lr_grid.md").read_text()
    assert ("CGPFL-Heur @ lr=0.01: seed 0 → 4; CGPFL-Heur @ lr=0.02: seed 0 → 4; "
            "CGPFL-Heur @ lr=0.05: seed 0 → 4") in md


def test_failed_and_missing_seeds_are_marked():
    # mutation caught: a cell with a failed or missing seed shown as if complete (issue 43.1:
    # a killed child left "3 seeds" in the table)
    rep = get_reproduction("cgpfl_table1_fmnist")
    r = rows({"FedAvg": [0.8, 0.82, 0.84], "APFL": [0.9, 0.91]})
    r[2].update(status="exit -9", value="nan", reason="killed by signal 9 (SIGKILL)")
    text = markdown(rep, r)
    fedavg = next(ln for ln in text.splitlines() if ln.startswith("| FedAvg |"))
    apfl = next(ln for ln in text.splitlines() if ln.startswith("| APFL |"))
    assert "| 0,1 (seed 2 failed) |" in fedavg and "| 0,1 (seed 2 missing) |" in apfl
    assert "* FedAvg: seeds 0,1 (seed 2 failed); seed 2: exit -9: killed by signal 9" in text


def test_runs_with_other_options_are_their_own_group():
    # mutation caught: a smoke test's --option clients=4 rows averaged with the paper's
    rep = get_reproduction("cgpfl_table1_fmnist")
    r = rows({"FedAvg": [0.80, 0.80]}) + [dict(rows({"FedAvg": [0.5]})[0], options="clients=4",
                                              command="c3")]
    text = markdown(rep, r)
    assert "### T = 200\n" in text and "### T = 200, --option clients=4" in text
    assert "| FedAvg | 82.44 | 50.00 |" in text and "| FedAvg | 82.44 | 80.00 ± 0.00 |" in text


def test_runs_of_different_rounds_are_never_averaged_together():
    # mutation caught: summarize over every T (the mean would be 85, the sd ~5.8)
    rep = get_reproduction("cgpfl_table1_fmnist")
    r = rows({"FedAvg": [0.80, 0.80]}) + [dict(method="FedAvg", model="mlr", column="fmnist_mlr",
                                              seed="0", metric="m", value="0.95", best_value="0.95",
                                              rounds="50", status="ok", command="c2")]
    text = markdown(rep, r)
    assert "### T = 200" in text and "### T = 50" in text
    assert text.index("### T = 200") < text.index("### T = 50")      # the T with most rows first
    assert "| FedAvg | 82.44 | 80.00 ± 0.00 | -2.44 |" in text and "| FedAvg | 82.44 | 95.00 |" in text
