"""A check whose reference says "printed" must point at a printed formula: every
docs/formulas.md section it cites (§X.Y) holds a formula whose provenance is printed in a
paper (SEED, SEED-GARBLED→READ, ERRATUM?), not only DERIVED / RECONSTRUCTED / CODE ones
(issue 33: a reference called a [DERIVED] normalisation "as printed (§A.2)")."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from verification.core.registry import load_all

FORMULAS = Path(__file__).resolve().parents[2] / "docs" / "formulas.md"
#: provenance labels of docs/formulas.md that mean "printed in a paper"
PRINTED = {"SEED", "SEED-GARBLED→READ", "ERRATUM?"}
_HEADING = re.compile(r"^#{2,3} .*?§([A-Z](?:\.\d+)*) ")
_TAGGED = re.compile(r"^\* \*\*.*\[([A-Z][A-Z?→ -]*)\]\s*$")
_CITED = re.compile(r"§([A-Z](?:\.\d+)+)")


def section_tags(text: str) -> dict[str, set[str]]:
    """``{section id: provenance tags of its formulas}`` from docs/formulas.md."""
    tags: dict[str, set[str]] = {}
    current = None
    for line in text.splitlines():
        head = _HEADING.match(line)
        if head:
            current = head.group(1)
            tags.setdefault(current, set())
            continue
        tagged = _TAGGED.match(line)
        if tagged and current:
            tags[current].add(tagged.group(1))
    return tags


def problems(checks, tags: dict[str, set[str]]) -> list[str]:
    """Every check whose reference says "printed" but cites no section, an unknown one, or
    only sections without a printed formula."""
    out = []
    for c in checks:
        if "printed" not in c.reference.lower():
            continue
        cited = _CITED.findall(c.reference)
        if not cited:
            out.append(f"{c.id}: says 'printed' but cites no docs/formulas.md section")
        for sec in cited:
            if sec not in tags:
                out.append(f"{c.id}: cites §{sec}, not a section of docs/formulas.md")
            elif not tags[sec] & PRINTED:
                out.append(f"{c.id}: says 'printed' but §{sec} holds only "
                           f"{sorted(tags[sec]) or 'no'} formulas")
    return out


@pytest.fixture(scope="module")
def tags() -> dict[str, set[str]]:
    return section_tags(FORMULAS.read_text(encoding="utf-8"))


def test_formulas_md_sections_parse(tags):
    assert tags["A.2"] == {"DERIVED"} and "SEED" in tags["A.7"] and "ERRATUM?" in tags["D.2"]


def test_every_printed_reference_points_at_a_printed_formula(tags):
    assert problems(load_all().values(), tags) == []


def test_the_scan_catches_a_derived_formula_called_printed(tags):
    old = SimpleNamespace(id="cgpfl.worst_case_thm41_printed_G", reference=(
        "Theorem 4.1 step-wise form at Q^t = I, δ = 0, with G = (1/K)Σ_k G_k = "
        "(1/N)Σ_j‖θ_j − ω_k(j)‖² as printed (§A.2) — ERRATUM? docs/worst_case.md"))
    assert problems([old], tags) == [
        "cgpfl.worst_case_thm41_printed_G: says 'printed' but §A.2 holds only ['DERIVED'] "
        "formulas"]
    bare = SimpleNamespace(id="x.y", reference="Theorem 3, as printed")
    assert "cites no docs/formulas.md section" in problems([bare], tags)[0]
