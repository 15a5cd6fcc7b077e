"""Every ``python`` and ``bash`` block of the documentation's pages runs as written (issue 36).

The blocks of a page run in order in one temporary directory: python blocks share one
namespace, a bash block's lines run one by one — ``pflt …`` through :func:`pflt.cli.main`
(with ``--no-progress`` where the command has it), ``python -m MOD …`` / ``python FILE …``
through :mod:`runpy`, ``export K=V`` through the environment — and each must exit 0. A block
that cannot run here (it installs packages, needs the network or a Flower deployment, or runs
for many minutes) carries ``<!-- docs-test: skip (why) -->`` on the line before its fence;
:data:`MAX_SKIPPED` caps how many do. ``docs/extending.md`` is assembled into files and run by
``tests/test_extending_doc.py`` and docs/flower.md's python snippets by
``tests/algorithms/flower/test_docs.py`` (:data:`OWN_TEST`). Generated pages (``results/``,
``reference/``) and the archived lab notes are not guides and are not run.
"""

from __future__ import annotations

import os
import re
import runpy
import shlex
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[ ]*\n(?P<code>.*?)^(?P=indent)```[ ]*$",
                   re.M | re.S)
SKIP = re.compile(r"<!-- docs-test: skip \((?P<why>[^)]+)\) -->")
RUN = ("python", "bash")
#: (page, language) → the test that runs those blocks instead (extending.md's blocks make up
#: files; flower.md's python snippets are run, with checks of what they print, beside Flower)
OWN_TEST = {("extending.md", "python"): ROOT / "tests" / "test_extending_doc.py",
            ("extending.md", "bash"): ROOT / "tests" / "test_extending_doc.py",
            ("flower.md", "python"): ROOT / "tests" / "algorithms" / "flower" / "test_docs.py"}
NOT_GUIDES = ("lab_notes.md", "results/", "reference/")
MAX_SKIPPED = 10   # today 10: 3 install, 1 network, 3 Flower machines, 2 long runs, 1 real-data
#                    recipe (run as written in the slow tier: tests/docs/test_data_recipe.py)
PROGRESS = ("run", "sweep", "flower-sim", "verify", "figures")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    code: str
    skip: str | None


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a page, dedented, with its skip reason (or None)."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        why = SKIP.search(before)
        out.append(Block(path.relative_to(DOCS).as_posix(), text[:m.start()].count("\n") + 1,
                         m["lang"], textwrap.dedent(m["code"]), why["why"] if why else None))
    return out


def guide_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md")
                  if not any(p.relative_to(DOCS).as_posix().startswith(n) for n in NOT_GUIDES))


def all_blocks() -> list[Block]:
    return [b for p in guide_pages() for b in blocks(p)]


def commands(code: str) -> list[str]:
    """The shell lines of a bash block: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        line = re.split(r"(?:^|\s)#(?![^']*'\s)", line, maxsplit=1)[0].strip()
        if line:
            out.append(line)
    return out


def _exit_code(call) -> int:
    """The exit status of ``call``: its return value (``main`` returns one), else 0, or the
    code of the ``SystemExit`` it raised."""
    try:
        returned = call()
    except SystemExit as stop:
        return 0 if stop.code is None else stop.code if isinstance(stop.code, int) else 1
    return returned if isinstance(returned, int) else 0


def run_bash(block: Block, monkeypatch) -> None:
    from pflt.cli import main

    for line in commands(block.code):
        argv = shlex.split(line)
        where = f"{block.page}:{block.line}: {line}"
        if argv[0] == "export":
            key, value = argv[1].split("=", 1)
            monkeypatch.setenv(key, value)
        elif argv[0] == "pflt":
            args = argv[1:]
            if args and args[0] in PROGRESS and "--help" not in args:
                args.append("--no-progress")
            assert _exit_code(lambda: main(args)) == 0, where
        elif argv[:2] == ["python", "-m"]:
            monkeypatch.setattr(sys, "argv", argv[2:])
            assert _exit_code(lambda: runpy.run_module(argv[2], run_name="__main__")
                              and None) == 0, where
        elif argv[0] == "python" and argv[1].endswith(".py"):
            monkeypatch.setattr(sys, "argv", argv[1:])
            assert _exit_code(lambda: runpy.run_path(str(ROOT / argv[1]),
                                                     run_name="__main__") and None) == 0, where
        else:
            pytest.fail(f"{where}: the docs test does not know how to run this line; "
                        "mark the block `<!-- docs-test: skip (why) -->` if it cannot run here")


def test_every_guide_is_run_by_a_test():
    pages = {p.relative_to(DOCS).as_posix() for p in guide_pages()}
    assert {"quickstart.md", "data.md", "algorithms.md", "verification.md", "flower.md",
            "extending.md", "index.md"} <= pages
    for (page, lang), test in OWN_TEST.items():
        text = test.read_text()
        assert f'"{page}"' in text and f'"{lang}"' in text.replace("```python", '"python"'), \
            f"{test.name} does not run the {lang} blocks of {page}"


def _ours(b: Block) -> bool:
    return b.lang in RUN and (b.page, b.lang) not in OWN_TEST


def test_few_blocks_are_skipped_and_each_says_why():
    skipped = [b for b in all_blocks() if b.skip]
    assert len(skipped) <= MAX_SKIPPED, [f"{b.page}:{b.line} ({b.skip})" for b in skipped]
    assert all(_ours(b) for b in skipped), "a skip marker on a block no test would run"
    run = [b for b in all_blocks() if _ours(b) and not b.skip]
    assert len(run) >= 5, "the docs test runs (almost) nothing"


def test_commands_are_never_in_an_unrun_block():
    """A block without a language (or ``text``) is not run, so it must not hold commands."""
    for b in all_blocks():
        if b.lang not in RUN and b.lang != "toml":
            assert not re.search(r"^(pflt|python) ", b.code, re.M), f"{b.page}:{b.line}"


def _pages_with_code() -> list[str]:
    return [p.relative_to(DOCS).as_posix() for p in guide_pages()
            if any(_ours(b) and not b.skip for b in blocks(p))]


@pytest.mark.parametrize("page", _pages_with_code())
def test_the_page_runs_as_written(page, tmp_path, monkeypatch, isolated_plugins):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("FLWR_TELEMETRY_ENABLED", "0")
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for b in blocks(DOCS / page):
        if b.skip or not _ours(b):
            continue
        if b.lang == "python":
            exec(compile(b.code, f"docs/{b.page}:{b.line}", "exec"), namespace)
        else:
            run_bash(b, monkeypatch)
        ran += 1
    assert ran >= 1
    assert os.getcwd() == str(tmp_path)
