"""paper_figures/real_data_status.py: measured / partial / not run here, from the CSVs."""

from __future__ import annotations

import csv
import re

from paper_figures import real_data_status as st
from verification.experiments.reproduction_run import FIELDS
from verification.experiments.reproductions import REPRODUCTIONS, get_reproduction


def _write(path, rows):
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)


def test_status_rows(tmp_path):
    # mutations caught: "measured" with a method missing, a failed row counted, a column
    # without rows shown as measured, the rounds not shown against the paper's
    rep = get_reproduction("cgpfl_table1_fmnist")
    rows = [dict(method=r.label, model="mlr", column="fmnist_mlr", seed=s, metric="m",
                 value=0.9, status="ok", rounds=200, command="c") for r in rep.rows for s in (0, 1)]
    rows += [dict(method="FedAvg", model="dnn", column="fmnist_dnn", seed=0, metric="m",
                  value=0.8, status="ok", rounds=100, command="c"),
             dict(method="Ditto", model="dnn", column="fmnist_dnn", seed=0, metric="m",
                  value="nan", status="exit 1", rounds=100, command="c")]
    _write(tmp_path / "cgpfl_table1_fmnist.csv", rows)
    text = st.table(tmp_path)
    lines = text.splitlines()
    assert len(lines) == 2 + sum(len(r.columns) for r in REPRODUCTIONS.values())
    mlr = next(ln for ln in lines if "| Table 1 | fmnist_mlr" in ln)
    dnn = next(ln for ln in lines if "| Table 1 | fmnist_dnn" in ln)
    assert "measured: 9/9 methods, seeds 0,1, T = 200 |" in mlr
    assert "partial: 1/9 methods, seeds 0, T = 100 (paper T = 200)" in dnn
    cifar = next(ln for ln in lines if "cifar10_cnn" in ln)
    assert "| not run here |" in cifar and "--data-dir DIR" in cifar


def test_main_writes_and_checks(tmp_path):
    out = tmp_path / "s.md"
    assert st.main(["--results", str(tmp_path), "--out", str(out)]) == 0
    assert st.main(["--results", str(tmp_path), "--out", str(out), "--check"]) == 0
    _write(tmp_path / "ppfe_table1.csv", [dict(method="PPFE", model="cnn", column="cifar10_(100,2)",
                                               seed=0, metric="m", value=0.5, status="ok",
                                               rounds=160, command="c")])
    assert st.main(["--results", str(tmp_path), "--out", str(out), "--check"]) == 1


def test_transfer_table_counts_verdicts_per_paper(tmp_path):
    # mutations caught: a claim's verdict not read from the CSVs (always NOT RUN), the
    # transfer label dropped, a paper's counts taken from another paper's claims
    rows = [dict(method=m, model="mlr", column="fmnist_mlr", seed=s, metric="m", value=v + s / 1000,
                 status="ok", rounds=200, command=f"c {m} {s}")
            for m, v in (("pFedMe-PM", 0.95), ("pFedMe-GM", 0.80), ("Per-FedAvg", 0.85),
                         ("FedAvg", 0.70)) for s in range(3)]
    _write(tmp_path / "pfedme_table1_transfer_fmnist.csv", rows)
    text = st.transfer_table(tmp_path)
    assert "in place of" in text and "not reproductions" in text
    assert "| pFedMe (NeurIPS 2020) | 4 | 2 | 0 | 0 | 2 |" in text
    assert "| PLGU (CVPR 2023) | 4 | 0 | 0 | 0 | 4 |" in text
    pm = next(ln for ln in text.splitlines() if "`pfedme_pm_best`" in ln)
    assert "| HOLDS |" in pm and "+15.00 ± 0.08" in pm and "reduced T (paper's 800)" in pm
    assert st.transfer_table(tmp_path) in st.render(tmp_path)


def test_the_summary_names_every_reproduction_once():
    # results: one row each; not run here: one row per paper listing them (the README stays
    # short as the registry grows); mutation caught: an entry left out or listed twice
    from paper_figures.real_data_status import summary_table
    from verification.experiments.reproductions import REPRODUCTIONS

    rows = [ln for ln in summary_table().splitlines()[2:] if ln.startswith("| ")]
    text = "\n".join(rows)
    for name in REPRODUCTIONS:
        assert len(re.findall(rf"`pflt reproduce {name}[` ]", text)) == 1, name
    papers = {r.paper for r in REPRODUCTIONS.values()}
    assert len([r for r in rows if "| not run here |" in r]) <= len(papers)
    row = next(r for r in rows if "`pflt reproduce cgpfl_table1_fmnist`" in r)
    # the shipped table is being re-run on the new partition: measured or partial, as it stands
    assert re.search(r"fmnist_mlr (measured|partial) \(\d/9, seeds [\d,]+, T = 200\)", row), row
    assert any("| not run here |" in r and "`pflt reproduce pfedme_table1_mnist --data-dir DIR`"
               in r for r in rows)


def test_transfer_summary_names_each_claim_under_its_verdict(tmp_path):
    # mutation caught: a claim listed under another verdict than its check's
    rows = [dict(method=m, model="mlr", column="fmnist_mlr", seed=s, metric="m", value=v + s / 1000,
                 status="ok", rounds=200, command=f"c {m} {s}")
            for m, v in (("pFedMe-PM", 0.95), ("pFedMe-GM", 0.80), ("Per-FedAvg", 0.85),
                         ("FedAvg", 0.70)) for s in range(3)]
    _write(tmp_path / "pfedme_table1_transfer_fmnist.csv", rows)
    text = st.transfer_summary(tmp_path)
    line = next(ln for ln in text.splitlines() if ln.startswith("| pFedMe"))
    assert "HOLDS: pfedme_pm_best, pfedme_over_fedavg; NOT RUN: pfedme_fig1_k" in line
    assert "not reproductions" in text
