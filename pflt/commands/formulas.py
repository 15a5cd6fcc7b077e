"""``pflt formulas``: the formula reference, generated from the code.

Examples::

    pflt formulas                      # one entry per implemented formula (terminal)
    pflt formulas --section B.6        # the formulas of one section (prefix match)
    pflt formulas --markdown           # the Markdown reference (= docs/formulas.md)
    pflt formulas --write docs/formulas.md

Each entry: the paper and equation/theorem, the provenance (legible, read from a garbled
copy, derived, from the authors' code, reconstructed), the reading chosen where the paper is
ambiguous or in error, and the dotted names of the functions that implement it.  The
provenance tags in brackets are explained under the list (e.g. ``[SEED-GARBLED→READ]``: the
formula is printed in the paper, but the only text copy of it had its symbols scrambled,
and it was read back from that copy — the reading line says how).  Source
files cite these sections as ``docs/formulas.md §X.Y``.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "formulas", help="the formula reference: paper, equation, reading, implementing code",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--section", metavar="ID", default=None,
                   help="only formulas whose section id starts with ID (e.g. B.6, C.5)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print the Markdown reference")
    out.add_argument("--write", metavar="PATH", type=Path, default=None,
                     help="write the Markdown reference to PATH (e.g. docs/formulas.md)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pfl_theory import formulas

    if args.write is not None:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(formulas.render_markdown(), encoding="utf-8")
        print(f"wrote {args.write} ({len(formulas.FORMULAS)} formulas, "
              f"{len(formulas.SECTIONS)} sections)")
        return 0
    if args.markdown:
        print(formulas.render_markdown(), end="")
        return 0
    chosen = [f for f in formulas.FORMULAS
              if args.section is None or f.section == args.section
              or f.section.startswith(args.section + ".")]
    if args.section is not None and args.section not in formulas.section_ids():
        raise ValueError(f"--section {args.section!r} is not a section of the reference; "
                         f"known: A … F, e.g. A.5, B.6, C.5.10, D.2")
    for f in chosen:
        print(f"§{f.section:<7}{f.name}  [{f.provenance}]")
        print(f"         {f.paper}, {f.equation}")
        print(f"         reading: {f.reading}")
        print(f"         implemented by: {', '.join(f.implementations)}")
    print(f"{len(chosen)} formula(s)")
    for tag in sorted({f.provenance for f in chosen}):   # what each [TAG] above means
        print(f"[{tag}] = {EXPLAINED.get(tag) or formulas.PROVENANCE.get(tag, 'see docs/formulas.md')}")
    return 0


#: the tags whose one-line meaning (pfl_theory.formulas.PROVENANCE) needs a sentence more
EXPLAINED = {
    "SEED-GARBLED→READ": "printed in the paper, but the text copy we read it from had the "
                         "formula's symbols scrambled (a garbled extraction of the PDF); it "
                         "was read back from that copy, and the 'reading' line states every "
                         "choice that reading made",
}
