"""Saving a figure the same way everywhere (``_``-prefixed: not a figure module):
:func:`save_figure` writes the PNG after two fixes that every figure needs
(:mod:`paper_figures.figure_checks` tests the result):

* log axes are labelled with plain numbers between 10⁻³ and 10⁴ — ``1 2 3 5`` rounds, not
  ``10⁰ 2×10⁰ 3×10⁰`` — keeping matplotlib's choice of which ticks carry a label;
* a title wider than its room (the canvas for a suptitle, the panel for a panel title) is
  wrapped onto several lines and the figure laid out again, so no title runs off the canvas;

and :func:`shown_path` is how a caption names a file (never an absolute directory).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from matplotlib.ticker import LogFormatterSciNotation


class PlainLogFormatter(LogFormatterSciNotation):
    """Matplotlib's log-axis labels, with the numbers in [10⁻³, 10⁴) written plainly."""

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        if label and 1e-3 <= abs(x) < 1e4:
            return f"{x:g}"
        return label


def plain_log_ticks(ax) -> None:
    """Every log axis of ``ax`` labelled by :class:`PlainLogFormatter`."""
    for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
        if scale == "log":
            axis.set_major_formatter(PlainLogFormatter())
            axis.set_minor_formatter(PlainLogFormatter(labelOnlyBase=False))


def _wrap(text_artist, room: float, renderer) -> bool:
    """Wrap ``text_artist`` to fit ``room`` pixels; whether it changed."""
    width = text_artist.get_window_extent(renderer).width
    if width <= room or not text_artist.get_text().strip():
        return False
    lines = text_artist.get_text().split("\n")
    longest = max(len(line) for line in lines)
    chars = max(10, int(longest * room / width * 0.95))
    text_artist.set_text("\n".join(w for line in lines
                                   for w in (textwrap.wrap(line, chars) or [""])))
    return True


def fit_titles(fig) -> None:
    """Wrap every title wider than its room (:func:`_wrap`), then lay the figure out again."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width = fig.canvas.get_width_height()[0]
    changed = False
    if fig._suptitle is not None:
        changed |= _wrap(fig._suptitle, 0.96 * width, renderer)
    for ax in fig.axes:
        room = ax.get_window_extent(renderer).width * 1.1
        changed |= _wrap(ax.title, min(room, 0.96 * width), renderer)
    if changed:
        fig.tight_layout()


def shown_path(path) -> str:
    """``path`` as a caption shows it: relative to the working directory when inside it,
    else its last two parts — never a machine's absolute directory."""
    p = Path(path)
    try:
        return p.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return "…/" + "/".join(p.parts[-2:])


def save_figure(fig, path, dpi: int = 120) -> Path:
    """``fig.savefig(path, dpi=dpi)`` after :func:`plain_log_ticks` and :func:`fit_titles`."""
    for ax in fig.axes:
        plain_log_ticks(ax)
    fit_titles(fig)
    fig.savefig(path, dpi=dpi)
    return Path(path)
