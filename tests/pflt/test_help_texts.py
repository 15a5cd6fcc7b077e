"""Help texts a newcomer reads (issue 36): no example line swallowed by a ``\\`` at the end of
a docstring line, every option that has a default says it, and a paper letter means one thing
in the listings (S = clients per round)."""

import argparse
import re

import pytest

from pflt import catalog
from pflt.cli import build_parser, main


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_no_example_line_is_joined_to_the_previous_one():
    """A ``\\`` at the end of a (non-raw) docstring line joins the next line into it with its
    indentation: ``--local-rounds 2         --lam 3``."""
    for name, p in _subparsers().items():
        description = p.format_help().split("\noptions:")[0]
        for line in description.splitlines():
            assert not re.search(r"\S {6,}--\w", line), f"pflt {name} --help: {line!r}"


@pytest.mark.parametrize("command", ["run", "worst-case"])
def test_every_option_with_a_default_says_it(command):
    p = _subparsers()[command]
    for action in p._actions:
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) \
                and action.dest != "help":
            assert action.help and "default" in action.help, \
                f"pflt {command} {action.option_strings[0]} does not say its default"


def test_run_help_shows_the_data_defaults(capsys):
    assert main(["run", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Synthetic(α, β): α (default: 0.5)" in out
    assert "per-client train share (default: 0.75)" in out
    assert "dirichlet concentration (default: 0.5)" in out


def test_s_means_clients_per_round_in_the_listing(capsys):
    assert main(["list", "algorithms"]) == 0
    lines = capsys.readouterr().out.splitlines()
    plain_s = [ln for ln in lines if re.search(r"= \S+\s+\(S\) ", ln)]
    assert plain_s and all(ln.strip().startswith("--clients-per-round") for ln in plain_s)
    cgpfl = next(ln for ln in lines if ln.strip().startswith("--inner-steps") and "(S" in ln)
    assert "(S in its paper; not --clients-per-round)" in cgpfl


def test_display_symbol_only_qualifies_a_shared_letter_used_for_something_else():
    assert catalog.display_symbol("clients_per_round", "S") == "S"
    assert catalog.display_symbol("inner_steps", "K") == "K"
    assert catalog.display_symbol("inner_steps", "S").startswith("S in its paper")


def test_a_citation_inside_parentheses_is_cut_at_its_parenthesis():
    doc = ("* ``my-fedprox`` — FedProx-style local training: R SGD steps plus the term "
           "(μ/2)‖w − w^t‖² (Li, Sahu, Smith, *Federated Optimization in Heterogeneous "
           "Networks*, MLSys 2020, Algorithm 2 with an inexact local solve of R steps); the "
           "server takes the mean.")
    assert catalog._citation(doc) == ("Li, Sahu, Smith, *Federated Optimization in "
                                      "Heterogeneous Networks*, MLSys 2020")


def test_every_paper_line_is_a_whole_citation(isolated_plugins, capsys):
    assert main(["--plugin", "examples/plugin_example.py", "list", "algorithms", "--json"]) == 0
    import json

    for entry in json.loads(capsys.readouterr().out):
        paper = entry["paper"]
        assert paper.count("(") == paper.count(")"), f"{entry['name']}: {paper!r}"
        assert re.search(r"\*[^*]+\*", paper), f"{entry['name']} has no title: {paper!r}"
