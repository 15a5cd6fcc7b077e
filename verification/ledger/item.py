"""One entry of the paper ledger: an item of a paper and the evidence that covers it.

An item is written as one row of a paper's table (``verification/ledger/items_*.py``)::

    I("Theorem 1(a)", "§4", "T", "E[F(w̄_T)] − F* decays linearly to a λ²δ²/μ_F floor",
      "c:pfedme.bound_thm1_mlr f:B.6 fig:pfedme_rates")

``kind`` is ``T`` (theory: a theorem, lemma, definition, equation), ``A`` (an algorithm or
an update rule) or ``E`` (an experiment: a table, a figure, a setting).  ``evidence`` is a
space-separated list of ``prefix:name`` tokens:

=========  =================================================================================
``c:``     a registered check id (:mod:`verification.core.registry`)
``r:``     a reproduction name (``pflt reproduce NAME``, :mod:`verification.experiments.reproductions`)
``file:``  a committed result file (a path in the repository) holding numbers of the item
``fig:``   a figure module of :mod:`paper_figures` (``pflt figures --only NAME``)
``f:``     a section of the formula registry (``pflt formulas --section ID``)
``t:``     a test file (a path in the repository)
=========  =================================================================================

``missing`` says what the evidence leaves out (an item with it is at best *partial*); an item
without evidence must say why (*absent*).  ``text`` names the text of a paper with two texts
(CGPFL: ``IJCAI`` / ``ICLR``) where only one has the item.
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = {"T": "theory", "A": "algorithm", "E": "experiment"}
PREFIXES = {"c": "checks", "r": "reproductions", "file": "files", "fig": "figures",
            "f": "formulas", "t": "tests"}


@dataclass(frozen=True)
class Item:
    """An item of a paper: its label as printed, section, kind, one-line statement, the
    evidence by type and what is missing (or, with no evidence, why it is absent)."""

    paper: str
    label: str
    section: str
    kind: str
    statement: str
    checks: tuple[str, ...] = ()
    reproductions: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    figures: tuple[str, ...] = ()
    formulas: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    missing: str = ""
    text: str = ""

    @property
    def key(self) -> str:
        """``paper:label`` — unique in the ledger."""
        return f"{self.paper}:{self.label}"

    @property
    def has_evidence(self) -> bool:
        return any((self.checks, self.reproductions, self.files, self.figures, self.formulas,
                    self.tests))


def table(paper: str, rows) -> tuple[Item, ...]:
    """The items of ``paper`` from its rows ``(label, section, kind, statement, evidence
    [, missing[, text]])`` (see the module docstring)."""
    out = []
    for row in rows:
        label, section, kind, statement, evidence, *rest = row
        if kind not in KINDS:
            raise ValueError(f"{paper} {label}: kind must be one of {sorted(KINDS)}, got {kind!r}")
        found: dict[str, list[str]] = {v: [] for v in PREFIXES.values()}
        for token in evidence.split():
            prefix, sep, name = token.partition(":")
            if not sep or prefix not in PREFIXES or not name:
                raise ValueError(f"{paper} {label}: evidence token {token!r} is not one of "
                                 + ", ".join(f"{p}:NAME" for p in PREFIXES))
            found[PREFIXES[prefix]].append(name)
        item = Item(paper, label, section, KINDS[kind], statement,
                    **{k: tuple(v) for k, v in found.items()},
                    missing=rest[0] if rest else "", text=rest[1] if len(rest) > 1 else "")
        if not item.has_evidence and not item.missing:
            raise ValueError(f"{paper} {label}: no evidence and no reason why it is absent")
        out.append(item)
    return tuple(out)
