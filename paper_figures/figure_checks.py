"""What every figure of :mod:`paper_figures` must get right for a reader (issue 36), checked on
the drawn :class:`matplotlib.figure.Figure` itself:

* ``title``: the figure has a title (a suptitle or one on every panel);
* ``inside``: every title, axis label and legend lies inside the canvas (none runs off an
  edge);
* ``overlap``: the suptitle does not collide with a panel's title;
* ``path``: no title carries an absolute file path (a machine's directory is not a caption);
* ``legend``: every labelled line, bar group and scatter of a panel is in a legend;
* ``bars``: a bar axis of non-negative bars on a linear scale starts at 0;
* ``log_ticks``: no log-axis tick label is an integer written as ``m×10⁰`` (T = 2, 3 …).

:func:`problems` returns ``(check, message)`` pairs; :func:`recording` collects them for every
figure saved inside the block (tests/paper_figures/test_figure_checks.py draws every figure
module in quick mode under it).
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

CHECKS = ("title", "inside", "overlap", "path", "legend", "bars", "log_ticks")
ABSOLUTE_PATH = re.compile(r"(?:^|[\s(:'\"])/(?:[\w.-]+/)+[\w.-]*")
TIMES_TEN_TO_ZERO = re.compile(r"\\times\s*10\^\{?0\}?|×\s*10⁰")
PIXELS = 1.0      # a bounding box may touch the canvas edge by a pixel of antialiasing


def _texts(fig) -> list:
    """The figure's titles and axis labels that hold text."""
    out = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
    return [t for t in out if t is not None and t.get_visible() and t.get_text().strip()]


def _legend_labels(fig) -> set[str]:
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return {t.get_text() for lg in legends for t in lg.get_texts()}


def _labelled_artists(ax) -> list[str]:
    labels = [a.get_label() for a in list(ax.lines) + list(ax.collections)]
    labels += [c.get_label() for c in ax.containers]
    return [lb for lb in labels if lb and not lb.startswith("_")]


def _bar_problem(ax) -> str | None:
    from matplotlib.container import BarContainer

    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if not bars:
        return None
    vertical = all(getattr(c, "orientation", "vertical") != "horizontal" for c in bars)
    values = [r.get_height() if vertical else r.get_width() for c in bars for r in c.patches]
    if not values or min(values) < 0:
        return None
    scale = ax.get_yscale() if vertical else ax.get_xscale()
    low = (ax.get_ylim() if vertical else ax.get_xlim())[0]
    if scale == "linear" and low > 0:
        return f"bar axis starts at {low:g}, not 0 (panel {ax.get_title()!r})"
    return None


def problems(fig) -> list[tuple[str, str]]:
    """Every check of :data:`CHECKS` that ``fig`` fails, as ``(check, message)``."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    width, height = fig.canvas.get_width_height()
    found = []
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison]
    # a twin (twinx/twiny) shares its panel's box: the panel's title and legend serve both
    panels = [ax for i, ax in enumerate(axes)
              if not any(ax.get_position().bounds == other.get_position().bounds
                         for other in axes[:i])]
    if fig._suptitle is None and any(not ax.get_title().strip() for ax in panels):
        found.append(("title", "no suptitle and a panel without a title"))
    for t in _texts(fig):
        box = t.get_window_extent(renderer)
        if box.x0 < -PIXELS or box.y0 < -PIXELS or box.x1 > width + PIXELS or \
                box.y1 > height + PIXELS:
            found.append(("inside", f"{t.get_text()!r} runs off the canvas "
                                    f"({box.x0:.0f}..{box.x1:.0f} of {width} px wide)"))
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for lg in legends:
        box = lg.get_window_extent(renderer)
        if box.x0 < -PIXELS or box.y0 < -PIXELS or box.x1 > width + PIXELS or \
                box.y1 > height + PIXELS:
            found.append(("inside", f"a legend ({len(lg.get_texts())} entries) is cut by the "
                                    f"canvas edge"))
    titles = [t for t in _texts(fig) if t is not fig._suptitle
              and any(t is ax.title for ax in fig.axes)]
    if fig._suptitle is not None and fig._suptitle.get_text().strip():
        top = fig._suptitle.get_window_extent(renderer)
        for t in titles:
            if top.overlaps(t.get_window_extent(renderer)):
                found.append(("overlap", f"suptitle collides with title {t.get_text()!r}"))
    for t in _texts(fig):
        if ABSOLUTE_PATH.search(t.get_text()):
            found.append(("path", f"absolute path in {t.get_text()!r}"))
    shown = _legend_labels(fig)
    for ax in axes:
        missing = sorted(set(_labelled_artists(ax)) - shown)
        if missing:
            found.append(("legend", f"panel {ax.get_title()!r}: {missing} not in any legend"))
        bar = _bar_problem(ax)
        if bar:
            found.append(("bars", bar))
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale != "log":
                continue
            ticks = axis.get_majorticklabels() + axis.get_minorticklabels()
            bad = [t.get_text() for t in ticks if t.get_visible()
                   and TIMES_TEN_TO_ZERO.search(t.get_text())]
            if bad:
                found.append(("log_ticks", f"panel {ax.get_title()!r}: {bad[:3]}"))
    return found


@contextlib.contextmanager
def recording() -> Iterator[dict[str, list[tuple[str, str]]]]:
    """Inside the block, every ``Figure.savefig`` first records :func:`problems` of that
    figure under the saved file's name."""
    from pathlib import Path

    from matplotlib.figure import Figure

    seen: dict[str, list[tuple[str, str]]] = {}
    original = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        seen[Path(str(fname)).name] = problems(self)
        return original(self, fname, *args, **kwargs)

    Figure.savefig = savefig
    try:
        yield seen
    finally:
        Figure.savefig = original
