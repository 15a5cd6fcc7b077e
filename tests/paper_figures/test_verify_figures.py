"""The two figures of ``pflt verify`` results read (issue 45 items 2 and 3):
verification_summary has one row per paper and names what did not run; bound_tightness is
paged and never drops the worst-case panel silently. Each drawn page passes
paper_figures.figure_checks (overlapping text, colliding ticks, a squeezed plot)."""

from __future__ import annotations

import csv
import json

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from paper_figures import bound_tightness, figure_checks, verification_summary  # noqa: E402
from paper_figures._io import RESULTS_ENV_VAR  # noqa: E402

PEP_MISSING = "PEPit is not installed: install with pip install -e '.[pep]'"


def _not_run(i: int, paper: str = "pFedMe (NeurIPS 2020)") -> dict:
    return {"id": f"pfedme.worst_case_{i}", "paper": paper, "kind": "worst_case",
            "verdict": "NOT RUN", "results": [{"verdict": "NOT RUN", "detail": "x",
                                               "extra": {"not_run_reason": PEP_MISSING}}]}


def _grid(i: int, kind: str = "bound") -> dict:
    return {"id": f"p.bound_{i:02d}", "paper": "PPFE (arXiv 2602.14244)", "kind": kind,
            "verdict": "HOLDS", "results": [{"verdict": "HOLDS", "tightness": 2.0, "extra": {
                "grid": {"name": "n", "values": [10, 100, 1000], "measured": [1, 0.5, 0.2],
                         "bound": [2, 1, 0.5]}}}]}


def _worst(i: int) -> dict:
    return {"id": f"fedavg.worst_case_{i}", "paper": "FedAvg", "kind": "worst_case",
            "verdict": "HOLDS", "results": [{"verdict": "HOLDS", "tightness": 2.0, "extra": {
                "measured_engine": 0.1, "worst_case": 0.5, "bound": 1.0}}]}


def _write(tmp_path, checks) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"size": "quick", "seeds": [0], "checks": checks,
                                "environment": {"time_utc": "2026-12-07T05:04:00+00:00"}}))
    return path


@pytest.fixture
def drawn(monkeypatch):
    """Every figure saved by a module: its figure_checks problems and its texts."""
    from matplotlib.figure import Figure

    seen: dict[str, dict] = {}
    original = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        texts = [t.get_text() for t in self.findobj(matplotlib.text.Text) if t.get_visible()]
        seen[str(fname).rsplit("/", 1)[-1]] = {"problems": figure_checks.problems(self),
                                               "text": "\n".join(texts)}
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def test_summary_has_one_row_per_paper_and_names_what_did_not_run(tmp_path, monkeypatch,
                                                                  drawn):
    papers = ["PLGU (CVPR 2023)", "PLGU (Qu et al., CVPR 2023)", "CGPFL (IJCAI 2022)",
              "CGPFL (Tang, Guo, Guo, IJCAI 2022)", "pFedMe (NeurIPS 2020)"]
    papers += [f"Method{i} (Someone et al., ICML 202{i % 10})" for i in range(40)]
    checks = [{"id": f"c{i}", "paper": p, "kind": "rate", "verdict": "HOLDS"}
              for i, p in enumerate(papers)]
    checks += [{"id": "f", "paper": "PLGU (CVPR 2023)", "kind": "rate", "verdict": "FAILS"}]
    checks += [_not_run(i) for i in range(12)]
    monkeypatch.setenv(RESULTS_ENV_VAR, str(_write(tmp_path, checks)))
    verification_summary.make(tmp_path / "fig")
    rows = list(csv.DictReader(open(tmp_path / "fig" / "verification_summary.csv")))
    assert [r["paper"] for r in rows] == ["pFedMe", "CGPFL", "PLGU", "40 other source(s)"]
    by = {r["paper"]: r for r in rows}
    assert (by["PLGU"]["HOLDS"], by["PLGU"]["FAILS"]) == ("2", "1")
    assert (by["pFedMe"]["NOT RUN"], by["pFedMe"]["total"]) == ("12", "13")
    assert by["40 other source(s)"]["total"] == "40"
    page = drawn["verification_summary.png"]
    assert page["problems"] == []
    assert f"12 worst_case check(s) NOT RUN: {PEP_MISSING}" in page["text"]


def test_paper_key_reduces_a_citation_to_its_paper():
    key = verification_summary.paper_key
    assert key({"paper": "CGPFL (Tang, Guo, Guo, IJCAI 2022)"}) == "CGPFL"
    assert key({"paper": "PLGU (CVPR 2023)"}) == key({"paper": "PLGU (Qu et al., CVPR 2023)"})
    assert key({"paper": "A plugin's paper (2026)"}) == "A plugin's paper (2026)"


def test_bound_tightness_is_paged_with_the_worst_cases_first(tmp_path, monkeypatch, drawn):
    checks = [_grid(i) for i in range(20)] + [_worst(i) for i in range(5)]
    monkeypatch.setenv(RESULTS_ENV_VAR, str(_write(tmp_path, checks)))
    files = bound_tightness.make(tmp_path / "fig")
    assert [f.name for f in files] == ["bound_tightness.png", "bound_tightness_p2.png",
                                       "bound_tightness_p3.png", "bound_tightness.csv"]
    assert all(bound_tightness.PER_PAGE >= 12 for _ in files)
    first = drawn["bound_tightness.png"]["text"]
    assert "page 1 of 3" in first and "fedavg.worst_case_0" in first
    assert "missing" not in first
    assert "p.bound_19" in drawn["bound_tightness_p3.png"]["text"]
    for name, page in drawn.items():
        assert page["problems"] == [], (name, page["problems"])
    checks = list(csv.DictReader(open(files[-1])))
    assert len({r["check"] for r in checks}) == 25


@pytest.mark.parametrize("worst, says", [
    ([_not_run(i) for i in range(12)], f"12 worst_case check(s) gave no worst case\n12: "
                                       f"PEPit is not installed"),
    ([], "these results hold no worst_case check"),
])
def test_bound_tightness_says_why_the_worst_case_panel_is_missing(worst, says, tmp_path,
                                                                  monkeypatch, drawn):
    monkeypatch.setenv(RESULTS_ENV_VAR, str(_write(tmp_path, [_grid(0), *worst])))
    files = bound_tightness.make(tmp_path / "fig")
    assert [f.name for f in files] == ["bound_tightness.png", "bound_tightness.csv"]
    page = drawn["bound_tightness.png"]
    assert "worst case (PEP): missing" in page["text"] and says in page["text"]
    assert page["problems"] == []
