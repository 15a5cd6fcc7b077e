"""The paper ledger stays true (issue 42): every registered check and reproduction names a
ledger item, every item's evidence exists, statuses follow the evidence and the files."""

from __future__ import annotations

import csv
import importlib
import json
from collections import Counter
from pathlib import Path

import pytest

from verification.core import registry
from verification.experiments.reproduction import cells
from verification.experiments.reproductions import REPRODUCTIONS
from verification.ledger import ITEMS, PAPERS, RANK, items_of, ledger
from verification.ledger.item import table
from verification.ledger.status import ROOT, Evidence, assess, gather


@pytest.fixture(scope="module")
def evidence():
    return gather()


def test_at_least_115_items_over_the_papers_each_paper_whole():
    mine = [i for i in ITEMS if i.paper in PAPERS]
    assert len(mine) >= 115
    per = Counter(i.paper for i in mine)
    assert set(per) == set(PAPERS) and min(per.values()) >= 25
    keys = [i.key for i in ITEMS]
    assert len(keys) == len(set(keys)), [k for k, n in Counter(keys).items() if n > 1]
    kinds = Counter(i.kind for i in mine)
    assert kinds["theory"] and kinds["algorithm"] and kinds["experiment"]


def test_every_registered_check_names_a_ledger_item():
    named = {c for i in ITEMS for c in i.checks}
    builtin = {cid for cid, c in registry.load_all().items()
               if c.fn.__module__.startswith("verification.")}
    orphans = sorted(builtin - named)
    assert not orphans, ("checks no ledger item names — add them to the evidence of their "
                         "item in verification/ledger/items_*.py: " + ", ".join(orphans))


def test_every_reproduction_names_a_ledger_item():
    named = {r for i in ITEMS for r in i.reproductions}
    assert not sorted(set(REPRODUCTIONS) - named)


def test_every_item_s_evidence_exists():
    from pfl_theory.formulas import section_ids
    from paper_figures.driver import discover

    checks = registry.load_all()
    figures = discover()
    bad = []
    for i in ITEMS:
        bad += [f"{i.key} check {c}" for c in i.checks if c not in checks]
        bad += [f"{i.key} reproduction {r}" for r in i.reproductions if r not in REPRODUCTIONS]
        bad += [f"{i.key} figure {f}" for f in i.figures if not callable(figures.get(f))
                and not callable(getattr(importlib.import_module(f"paper_figures.{f}"),
                                         "main", None))]
        bad += [f"{i.key} formula §{f}" for f in i.formulas if f not in section_ids()]
        bad += [f"{i.key} file {p}" for p in (*i.files, *i.tests) if not (ROOT / p).is_file()]
    assert not bad, bad


def test_an_absent_item_carries_a_reason_and_a_bare_row_is_refused(evidence):
    for e in ledger(evidence):
        if e.status == "absent":
            assert e.item.missing and e.reason.startswith(e.item.missing)
        if e.status in ("partial", "runnable"):
            assert e.reason, e.item.key
    with pytest.raises(ValueError, match="no evidence and no reason"):
        table("p", (("Lemma 9", "§1", "T", "s", ""),))
    with pytest.raises(ValueError, match="evidence token"):
        table("p", (("Lemma 9", "§1", "T", "s", "check:x"),))
    with pytest.raises(ValueError, match="kind"):
        table("p", (("Lemma 9", "§1", "X", "s", "c:x"),))


def test_measured_only_from_a_result_file(evidence, tmp_path):
    measured = [e for e in ledger(evidence) if e.status == "measured"]
    assert measured                    # CGPFL Table 1 (FMNIST), pFedMe Table 1 (Synthetic)
    for e in measured:
        assert any((ROOT / f).is_file() for f in e.item.files) or any(
            evidence.repro_rows.get(r) for r in e.item.reproductions), e.item.key
    bare = Evidence(evidence.checks, evidence.reproductions, evidence.verdicts, "none",
                    {}, root=tmp_path)     # no CSV rows, no result file under this root
    assert not [e.item.key for e in ledger(bare) if e.status == "measured"]


def test_removing_a_check_turns_its_item_down(monkeypatch):
    """Monkeypatch the registry: the ledger reads it through load_all."""
    key = "ppfe:Lemma 5"
    before = next(e for e in ledger(paper="ppfe") if e.item.key == key)
    assert before.status == "checked"
    for cid in before.item.checks:
        monkeypatch.delitem(registry._REGISTRY, cid)
    after = next(e for e in ledger(paper="ppfe") if e.item.key == key)
    assert RANK[after.status] < RANK[before.status]
    assert after.status == "partial" and not after.verdicts      # only its formula is left


def test_every_checked_item_turns_down_without_its_checks(evidence):
    for e in ledger(evidence):
        if e.status != "checked":
            continue
        gone = {k: v for k, v in evidence.checks.items() if k not in e.item.checks}
        ev = Evidence(gone, evidence.reproductions, evidence.verdicts, "", evidence.repro_rows)
        assert RANK[assess(e.item, ev).status] < RANK["checked"], e.item.key


