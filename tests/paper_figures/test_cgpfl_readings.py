"""paper_figures/cgpfl_readings.py: the docs block is the CSV's rows, effect = reading − printed."""

from __future__ import annotations

import paper_figures.cgpfl_readings as cr


def test_block_from_the_csv_with_the_effect(tmp_path, monkeypatch):
    # mutation caught: effect printed - reading (sign), a row dropped
    path = tmp_path / "r.csv"
    path.write_text("reading,method,value,printed,paper,command\n"
                    "pixels,FedAvg,83.89,77.31,82.44,pflt run a\n"
                    "PM,pFedMe (PM),85.67,89.96,85.49,pflt run b\n"
                    "new,X,50.00,,,pflt run c\n")
    monkeypatch.setattr(cr, "CSV", path)
    text = cr.block()
    assert "| pixels | FedAvg | 83.89 | 77.31 | +6.58 | 82.44 |" in text
    assert "| PM | pFedMe (PM) | 85.67 | 89.96 | -4.29 | 85.49 |" in text
    assert "| new | X | 50.00 | – | – | – |" in text
    assert text.startswith(cr.START) and text.endswith(cr.END)


def test_docs_block_is_replaced_in_place(tmp_path, monkeypatch):
    doc = tmp_path / "d.md"
    doc.write_text(f"a\n{cr.START}\nold\n{cr.END}\nb\n")
    monkeypatch.setattr(cr, "DOC", doc)
    monkeypatch.setattr(cr, "CSV", tmp_path / "absent.csv")
    cr.write_docs()
    text = doc.read_text()
    assert "old" not in text and "(none measured yet)" in text
    assert text.startswith("a\n") and text.endswith(f"{cr.END}\nb\n")
