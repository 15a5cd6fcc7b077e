"""The documentation site shows the figures ``pflt figures`` drew (an mkdocs hook; no
``make``, so not a figure module).

``mkdocs.yml`` names this file under ``hooks:``.  At build time it adds every PNG of the
figures directory — ``$PFLT_SITE_FIGURES`` if set, else ``figures_out/`` (where ``pflt
figures`` writes by default) — to the site under ``figures/``, and fills the page
``docs/figures.md`` with them: the comparison of bounds, worst cases and measurements first
(``bound_tightness*``, ``verification_summary``, ``worst_case_*``), then the papers' curves.
The PNGs are not in the repository (they are drawn, not committed); without any the page
says how to draw them, so ``mkdocs build --strict`` passes either way::

    pflt figures --quick && mkdocs build --strict      # the site with its figures
"""

from __future__ import annotations

import os
from pathlib import Path

#: the page the figures go on, and the marker in it they replace
PAGE = "figures.md"
MARKER = "<!-- figures: drawn by pflt figures, added at build time -->"
FIRST = ("bound_tightness", "verification_summary", "worst_case")


def figures_dir() -> Path:
    return Path(os.environ.get("PFLT_SITE_FIGURES") or "figures_out")


def pngs(directory: Path | None = None) -> list[Path]:
    """The PNGs to show, the verification figures first, each group by name."""
    directory = figures_dir() if directory is None else Path(directory)
    found = sorted(p for p in directory.glob("*.png") if p.is_file() and not p.is_symlink())

    def rank(p: Path) -> tuple[int, str]:
        first = [i for i, name in enumerate(FIRST) if p.stem.startswith(name)]
        return (first[0] if first else len(FIRST), p.name)
    return sorted(found, key=rank)


def gallery(found: list[Path], directory: Path) -> str:
    """The Markdown that replaces :data:`MARKER`."""
    if not found:
        return (f"No figures in `{directory}` when this site was built: run `pflt figures "
                f"--quick` (after `pflt verify --quick --out runs/verify`), then build the "
                f"site again.")
    lines = [f"{len(found)} figure(s) from `{directory}`, drawn by `pflt figures`; each "
             f"has a CSV of its plotted numbers beside it there.", ""]
    for p in found:
        lines += [f"### {p.stem}", "", f"![{p.stem}](figures/{p.name})", ""]
    return "\n".join(lines)


def on_files(files, config):
    """mkdocs hook: every PNG of :func:`figures_dir` becomes ``figures/<name>.png``."""
    from mkdocs.structure.files import File

    for p in pngs():
        files.append(File.generated(config, f"figures/{p.name}", abs_src_path=str(p.resolve())))
    return files


def on_page_markdown(markdown, page, config, files):
    """mkdocs hook: the figures page gets its gallery."""
    if page.file.src_uri != PAGE or MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, gallery(pngs(), figures_dir()))
