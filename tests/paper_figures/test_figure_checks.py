"""Every figure of paper_figures, drawn in quick mode, passes paper_figures.figure_checks
(issue 36: titles off the canvas, an absolute path in a title, legend entries missing, bar
axes from 43, ``2×10⁰`` tick labels …); each check fails on a figure planted with its fault,
and paper_figures._style.save_figure repairs the two it can repair by itself."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from paper_figures import driver, figure_checks  # noqa: E402
from paper_figures._style import save_figure, shown_path  # noqa: E402


def _kinds(fig):
    return {c for c, _ in figure_checks.problems(fig)}


def _good():
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([1, 2, 3], [3, 1, 2], label="a")
    ax.set_title("a title")
    ax.legend()
    fig.tight_layout()
    return fig, ax


def test_a_clean_figure_passes():
    fig, _ = _good()
    assert figure_checks.problems(fig) == []
    plt.close(fig)


@pytest.mark.parametrize("fault, kind", [
    (lambda fig, ax: ax.set_title("x" * 300), "inside"),
    (lambda fig, ax: ax.set_title("from /home/someone/runs/verify/results.json"), "path"),
    (lambda fig, ax: ax.plot([1, 2], [2, 2], label="e(K)"), "legend"),
    (lambda fig, ax: ax.set_title(""), "title"),
    (lambda fig, ax: (ax.bar([0, 1], [50, 60], label="a"), ax.set_ylim(43, 70)), "bars"),
    (lambda fig, ax: (ax.set_xscale("log"), ax.set_xlim(1, 4)), "log_ticks"),
    (lambda fig, ax: (fig.suptitle("a suptitle", y=0.9), ax.set_title("T\nT\nT")), "overlap"),
    # issue 45: numbers on bars on top of each other, x ticks running together, the plot a
    # thin strip beside long labels
    (lambda fig, ax: (ax.text(2, 2, "12"), ax.text(2.01, 2, "34")), "text_overlap"),
    (lambda fig, ax: ax.set_xticks([1, 1.05, 3], ["one long tick", "another long", "3"]),
     "tick_collision"),
    (lambda fig, ax: ax.set_xticks([1, 1.05, 3], ["one long tick", "another long", "3"],
                                   rotation=30, ha="right"), "tick_collision"),
    (lambda fig, ax: (ax.set_yticks([1, 2], ["a long paper name, " * 2, "b"]),
                      fig.subplots_adjust(left=0.8, right=0.98)), "squeezed"),
    (lambda fig, ax: fig.subplots_adjust(top=0.9, bottom=0.85), "squeezed"),
])
def test_each_check_fails_on_its_fault(fault, kind):
    fig, ax = _good()
    fault(fig, ax)
    assert kind in _kinds(fig)
    plt.close(fig)


def test_each_new_check_passes_the_repaired_figure():
    """The same figures, repaired (numbers apart, fewer ticks, short labels), pass: the
    checks see the fault, not the kind of artist."""
    fig, ax = _good()
    ax.text(1.2, 2, "12")
    ax.text(2.8, 2, "34")
    ax.set_xticks([1, 2, 3], ["one", "two", "3"])
    ax.set_yticks([1, 2], ["a", "b"])
    fig.tight_layout()
    assert figure_checks.problems(fig) == []
    # long slanted labels: their boxes overlap, their ink does not
    ax.set_xticks([1, 1.4, 1.8], ["a long slanted label"] * 3, rotation=30, ha="right")
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    first, second = ax.xaxis.get_majorticklabels()[:2]
    assert figure_checks._collide(first.get_window_extent(renderer),
                                  second.get_window_extent(renderer))
    assert figure_checks.problems(fig) == []
    plt.close(fig)


def test_save_figure_labels_small_log_ticks_plainly_and_wraps_long_titles(tmp_path):
    fig, ax = _good()
    ax.set_xscale("log")
    ax.set_xlim(1, 4)
    fig.suptitle("a long suptitle " * 12)
    assert {"log_ticks", "inside"} <= _kinds(fig)
    save_figure(fig, tmp_path / "f.png")
    assert not {"log_ticks", "inside"} & _kinds(fig)
    labels = {t.get_text() for t in ax.xaxis.get_majorticklabels() +
              ax.xaxis.get_minorticklabels() if t.get_text()}
    assert {"1", "2", "3"} <= labels
    plt.close(fig)


def test_shown_path_is_never_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "runs" / "verify" / "results.json") == \
        "runs/verify/results.json"
    assert shown_path("/elsewhere/verify/results.json") == "…/verify/results.json"


@pytest.mark.slow
def test_every_figure_in_quick_mode_passes_every_check(tmp_path, monkeypatch):
    """All figure modules at their quick sizes (minutes on a loaded machine), the verify
    figures from a planted two-check results.json."""
    import json

    from paper_figures._io import RESULTS_ENV_VAR

    results = tmp_path / "results.json"
    results.write_text(json.dumps({"size": "quick", "seeds": [0], "environment": {},
                                   "checks": [{"id": "p.a", "paper": "pFedMe", "kind": "rate",
                                               "verdict": "HOLDS", "results": []},
                                              {"id": "p.b", "paper": "CGPFL", "kind": "bound",
                                               "verdict": "FAILS", "results": []}]}))
    monkeypatch.setenv(RESULTS_ENV_VAR, str(results))
    with figure_checks.recording() as seen:
        found = driver.run_figures(out_dir=tmp_path / "figs", quick=True, progress=False)
    assert all(r.ok for r in found), [(r.name, r.error) for r in found if not r.ok]
    assert len(seen) >= 20
    bad = {name: probs for name, probs in seen.items() if probs}
    assert not bad, bad
