"""``pflt list`` and ``pflt run --algorithm X --help`` (in-process through pflt.cli.main)."""

import json

import pytest

from pflt.cli import main
from pflt import catalog


def test_list_algorithms_json_has_every_registered_algorithm_with_defaults(capsys):
    from algorithms.engine.base import hyperparameters, registry

    assert main(["list", "algorithms", "--json"]) == 0
    entries = {e["name"]: e for e in json.loads(capsys.readouterr().out)}
    assert set(entries) == set(registry())
    for name, cls in registry().items():
        hps = {h["name"]: h for h in entries[name]["hyperparameters"]}
        assert set(hps) == {f.name for f in hyperparameters(cls)}
        for f in hyperparameters(cls):
            assert hps[f.name]["default"] == f.default
            assert hps[f.name]["symbol"] == f.metadata.get("symbol", "")
        assert entries[name]["summary"], f"{name} has no one-line description"
    assert "Moreau Envelopes" in entries["pfedme"]["paper"]
    assert "Dinh" in entries["pfedme"]["paper"]
    assert entries["pfedme"]["qualname"] == "algorithms.methods.regularized.pfedme.PFedMe"


@pytest.mark.parametrize("topic,needle", [("datasets", "synthetic"), ("models", "mlr"),
                                          ("figures", "ppfe_linear"),
                                          ("checks", "pfedme.")])
def test_list_topics_in_text(capsys, topic, needle):
    assert main(["list", topic]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {topic} (") and needle in out


def test_list_without_topic_lists_all_topics(capsys):
    assert main(["list", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert set(found) == {"algorithms", "datasets", "models", "checks", "figures"}
    assert all(found[t] for t in found)


def test_list_rejects_an_unknown_topic(capsys):
    with pytest.raises(SystemExit):
        main(["list", "nonsense"])


def test_citation_parser_reads_authors_title_venue():
    doc = ("pFedMe — T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with "
           "Moreau\n Envelopes*, NeurIPS 2020 (arXiv 2006.08848). Algorithm 1; more.")
    assert catalog._citation(doc) == ("T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized "
                                      "Federated Learning with Moreau Envelopes*, NeurIPS 2020 "
                                      "(arXiv 2006.08848)")
    assert catalog._citation("no title here") == ""


def test_run_help_for_one_algorithm_shows_only_its_hyperparameters(capsys):
    assert main(["run", "--algorithm", "fedavg", "--help"]) == 0
    out = capsys.readouterr().out
    assert "fedavg hyper-parameters" in out and "--local-rounds" in out
    assert "(default: 20)" in out  # FedAvg's own R
    assert "--lam" not in out and "--personal-lr" not in out  # pFedMe's, not FedAvg's
    assert "paper:" in out and "McMahan" in out


def test_run_help_shows_symbols_and_defaults(capsys):
    assert main(["run", "--algorithm", "pfedme", "--help"]) == 0
    out = capsys.readouterr().out
    assert "(default: 20.0)" in out and "--inner-steps" in out
    assert "|D|:" in out  # the paper symbol of batch_size


def test_run_help_without_algorithm_is_short_and_points_to_the_per_algorithm_help(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "pflt run --algorithm NAME --help" in out
    assert "--code-l2" not in out and "--kmeans-restarts" not in out
    assert len(out.splitlines()) < 120


def test_run_help_for_unknown_algorithm_is_a_user_error(capsys):
    assert main(["run", "--algorithm", "nope", "--help"]) == 2
    assert "unknown algorithm" in capsys.readouterr().err


def test_formulas_command_lists_a_section_and_writes_the_reference(tmp_path, capsys):
    from pfl_theory import formulas

    assert main(["formulas", "--section", "B.6"]) == 0
    out = capsys.readouterr().out
    assert "pfl_theory.pfedme.theorem1a" in out and "2 formula(s)" in out
    target = tmp_path / "formulas.md"
    assert main(["formulas", "--write", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == formulas.render_markdown()
    assert main(["formulas", "--markdown"]) == 0
    assert capsys.readouterr().out.startswith("wrote")  # --write's line, then the markdown
    assert main(["formulas", "--section", "Z.9"]) == 2
    assert "not a section" in capsys.readouterr().err


def test_every_algorithm_class_has_its_own_docstring_and_symbols():
    from algorithms.engine.base import registry

    for name, cls in registry().items():
        assert catalog.class_doc(cls).strip(), f"{name} ({cls.__qualname__}) has no docstring"
        info = catalog.algorithm_info(name)
        assert info.paper, f"{name}: no paper found"
        missing = [h.name for h in info.hyperparameters if not h.symbol]
        assert not missing, f"{name}: hyper-parameters without a paper symbol: {missing}"
    # the dataclass-generated signature is not taken for a docstring
    from dataclasses import dataclass

    @dataclass
    class Bare:
        x: int = 1

    assert catalog.class_doc(Bare) == ""
