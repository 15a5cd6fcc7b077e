"""``pflt formulas`` explains the provenance tags it prints (issue 45 item 10)."""

from pflt.cli import main
from pflt.commands.formulas import EXPLAINED
from pfl_theory.formulas import PROVENANCE


def test_every_tag_printed_is_explained_under_the_list(capsys):
    assert main(["formulas", "--section", "B.6"]) == 0
    out = capsys.readouterr().out
    tags = {line.rsplit("[", 1)[1].rstrip("]") for line in out.splitlines()
            if line.startswith("§")}
    assert "SEED-GARBLED→READ" in tags
    for tag in tags:
        assert f"[{tag}] = {EXPLAINED.get(tag) or PROVENANCE[tag]}" in out
    assert "scrambled" in out and "'reading' line" in out
    assert "[SEED] =" not in out or "SEED" in tags         # only the tags shown
