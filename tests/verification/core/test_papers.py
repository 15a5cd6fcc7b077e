"""One id per paper: every built-in check's paper string resolves to an id of the table, and
the summaries group by id (issue 42: 46 strings for 33 sources)."""

from __future__ import annotations

import json

from verification.core import papers
from verification.core.registry import check, load_all


def test_every_builtin_check_names_a_paper_of_the_table():
    checks = load_all()
    builtin = {cid: c for cid, c in checks.items()
               if c.fn.__module__.startswith("verification.")}
    unknown = sorted(f"{cid}: {c.cited!r}" for cid, c in builtin.items()
                     if not papers.known(c.cited))
    assert not unknown, "add these paper strings to verification/core/papers.py CITED: " \
        + "; ".join(unknown)
    for c in builtin.values():
        assert c.paper_id in papers.PAPERS
        assert c.paper == papers.PAPERS[c.paper_id].name       # the display name, one table
    strings = {c.cited for c in builtin.values()}
    ids = {c.paper_id for c in builtin.values()}
    assert len(ids) < len(strings)                              # some papers were cited twice
    assert {"pfedme", "cgpfl", "ppfe", "plgu"} <= ids


def test_the_mission_papers_cited_several_ways_are_one_id():
    for text in ("PPFE (arXiv 2602.14244)", "PPFE (arXiv 2602.14244, 2026)",
                 "PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244)", "PPFE", "ppfe"):
        assert papers.paper_id(text) == "ppfe"
    assert papers.paper_id("McMahan et al., AISTATS 2017") == "fedavg"
    assert papers.short_name("CGPFL (Tang, Guo, Guo, IJCAI 2022)") == "CGPFL"


def test_an_unknown_string_is_its_own_paper_never_merged():
    assert not papers.known("PPFE (some other venue)")
    assert papers.paper_id("PPFE (some other venue)") == "PPFE (some other venue)"
    assert papers.display_name("mine") == papers.short_name("mine") == "mine"


def test_entry_paper_id_prefers_the_file_s_id():
    assert papers.entry_paper_id({"paper": "X", "paper_id": "plgu"}) == "plgu"
    assert papers.entry_paper_id({"paper": "PLGU (CVPR 2023)"}) == "plgu"
    assert papers.entry_paper_id({}) == "?"


def test_a_plugin_check_keeps_its_own_paper_string():
    @check("test_papers.own", paper="My paper (2031)", reference="Thm 1", kind="identity")
    def own(ctx):  # pragma: no cover - never run
        return None

    from verification.core.registry import _REGISTRY

    try:
        c = _REGISTRY["test_papers.own"]
        assert (c.paper, c.paper_id, c.cited) == ("My paper (2031)",) * 3
    finally:
        _REGISTRY.pop("test_papers.own", None)


def test_verification_summary_has_one_row_per_paper(tmp_path):
    from paper_figures.verification_summary import load_counts

    checks = [{"paper": p, "verdict": "HOLDS", "kind": "rate"} for p in
              ("PPFE (arXiv 2602.14244)", "PPFE (arXiv 2602.14244, 2026)", "pFedMe",
               "pFedMe (Dinh et al., NeurIPS 2020)", "Q")]
    (tmp_path / "results.json").write_text(json.dumps({"checks": checks}))
    rows, _ = load_counts(tmp_path / "results.json")
    # the mission's papers first, in their order, then the others (verification_summary)
    assert [(r["paper"], r["total"]) for r in rows] == [("pFedMe", 2), ("PPFE", 2), ("Q", 1)]


def test_digest_groups_by_paper_id():
    from paper_figures.readme_blocks import digest

    checks = [{"id": f"c{i}", "paper": p, "kind": "rate", "verdict": "HOLDS"} for i, p in
              enumerate(("McMahan et al., AISTATS 2017", "FedAvg (AISTATS 2017), baseline"))]
    out = digest({"checks": checks}, commit="x", machine="m")
    assert out["per_paper"] == {"FedAvg": {"HOLDS": 2}}
    assert {c["paper_id"] for c in out["checks"]} == {"fedavg"}


def test_pflt_figures_counts_papers_by_id(tmp_path):
    from pflt.commands.figures import describe_results

    checks = [{"id": f"c{i}", "paper": p, "kind": "rate", "verdict": "HOLDS"} for i, p in
              enumerate(("PPFE (arXiv 2602.14244)", "PPFE (arXiv 2602.14244, 2026)",
                         "PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244)"))]
    (tmp_path / "results.json").write_text(json.dumps({"checks": checks}))
    assert "3 check(s) of 1 paper(s)" in describe_results(tmp_path / "results.json")
