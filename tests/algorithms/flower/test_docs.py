"""The Python snippets of docs/flower.md run as written (a fresh user copies them)."""

import re
from pathlib import Path

import pytest

pytest.importorskip("flwr", reason="the Flower docs need the optional extra 'flower'")

DOC = Path(__file__).resolve().parents[3] / "docs" / "flower.md"


def snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_docs_have_python_snippets():
    assert snippets(), f"no ```python block in {DOC}"


def cases():
    """Each snippet; one that starts a real deployment (processes, ~40 s) is slow — the
    same thing runs in the default tier as test_deployment.py."""
    return [pytest.param(i, marks=pytest.mark.slow) if "LocalDeployment" in code else i
            for i, code in enumerate(snippets())]


@pytest.mark.parametrize("index", cases())
def test_python_snippet_runs(index):
    scope: dict = {}
    exec(compile(snippets()[index], f"{DOC.name} snippet {index}", "exec"), scope)
    if "result" in scope:          # the simulate snippet: what its comments promise is there
        result = scope["result"]
        assert result.state.round == 3 and len(result.history) == 3
        assert result.failures == []
    if "work" in scope:            # the deployment snippet: the run completed
        outcome = (scope["work"] / "out" / "outcome.json").read_text()
        assert '"status": "completed"' in outcome
