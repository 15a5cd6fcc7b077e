"""paper_figures.readme_blocks: the README's numbers come from result files (issue 36)."""

import json
from pathlib import Path

import pytest

from paper_figures import readme_blocks as rb

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_is_short_and_its_generated_blocks_are_up_to_date():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert {"quickstart", "verdicts", "real_data"} <= {m.group(2) for m in rb.BLOCK.finditer(text)}
    assert rb.render(text) == text, "README.md is stale: python -m paper_figures.readme_blocks"


def _tree(tmp_path, quickstart=None, verdicts=None):
    for rel, data in ((rb.QUICKSTART, quickstart), (rb.VERDICTS, verdicts)):
        if data is not None:
            path = tmp_path / rel.relative_to(rb.ROOT)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data))
    (tmp_path / "paper_figures" / "results").mkdir(parents=True, exist_ok=True)
    return tmp_path


TEXT = ("a\n<!-- BEGIN generated:quickstart -->\nstale 3 s\n<!-- END generated:quickstart -->\n"
        "<!-- BEGIN generated:verdicts -->\n<!-- END generated:verdicts -->\n")
ENV = {"date": "2026-11-28 15:00 UTC", "commit": "abc1234", "machine": "2 cores"}


def test_a_hand_edited_number_is_replaced_by_the_files_number(tmp_path):
    root = _tree(tmp_path, quickstart={"environment": ENV, "commands": [
        {"command": "pflt --help", "what": "help", "seconds": 7.4, "returncode": 0},
        {"command": "pflt data list", "what": "data", "seconds": 0.2, "returncode": 2}]})
    out = rb.render(TEXT, root=root)
    assert "stale 3 s" not in out
    assert "pflt --help     # 7 s: help" in out and "# < 1 s, exit 2: data" in out
    assert "abc1234" in out and rb.render(out, root=root) == out      # idempotent
    assert "no verification digest yet" in out                        # absent file: the command


def test_the_verdict_table_counts_each_paper(tmp_path):
    results = {"environment": {"time": "2026-11-28T15:00:00"}, "size": "quick", "checks": [
        {"paper": "pFedMe (NeurIPS 2020)", "verdict": "HOLDS"},
        {"paper": "pFedMe (NeurIPS 2020)", "verdict": "FAILS"},
        {"paper": "CGPFL (IJCAI 2022)", "verdict": "VACUOUS"}]}
    data = rb.digest(results, commit="abc1234", machine="2 cores")
    assert data["per_paper"] == {"CGPFL": {"VACUOUS": 1}, "pFedMe": {"FAILS": 1, "HOLDS": 1}}
    out = rb.render(TEXT, root=_tree(tmp_path, verdicts=data))
    assert "| pFedMe | 2 | 1 | 1 | 0 |" in out and "| CGPFL | 1 | 0 | 0 | 1 |" in out


def test_an_unknown_block_is_an_error():
    with pytest.raises(ValueError, match="no generator"):
        rb.render("<!-- BEGIN generated:nope -->\n<!-- END generated:nope -->")


def test_check_mode_fails_on_a_stale_readme(tmp_path, monkeypatch):
    readme = tmp_path / "README.md"
    readme.write_text(TEXT)
    monkeypatch.setattr(rb, "ROOT", tmp_path)
    monkeypatch.setattr(rb, "render", lambda text: text + "new\n")
    assert rb.main(["--check"]) == 1
    monkeypatch.setattr(rb, "render", lambda text: text)
    assert rb.main(["--check"]) == 0


def test_the_verdict_block_says_what_the_verdicts_rest_on(tmp_path):
    results = {"environment": {}, "size": "quick", "checks": [
        {"paper": "pFedMe (NeurIPS 2020)", "kind": "identity", "verdict": "HOLDS"},
        {"paper": "pFedMe (NeurIPS 2020)", "kind": "identity", "verdict": "HOLDS"},
        {"paper": "pFedMe (NeurIPS 2020)", "kind": "bound", "verdict": "VACUOUS"},
        {"paper": "CGPFL (IJCAI 2022)", "kind": "envelope", "verdict": "FAILS"}]}
    data = rb.digest(results, commit="abc1234", machine="2 cores")
    assert data["per_basis"] == {"claims against measurements": {"VACUOUS": 1, "FAILS": 1},
                                 "code equals our reading": {"HOLDS": 2}}
    out = rb.render(TEXT, root=_tree(tmp_path, verdicts=data))
    assert "| claims against measurements (bound, envelope" in out
    row = next(x for x in out.splitlines() if x.startswith("| code equals our reading"))
    assert "our own reading" in row and row.endswith("| 2 | 2 | 0 | 0 |")
    # a digest written before the split still renders (no basis table)
    del data["per_basis"]
    assert "what the verdicts rest on" not in rb.render(TEXT, root=_tree(tmp_path, verdicts=data))