def test_a_check_without_a_verdict_is_runnable_with_its_reason(evidence, tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"size": "quick", "checks": []}))
    ev = gather(tmp_path / "results.json")
    e = next(e for e in ledger(ev, paper="pfedme") if e.item.label == "Lemma 1")
    assert e.status == "runnable" and "pfedme.lemma1_delta" in e.reason
    fails = {"checks": [{"id": "pfedme.lemma1_delta", "verdict": "FAILS"}]}
    (tmp_path / "results.json").write_text(json.dumps(fails))
    e = next(e for e in ledger(gather(tmp_path / "results.json"), paper="pfedme")
             if e.item.label == "Lemma 1")
    assert e.status == "checked" and e.verdicts == {"pfedme.lemma1_delta": "FAILS"}
    assert "pflt verify --quick --only 'pfedme.lemma1_delta" in e.command


def _write_rows(path: Path, rep, methods_dropped=()):
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["method", "model", "seed", "metric", "value",
                                           "command", "column", "rounds", "status"])
        w.writeheader()
        for c in cells(rep, seeds=[0]):
            if c.row.label not in methods_dropped:
                w.writerow(dict(method=c.row.label, model=c.column.model, seed=0, metric="m",
                                value=0.5, command="x", column=c.column.key, rounds=c.rounds,
                                status="ok"))


def test_a_reproduction_csv_makes_an_experiment_measured_or_partial(evidence, tmp_path):
    rep = REPRODUCTIONS["cgpfl_table1_fmnist"]
    item = next(i for i in items_of("cgpfl") if i.label == "Table 1 (FMNIST)")

    def status(rows):
        ev = Evidence(evidence.checks, evidence.reproductions, evidence.verdicts, "", rows)
        return assess(item, ev)

    assert status({}).status == "partial"             # its ordering check has a verdict
    _write_rows(tmp_path / "a.csv", rep)
    from verification.experiments.reproduction_run import read_rows

    full = status({rep.name: read_rows(tmp_path / "a.csv")})
    assert full.status == "measured" and "9/9 methods" in full.reason
    _write_rows(tmp_path / "b.csv", rep, methods_dropped=("Ditto",))
    part = status({rep.name: read_rows(tmp_path / "b.csv")})
    assert part.status == "partial" and "8/9 methods" in part.reason
    mnist = next(i for i in items_of("cgpfl") if i.label == "Table 1 (MNIST)")
    e = assess(mnist, Evidence(evidence.checks, evidence.reproductions, {}, "", {}))
    assert e.status == "runnable" and "data not on this machine (mnist" in e.reason
    assert e.command == "pflt reproduce cgpfl_table1_mnist --data-dir DIR"


def test_a_missing_note_caps_an_item_at_partial(evidence):
    (item,) = table("p", (("Lemma 9", "§1", "T", "s", "c:pfedme.lemma1_delta", "half of it"),))
    e = assess(item, evidence)
    assert e.status == "partial" and e.reason.startswith("half of it") and e.verdicts


def test_the_paper_ids_of_the_items_are_the_table_s():
    from verification.core.papers import PAPERS as TABLE

    assert {i.paper for i in ITEMS} <= set(TABLE)
    assert items_of("PPFE (arXiv 2602.14244)") == items_of("ppfe")
    with pytest.raises(ValueError, match="unknown status"):
        ledger(status="done")


def test_a_transfer_is_never_measured_and_not_run_is_no_verdict(evidence, tmp_path):
    from verification.experiments.reproductions_transfer import TRANSFERS

    rep = TRANSFERS[0]
    item = next(i for i in ITEMS if rep.name in i.reproductions)
    _write_rows(tmp_path / "t.csv", rep)
    from verification.experiments.reproduction_run import read_rows

    rows = {rep.name: read_rows(tmp_path / "t.csv")}
    e = assess(item, Evidence(evidence.checks, evidence.reproductions, {}, "", rows))
    assert e.status == "partial" and "a transfer" in e.reason
    (cid,) = [c for c in item.checks if c.startswith("transfer_fmnist.")][:1]
    e = assess(item, Evidence(evidence.checks, evidence.reproductions, {cid: "NOT RUN"}, "", {}))
    assert e.status == "runnable" and e.verdicts == {cid: "NOT RUN"}


def test_an_unreadable_result_file_measures_nothing_and_says_why(evidence, tmp_path):
    (tmp_path / "cgpfl_table1_fmnist.csv").write_text("<<<<<<< HEAD\nmethod,model\n")
    ev = gather(repro_dir=tmp_path)
    assert "cgpfl_table1_fmnist" in ev.unreadable
    e = next(e for e in ledger(ev, paper="cgpfl") if e.item.label == "Table 1 (FMNIST)")
    assert e.status != "measured" and "unreadable" in e.reason
