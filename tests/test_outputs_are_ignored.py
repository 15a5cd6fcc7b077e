"""Every output directory a documented command writes is git-ignored (issue 36: `cmp/`, the
output of a README command, was not): the ``--out`` of every command in README.md, docs/ and
the commands' own examples, and every ``--out`` default."""

import argparse
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pflt.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
OUT = re.compile(r"--out(?:-dir)?[ =]+([\w./-]+)")
#: outputs that are committed on purpose: the result files the README and the docs cite
COMMITTED = ("paper_figures/results", "benchmarks/results", "docs/results")


def documented_outputs() -> set[str]:
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "pflt" / "commands").glob("*.py"))]
    found = {m.group(1) for t in texts for m in OUT.finditer(t.read_text())}
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for p in sub.choices.values():
        found |= {str(a.default) for a in p._actions if "--out" in a.option_strings and a.default}
    return {f for f in found if f != "DIR" and not f.startswith("/") and f[0].isalnum()
            and not f.rstrip("/").startswith(COMMITTED)}


def test_every_documented_output_is_ignored():
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = documented_outputs()
    assert {"cmp/", "runs/verify", "verify_out", "compare_out"} <= outputs
    probes = [str(Path(o) / "report.md") for o in sorted(outputs)]
    res = subprocess.run(["git", "check-ignore", "--no-index", "--stdin"], cwd=ROOT,
                         input="\n".join(probes), capture_output=True, text=True)
    ignored = set(res.stdout.split())
    assert not set(probes) - ignored, f"not git-ignored: {sorted(set(probes) - ignored)}"
