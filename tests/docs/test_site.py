"""The documentation site builds with warnings as errors (``mkdocs build --strict``), as CI
builds it (issue 36); its navigation holds every guide, the generated pages and one API
reference page per top-level package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pfl_theory", "synthetic", "algorithms", "verification", "paper_figures", "pflt")


def _nav() -> str:
    return (ROOT / "mkdocs.yml").read_text()


def test_the_nav_has_every_guide_the_generated_pages_and_the_api():
    nav = _nav()
    for page in ("quickstart.md", "data.md", "algorithms.md", "verification.md",
                 "worst_case.md", "selection.md", "flower.md", "extending.md", "formulas.md",
                 "results/findings.md", "results/benchmarks.md"):
        assert f": {page}" in nav, page
    for package in PACKAGES:
        assert f"reference/{package}.md" in nav
        assert f"::: {package}" in (ROOT / "docs" / "reference" / f"{package}.md").read_text()
    top = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert top == set(PACKAGES), "a top-level package without an API page (or the reverse)"


@pytest.mark.slow
def test_the_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the [docs] extra is not installed")
    pytest.importorskip("mkdocstrings_handlers.python")
    # a figure pflt figures drew: the site shows it (paper_figures/site_figures.py)
    figures = tmp_path / "figures_out"
    figures.mkdir()
    png = _png()
    (figures / "verification_summary.png").write_bytes(png)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PFLT_SITE_FIGURES": str(figures)}
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                          str(tmp_path / "site")], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    html = (tmp_path / "site" / "reference" / "algorithms" / "index.html").read_text()
    assert "get_algorithm" in html                 # the API page was rendered from docstrings
    assert (tmp_path / "site" / "results" / "findings" / "index.html").is_file()
    assert (tmp_path / "site" / "figures" / "verification_summary.png").read_bytes() == png
    page = (tmp_path / "site" / "figures" / "index.html").read_text()
    assert 'src="verification_summary.png"' in page     # figures/index.html, beside it


def _png() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1, 1))
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
