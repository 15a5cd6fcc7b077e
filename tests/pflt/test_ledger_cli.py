"""``pflt ledger``: the papers' items with their computed status (issue 42)."""

from __future__ import annotations

import json

from pflt.cli import main


def _run(argv, capsys):
    code = main(["ledger", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_default_lists_the_four_papers_at_least_115_items(capsys):
    code, out, _ = _run([], capsys)
    assert code == 0
    for name in ("pFedMe (Dinh", "CGPFL (Tang", "PPFE (Emrani", "PLGU (Qu"):
        assert f"== {name}" in out
    total = int(out.strip().splitlines()[-2].split(" item(s)")[0])
    assert total >= 115
    assert out.strip().splitlines()[-1].startswith(
        "verdicts read from docs/results/verify_quick.json (pflt verify --quick")
    assert "FedSAM (Qu" not in out                    # the baselines only with --paper all


def test_filters_and_json(capsys):
    code, out, _ = _run(["--paper", "PLGU", "--status", "absent", "--json"], capsys)
    rows = json.loads(out)
    assert code == 0 and rows and {r["paper"] for r in rows} == {"plgu"}
    assert {r["status"] for r in rows} == {"absent"} and all(r["reason"] for r in rows)
    labels = {r["label"] for r in rows}
    assert {"Fig. 4", "Fig. 7", "Fig. 11"} <= labels and "Table 3" not in labels   # has an entry
    code, out, _ = _run(["--paper", "all", "--json"], capsys)
    assert any(r["paper"] == "fedavg" for r in json.loads(out))


def test_results_of_your_own_verify_run_are_read(tmp_path, capsys):
    (tmp_path / "results.json").write_text(json.dumps(
        {"size": "full", "checks": [{"id": "ppfe.lemma5_composition", "verdict": "FAILS"}]}))
    code, out, _ = _run(["--paper", "ppfe", "--results", str(tmp_path)], capsys)
    assert code == 0
    block = out.split("Lemma 5 (")[1].split("\n\n")[0]
    assert "verdicts: ppfe.lemma5_composition FAILS" in block
    assert "runnable  Lemma 4" in out                 # its checks have no verdict there
    assert f"verdicts read from {tmp_path / 'results.json'} (pflt verify --full" in out


def test_bad_input_is_one_line(tmp_path, capsys):
    for argv, said in ((["--paper", "nope"], "has no ledger items"),
                       (["--status", "done"], "is not a status"),
                       (["--results", str(tmp_path)], "no pflt verify results.json")):
        code, out, err = _run(argv, capsys)
        assert code == 2 and said in err and len(err.strip().splitlines()) == 1