W2_RESULT = {"workload": "W2", "local_rounds": 5, "batch": 10, "pfllib_commit": "d832e76f6a",
             "floor_seconds": {"fedavg_train": 0.55, "pfedme_train": 2.7},
             "cpu_seconds": {"ours_fedavg_train": {"min": 1.0, "median": 1.1},
                             "loop_fedavg_train": {"min": 1.3, "median": 1.4},
                             "pfllib_fedavg_train": {"min": 1.6, "median": 1.7}},
             "ratios": {"pfllib_fedavg/ours_fedavg train median": 1.55,
                        "loop_fedavg/ours_fedavg train median": 1.18,
                        "pfllib_fedavg/ours_fedavg with evaluation median": 2.5,
                        "ours_fedavg/floor train min": 1.82},
             "minor_faults_median": {"ours_fedavg_train": 1234},
             "parts": [{"command": "python b.py", "date_utc": "2026-12-08T01:00:00+00:00",
                        "conditions": "2 cores, load 3"}]}


def test_the_speed_block_reports_the_ratios_against_the_targets():
    out = rb.speed_block(W2_RESULT, None)
    # mutation: a ratio judged against the wrong target or from the wrong field
    assert "ours 1.00 / 1.10, plain per-client loop 1.30 / 1.40, PFLlib 1.60 / 1.70" in out
    assert "PFLlib ÷ ours **1.55×** (target ≥ 1.5×: met)" in out
    assert "the loop ÷ ours **1.18×** (target ≥ 1.2×: **not met**)" in out
    assert "with evaluation PFLlib ÷ ours **2.50×** (target ≥ 2×: met)" in out
    assert "**1.82×** the FLOP floor of 0.55 s (target ≤ 2×: met)" in out
    assert "1,234 minor page faults" in out and "`python b.py`: 2026-12-08 01:00 UTC" in out
    assert "pFedMe" not in out.split("GPU")[0]                      # no pFedMe sides: no line
    assert "GPU: not run here" in out and "benchmarks/gpu_check.sh" in out
    none = rb.speed_block(None, None)
    assert "W2" in none and "not run here" in none and "×" not in none.split("GPU")[0]


def test_the_speed_block_counts_the_gpu_steps_that_passed():
    gpu = {"gpu": "H100", "torch": "2.13", "dry_run": False, "total_s": 300,
           "date_utc": "2026-12-08T10:00:00+00:00",
           "steps": [{"exit_code": 0}, {"exit_code": 1}, {"exit_code": "skipped"}]}
    out = rb.speed_block(None, gpu)
    assert "GPU (H100, torch 2.13): 1/3 steps" in out and "dry run" not in out
    assert "dry run" in rb.speed_block(None, {**gpu, "dry_run": True})


def test_sources_other_than_the_four_papers_are_folded_into_one_row(tmp_path):
    results = {"environment": {"time_utc": "2026-12-07T04:22:46+00:00"}, "size": "quick",
               "checks": [{"paper": "pFedMe (NeurIPS 2020)", "verdict": "HOLDS"},
                          {"paper": "FedRep", "verdict": "HOLDS"},
                          {"paper": "IFCA", "verdict": "FAILS"}]}
    data = rb.digest(results, commit="abc1234", machine="2 cores")
    assert data["environment"]["date"] == "2026-12-07 04:22"          # the results' own time
    out = rb.render(TEXT, root=_tree(tmp_path, verdicts=data))
    # mutation: no folding -> an IFCA row; folding the papers too -> no pFedMe row
    assert "| IFCA |" not in out and "| pFedMe | 1 | 1 | 0 |" in out
    assert "| 2 other sources (" in out and out.count("| 2 other sources") == 1
    row = next(x for x in out.splitlines() if x.startswith("| 2 other sources"))
    assert row.endswith("| 2 | 1 | 1 |")


def test_the_verdict_block_states_the_generated_mutants_kill_rate_by_basis():
    from paper_figures.readme_blocks import mutation_line

    assert "not run here" in mutation_line(None)
    data = {"date": "2026-12-08 01:00 UTC", "commit": "abc1234", "machine": "x86_64 Linux",
            "only": None, "seconds": 600,
            "rates": {"basis": {"claims against measurements": [120, 400],
                                "code equals our reading": [390, 400]}}}
    line = mutation_line(data)
    assert "claims against measurements 120/400 (30%)" in line
    assert "code equals our reading 390/400 (98%)" in line and "commit abc1234" in line
    assert "mutants matching 'cgpfl.*' only, checks matching 'cgpfl.*' only" in mutation_line(
        {**data, "only": "cgpfl.*", "checks": "cgpfl.*"})
