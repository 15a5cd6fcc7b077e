"""paper_figures.docs_pages: the documentation's findings and benchmark pages come from result
files, with their conditions, and a stale page fails (issue 36)."""

import csv
import json
from pathlib import Path

from paper_figures import docs_pages as dp

ROOT = Path(__file__).resolve().parents[2]
ENV = {"date": "2026-11-28 15:00 UTC", "commit": "abc1234", "machine": "2 cores", "load": "1.2"}


def test_the_committed_pages_are_what_the_result_files_say():
    for page, text in dp.render(ROOT).items():
        assert (ROOT / page).read_text() == text, \
            f"{page} is stale: python -m paper_figures.docs_pages"


def _write(root: Path, rel: str, data) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def _planted(root: Path, accuracy: float = 0.8123) -> Path:
    _write(root, "docs/results/verify_quick.json", {
        "environment": ENV, "size": "quick", "total": 2,
        "per_paper": {"pFedMe": {"HOLDS": 1, "ERRATUM": 1}},
        "checks": [{"id": "pfedme.thm2", "paper": "pFedMe", "kind": "bound",
                    "verdict": "HOLDS", "seeds_holding": 2, "n_seeds": 2, "seconds": 1.23456},
                   {"id": "pfedme.eq9", "paper": "pFedMe", "kind": "identity",
                    "verdict": "ERRATUM", "seeds_holding": 0, "n_seeds": 1, "seconds": 0.5}]})
    _write(root, "paper_figures/results/table1.csv",
           "method,dataset,seed,value,date,commit,machine\n"
           f"pfedme,mnist,0,{accuracy},2026-11-27,def5678,2 cores\n"
           "pfedme,mnist,1,0.8001,2026-11-27,def5678,2 cores\n")
    _write(root, "benchmarks/results/quickstart_times.json", {"environment": ENV, "commands": [
        {"command": "pflt --help", "what": "help", "seconds": 7.4, "returncode": 0}]})
    rows = [{"setting": "synthetic", "algorithm": a, "model": a, "headline": True,
             "last_mean": m, "last_sd": 0.01, "n": 3, "best_mean": m + 0.01, "best_sd": 0.01,
             "seconds_per_round": 0.012, "unfinished": 0, "beats_local": b}
            for a, m, b in (("local", 0.9, None), ("fedavg", 0.7, False))]
    path = root / "benchmarks/results/leaderboard.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    _write(root, "benchmarks/results/leaderboard.json", {
        "environment": ENV, "clients": 20, "rounds": 40, "seeds": 3,
        "refused": [["synthetic", "cgpfl-heur", "log(e*m/d) must be > 0"]]})
    _write(root, "benchmarks/results/bench_scale.json", {
        "environment": ENV, "setting": "pfedme N=10000",
        "rows": [{"round": 1, "total_s": 1.5, "peak_rss_bytes": 1_576_596 * 1024}]})
    return root


def test_every_section_shows_its_files_numbers_and_conditions(tmp_path):
    pages = dp.render(_planted(tmp_path))
    findings, bench = pages[dp.FINDINGS], pages[dp.BENCHMARKS]
    assert "| pFedMe | 2 | 1 | 1 |" in findings                   # HOLDS, ERRATUM counts
    assert "| `pfedme.thm2` | pFedMe | bound | HOLDS | 2/2 | 1.235 |" in findings
    assert "2026-11-28 15:00 UTC, commit abc1234, 2 cores, load 1.2" in findings
    assert "| pfedme | mnist | 0.8062 ± 0.0086 | – | 2 |" in findings    # mean ± sd, 2 seeds
    assert "commit def5678" in findings
    assert "pflt --help" in bench and "7 s" in bench
    assert "| 1 | local | local (headline) | 0.9000 ± 0.0100 |" in bench
    assert "N = 20 clients, T = 40 rounds, 3 seed(s)" in bench
    assert "synthetic, cgpfl-heur: log(e*m/d) must be > 0" in bench
    assert "1.50 GiB" in bench and "GB" not in bench.replace("GiB", "")


def test_a_changed_result_changes_the_page(tmp_path):
    before = dp.render(_planted(tmp_path / "a"))[dp.FINDINGS]
    after = dp.render(_planted(tmp_path / "b", accuracy=0.9))[dp.FINDINGS]
    assert before != after and "| 0.8500 ± 0.0706 | – | 2 |" in after


def test_absent_files_name_the_command_that_writes_them(tmp_path):
    pages = dp.render(tmp_path)
    assert "pflt verify --quick --out runs/verify" in pages[dp.FINDINGS]
    assert "benchmarks/leaderboard.py" in pages[dp.BENCHMARKS]
    assert "benchmarks/quickstart_times.py" in pages[dp.BENCHMARKS]


def test_check_fails_on_a_hand_edited_page(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(dp, "ROOT", _planted(tmp_path))
    assert dp.main([]) == 0 and dp.main(["--check"]) == 0
    page = tmp_path / dp.FINDINGS
    page.write_text(page.read_text().replace("0.8062", "0.8100"))    # a hand-typed number
    assert dp.main(["--check"]) == 1
    assert "stale: docs/results/findings.md" in capsys.readouterr().err


def test_a_failed_cells_nan_is_counted_apart_not_averaged(tmp_path):
    """A failed cell's ``nan`` (pflt reproduce writes it) neither crashes the table nor enters
    the mean: the finite values are averaged and the nan is counted beside them."""
    path = tmp_path / "t.csv"
    path.write_text("method,seed,value,best_value,rounds,status\n"
                    "A,0,0.5,0.6,10,ok\nA,1,0.7,0.8,10,ok\nA,2,nan,nan,10,exit 1\n")
    lines = dp.reproduction_table(path)
    row = next(ln for ln in lines if ln.startswith("| A "))
    assert "0.6000 ± 0.1414 (1 not finite)" in row and "0.7000 ± 0.1414 (1 not finite)" in row
