"""What every figure of :mod:`paper_figures` must get right for a reader (issue 36), checked on
the drawn :class:`matplotlib.figure.Figure` itself:

* ``title``: the figure has a title (a suptitle or one on every panel);
* ``inside``: every title, axis label and legend lies inside the canvas (none runs off an
  edge);
* ``overlap``: the suptitle does not collide with a panel's title;
* ``path``: no title carries an absolute file path (a machine's directory is not a caption);
* ``legend``: every labelled line, bar group and scatter of a panel is in a legend;
* ``bars``: a bar axis of non-negative bars on a linear scale starts at 0;
* ``log_ticks``: no log-axis tick label is an integer written as ``m×10⁰`` (T = 2, 3 …);
* ``text_overlap``: no two texts of the figure (titles, axis labels, annotations such as the
  numbers on bars, legend entries, the suptitle) overlap each other (issue 45);
* ``tick_collision``: no two tick labels of one axis overlap (x ticks running together);
* ``squeezed``: the plot area is not squeezed by its labels, legend or title: the panels
  together cover at least :data:`MIN_PLOT_AREA` of the canvas, the widest panel at least
  :data:`MIN_PLOT_WIDTH` of its width and the tallest :data:`MIN_PLOT_HEIGHT` of its height
  (a thin strip beside long labels fails, so does a grid of too many rows in one image).

:func:`problems` returns ``(check, message)`` pairs; :func:`recording` collects them for every
figure saved inside the block (tests/paper_figures/test_figure_checks.py draws every figure
module in quick mode under it).
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

CHECKS = ("title", "inside", "overlap", "path", "legend", "bars", "log_ticks", "text_overlap",
          "tick_collision", "squeezed")
ABSOLUTE_PATH = re.compile(r"(?:^|[\s(:'\"])/(?:[\w.-]+/)+[\w.-]*")
TIMES_TEN_TO_ZERO = re.compile(r"\\times\s*10\^\{?0\}?|×\s*10⁰")
PIXELS = 1.0      # a bounding box may touch the canvas edge by a pixel of antialiasing
#: the panels' share of the canvas below which the plot is squeezed: a single panel with its
#: title, axis labels and a legend beside it keeps ~45–70 % of the canvas in every figure of
#: paper_figures; the unreadable verification_summary (issue 45) kept 18 %
MIN_PLOT_AREA = 0.25
#: the widest panel's share of the canvas width: a grid of 3 columns keeps ~26 % per panel,
#: the thin strip beside long labels of issue 45 kept 22 %
MIN_PLOT_WIDTH = 0.25
#: the tallest panel's share of the canvas height: a page of 4 rows keeps ~16 % per panel,
#: the 13 rows of one 1386×4224 image (issue 45) kept ~6 %
MIN_PLOT_HEIGHT = 0.10
#: two boxes overlap when they share more than this many pixels each way (antialiased
#: edges of neighbouring texts touch by a pixel without a reader seeing a collision)
OVERLAP_PX = 1.5


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
        found += _tick_collisions(ax, renderer)
    found += _text_overlaps(fig, renderer)
    found += _squeezed(panels, width, height, renderer)
    return found


def _all_texts(fig) -> list:
    """Every visible, non-empty text a reader reads: titles, axis labels, annotations
    (``ax.text``, e.g. numbers on bars), figure texts and legend entries and titles."""
    out = list(_texts(fig)) + list(fig.texts)
    for ax in fig.axes:
        out += list(ax.texts)
    for lg in list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        out += list(lg.get_texts()) + [lg.get_title()]
    seen, unique = set(), []
    for t in out:
        if id(t) not in seen and t.get_visible() and t.get_text().strip():
            seen.add(id(t))
            unique.append(t)
    return unique


def _collide(a, b) -> bool:
    """Whether two window extents overlap by more than :data:`OVERLAP_PX` each way."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > OVERLAP_PX
            and min(a.y1, b.y1) - max(a.y0, b.y0) > OVERLAP_PX)


def _text_overlaps(fig, renderer) -> list[tuple[str, str]]:
    texts = _all_texts(fig)
    boxes = [t.get_window_extent(renderer) for t in texts]
    found = []
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            if _collide(boxes[i], boxes[j]):
                found.append(("text_overlap", f"{texts[i].get_text()[:40]!r} overlaps "
                                              f"{texts[j].get_text()[:40]!r}"))
    return found


def _tick_collisions(ax, renderer) -> list[tuple[str, str]]:
    found = []
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        ticks = [t for t in axis.get_majorticklabels() + axis.get_minorticklabels()
                 if t.get_visible() and t.get_text().strip()]
        boxes = sorted(((t.get_window_extent(renderer), t.get_text(), t) for t in ticks),
                       key=lambda b: (b[0].x0, b[0].y0))
        for k, (a, ta, sa) in enumerate(boxes):
            hit = next((tb for b, tb, sb in boxes[k + 1:]
                        if _collide(a, b) and _slanted_collide(sa, sb, renderer)), None)
            if hit is not None:
                found.append(("tick_collision", f"panel {ax.get_title()[:40]!r}: {name} tick "
                                                f"labels {ta!r} and {hit!r} run together"))
                break
    return found


def _slanted_collide(a, b, renderer) -> bool:
    """Two tick labels whose boxes overlap: upright ones collide; two parallel labels slanted
    by θ (not a multiple of 90°) collide only when their baselines are closer than a line of
    text — the box of a slanted label is far larger than its ink — i.e. when the distance
    of their anchors across the slant, |Δ|·|sin θ| along the axis, is under its height."""
    import math

    theta = a.get_rotation()
    if theta % 90 == 0 or b.get_rotation() != theta:
        return True
    (ax_, ay), (bx, by) = (t.get_transform().transform(t.get_position()) for t in (a, b))
    gap = abs(ax_ - bx) + abs(ay - by)                    # one of the two is 0 on an axis
    lines = max(t.get_text().count("\n") + 1 for t in (a, b))
    height = a.get_fontsize() * renderer.points_to_pixels(1.0) * 1.2 * lines
    return gap * abs(math.sin(math.radians(theta))) < height


def _squeezed(panels, width: int, height: int, renderer) -> list[tuple[str, str]]:
    if not panels:
        return []
    boxes = [ax.get_window_extent(renderer) for ax in panels]
    area = sum(b.width * b.height for b in boxes) / (width * height)
    wide = max(b.width for b in boxes) / width
    tall = max(b.height for b in boxes) / height
    found = []
    if area < MIN_PLOT_AREA:
        found.append(("squeezed", f"the panels cover {area:.0%} of the canvas "
                                  f"(< {MIN_PLOT_AREA:.0%}): labels, legend or title take "
                                  f"the rest"))
    if wide < MIN_PLOT_WIDTH:
        found.append(("squeezed", f"the widest panel is {wide:.0%} of the canvas wide "
                                  f"(< {MIN_PLOT_WIDTH:.0%}): a strip beside its labels"))
    if tall < MIN_PLOT_HEIGHT:
        found.append(("squeezed", f"the tallest panel is {tall:.0%} of the canvas high "
                                  f"(< {MIN_PLOT_HEIGHT:.0%}): too many rows in one image"))
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
