"""The formula registry: every implementing name exists, docs/formulas.md is in sync, every
``§X.Y`` cited in the repository exists in it, and no file cites a path outside the repo."""

import importlib
import re
import subprocess
from pathlib import Path

import pytest

from pfl_theory import formulas

ROOT = Path(__file__).resolve().parents[2]


def _resolve(dotted: str):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize("formula", formulas.FORMULAS, ids=lambda f: f"{f.section}:{f.name[:30]}")
def test_every_implementing_name_resolves_and_is_documented(formula):
    assert formula.section in formulas.section_ids()
    assert formula.provenance in formulas.PROVENANCE
    assert formula.paper and formula.equation and formula.reading and formula.implementations
    for name in formula.implementations:
        obj = _resolve(name)
        assert (getattr(obj, "__doc__", None) or "").strip(), f"{name} has no docstring"


def test_section_ids_are_unique():
    ids = formulas.section_ids()
    assert len(ids) == len(set(ids))


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:  # not a git checkout (an installed copy): nothing to scan
        pytest.skip("not a git checkout")
    return [ROOT / line for line in out.stdout.splitlines()
            if line.endswith((".py", ".md", ".toml", ".txt", ".cfg", ".yml", ".yaml"))
            and (ROOT / line).is_file()]


def test_docs_formulas_md_is_the_rendered_registry():
    committed = (ROOT / "docs" / "formulas.md").read_text(encoding="utf-8")
    assert committed == formulas.render_markdown(), (
        "docs/formulas.md is out of date: run `pflt formulas --write docs/formulas.md`")


# "§C.5.12", "§E.A 12" (item 12 of §E.A), "§E.D1"; ranges "§D.3–D.5" check both ends
_CITE = re.compile(r"§ ?([A-F](?:\.[A-Z]?\d+)*(?:\.[A-Z])?)(?: (\d+)\b)?(?:[–-]§?([A-F]?\.?[A-Z]?\d+(?:\.\d+)*))?")


def _cited_ids(text: str) -> set[str]:
    ids = set()
    for m in _CITE.finditer(text):
        sid = m.group(1)
        if m.group(2) and sid.startswith("E.") and len(sid) == 3:
            sid += m.group(2)
        ids.add(sid)
        end = m.group(3)
        if end:
            if sid.startswith("E.") and re.fullmatch(r"[A-D]\.?\d+", end):  # "§E.C3–C.9"
                end = "E." + end.replace(".", "")
            elif not end[0].isalpha():  # "§E.B7–9" -> E.B9
                end = re.sub(r"\d+$", end, sid)
            elif not end.startswith(sid[0]) or (sid.startswith("E.") and not end.startswith("E")):
                end = (sid[:2] + end) if sid.startswith("E.") else end
            ids.add(end)
    return ids


def test_cite_parser_reads_items_and_ranges():
    assert _cited_ids("docs/formulas.md §D.3–D.5, checks §E.D5") == {"D.3", "D.5", "E.D5"}
    assert _cited_ids("§E.A 12 and §E.B7–9 and §C.5.12") == {"E.A12", "E.B7", "E.B9", "C.5.12"}
    assert _cited_ids("§A.3–§A.5") == {"A.3", "A.5"}
    assert _cited_ids("§E.D1–D3") == {"E.D1", "E.D3"}
    assert _cited_ids("checks §E.C3–C.9, C.11") == {"E.C3", "E.C9"}


def test_every_cited_section_exists_in_the_reference():
    known = set(formulas.section_ids())
    missing = {}
    me = Path(__file__).resolve()
    for path in _tracked_files():
        if path.name == "formulas.md" or path.resolve() == me:  # this file cites made-up ids
            continue
        for sid in _cited_ids(path.read_text(encoding="utf-8", errors="replace")):
            if sid not in known:
                missing.setdefault(sid, []).append(str(path.relative_to(ROOT)))
    assert not missing, f"cited sections absent from docs/formulas.md: {missing}"


def test_a_made_up_citation_would_be_caught():
    # the check above can fail: a citation of a section that does not exist is reported
    assert "A.99" in _cited_ids("see docs/formulas.md §A.99") - set(formulas.section_ids())


OUTSIDE = re.compile(r"/work/|\.\./shared|shared/spec|shared/seeds|shared/reference|"
                     r"FORMULAS\.md|DESIGN\.md|STYLE\.md")


def test_no_tracked_file_cites_a_path_outside_the_repository():
    me = Path(__file__).resolve()
    offenders = []
    for path in _tracked_files():
        if path.resolve() == me:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not offenders, "paths outside the repository:\n" + "\n".join(offenders)


_HELPERS = {"validation", "threads", "formulas", "safe_files", "plugins", "user_cache",
            "sample_stats"}  # utilities, not formulas


def test_every_public_theory_function_is_in_the_registry():
    import inspect
    import pkgutil

    import pfl_theory

    listed = {n for f in formulas.FORMULAS for n in f.implementations}
    unlisted = []
    for info in pkgutil.iter_modules(pfl_theory.__path__):
        if info.name in _HELPERS:
            continue
        module = importlib.import_module(f"pfl_theory.{info.name}")
        for name, obj in vars(module).items():
            if (not name.startswith("_") and inspect.isfunction(obj)
                    and obj.__module__ == module.__name__
                    and f"{module.__name__}.{name}" not in listed):
                unlisted.append(f"{module.__name__}.{name}")
    assert not unlisted, ("theory functions missing from pfl_theory/formulas.py (add them, "
                          "then `pflt formulas --write docs/formulas.md`): " + ", ".join(unlisted))
