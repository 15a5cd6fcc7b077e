"""The documentation site shows the figures ``pflt figures`` drew (issue 45 item 6):
paper_figures/site_figures.py, the mkdocs hook, on a planted figures directory (the full
build with --strict is tests/docs/test_site.py's slow test)."""

from __future__ import annotations

from types import SimpleNamespace

from paper_figures import site_figures


def _page(uri: str):
    return SimpleNamespace(file=SimpleNamespace(src_uri=uri))


def test_the_figures_page_gets_every_png_verification_figures_first(tmp_path, monkeypatch):
    for name in ("ppfe_linear.png", "worst_case_thm1.png", "bound_tightness_p2.png",
                 "bound_tightness.png", "verification_summary.png", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    monkeypatch.setenv("PFLT_SITE_FIGURES", str(tmp_path))
    text = f"# Figures\n\n{site_figures.MARKER}\n"
    out = site_figures.on_page_markdown(text, _page("figures.md"), None, None)
    shown = [line for line in out.splitlines() if line.startswith("![")]
    assert shown == ["![bound_tightness](figures/bound_tightness.png)",
                     "![bound_tightness_p2](figures/bound_tightness_p2.png)",
                     "![verification_summary](figures/verification_summary.png)",
                     "![worst_case_thm1](figures/worst_case_thm1.png)",
                     "![ppfe_linear](figures/ppfe_linear.png)"]
    assert site_figures.MARKER not in out
    assert site_figures.on_page_markdown(text, _page("index.md"), None, None) == text


def test_without_figures_the_page_says_how_to_draw_them(tmp_path, monkeypatch):
    monkeypatch.setenv("PFLT_SITE_FIGURES", str(tmp_path / "none"))
    out = site_figures.on_page_markdown(site_figures.MARKER, _page("figures.md"), None, None)
    assert "No figures" in out and "pflt figures --quick" in out and "![" not in out


def test_the_page_and_the_hook_are_wired(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert site_figures.MARKER in (root / "docs" / "figures.md").read_text()
    mkdocs = (root / "mkdocs.yml").read_text()
    assert "paper_figures/site_figures.py" in mkdocs and ": figures.md" in mkdocs
