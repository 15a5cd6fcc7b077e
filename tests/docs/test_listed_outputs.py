"""The files the docs say a command writes are the files it writes (issue 45 item 6): each
``<!-- outputs: NAME -->…<!-- /outputs -->`` span of docs/quickstart.md lists, in backticks,
the files of one command; the command is run at a small size and the file names it left in
its output directory (hidden bookkeeping files aside) must be exactly those."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pflt.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPAN = re.compile(r"<!-- outputs: (\w+) -->(.*?)<!-- /outputs -->", re.S)
FILE = re.compile(r"`([\w.-]+\.\w+|[\w-]+/)`")


def listed(page: str = "quickstart.md") -> dict[str, set[str]]:
    """``{command: {file names}}`` of the page's output spans."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    return {name: set(FILE.findall(body)) for name, body in SPAN.findall(text)}


def written(out: Path) -> set[str]:
    return {p.name for p in out.iterdir() if not p.name.startswith(".")}


def test_the_quickstart_lists_what_run_verify_and_figures_write(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spans = listed()
    assert set(spans) == {"run", "verify", "figures"}
    assert main(["run", "--algorithm", "pfedme", "--clients", "10", "--rounds", "2",
                 "--no-progress", "--out", "r"]) == 0
    assert main(["verify", "--quick", "--only", "pfedme.envelope_gradient", "--no-progress",
                 "--out", "v"]) == 0
    assert main(["figures", "--only", "verification_summary", "--from", "v", "--no-progress",
                 "--out", "f"]) == 0
    capsys.readouterr()
    for name, out in (("run", "r"), ("verify", "v"), ("figures", "f")):
        assert written(tmp_path / out) == spans[name], name


def test_the_span_reader_sees_a_missing_or_an_extra_file(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / ".hidden").write_text("")
    assert written(tmp_path) == {"a.json"}
    assert FILE.findall("`a.json`, `config.json` and `figures/`, not `--out`") == \
        ["a.json", "config.json", "figures/"]
