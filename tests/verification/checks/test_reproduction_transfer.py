"""verification/checks/reproduction_transfer.py: every claim's check can HOLD, FAIL, be
INCONCLUSIVE and NOT RUN, on synthetic CSVs in the reproductions' format."""

from __future__ import annotations

import csv

import pytest

from verification.checks.reproduction_transfer import CLAIMS, RESULTS, judge
from verification.core.registry import Context, Verdict, load_all, run_check
from verification.experiments.reproduction_run import FIELDS

HIGH, LOW, NOISY = [0.95, 0.951, 0.952], [0.85, 0.851, 0.852], [0.60, 0.99, 0.80]
CLAIM = {c.id: c for c in CLAIMS}


def write(results, values: dict, claim, rounds: int = 200) -> None:
    """``values``: {method: fractions per seed} for every column and CSV of ``claim``."""
    files: dict = {}
    for entry, column, *_, which in claim.pairs:
        files.setdefault(entry + (f"_{which}" if which else ""), set()).add(column)
    for name, columns in files.items():
        with (results / f"{name}.csv").open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            w.writeheader()
            for col in sorted(columns):
                for method, vals in values.items():
                    for seed, v in enumerate(vals):
                        w.writerow(dict(method=method, model="m", column=col, seed=seed,
                                        metric="global_accuracy", value=v, best_value=v,
                                        rounds=rounds, status="ok",
                                        command=f"c {method} {col} {seed}"))


def methods(claim) -> tuple[set, set]:
    better = {p[2] for p in claim.pairs}
    return better, {p[3] for p in claim.pairs} - better


def levels(claim) -> dict:
    """Each method's height in the claim's chain (0: only ever 'worse'; PPFE > WP > WPW:
    2, 1, 0), so that values by level satisfy every pair."""
    below: dict = {}
    for p in claim.pairs:
        below.setdefault(p[2], set()).add(p[3])
        below.setdefault(p[3], set())

    def level(m):
        return 0 if not below[m] else 1 + max(level(w) for w in below[m])

    return {m: level(m) for m in below}


def by_level(claim, sign: int) -> dict:
    base = 0.80 if sign > 0 else 0.95
    return {m: [base + sign * 0.05 * lv + 0.001 * s for s in range(3)]
            for m, lv in levels(claim).items()}


def run(claim_id, results):
    chk = load_all()[claim_id]
    res = run_check(chk.__class__(**{**chk.__dict__, "quick": {"results": str(results)}}))
    return res.verdict, res.detail


@pytest.mark.parametrize("claim_id", sorted(CLAIM))
def test_each_claim_holds_fails_is_inconclusive_and_not_run(tmp_path, claim_id):
    # mutations caught: a claim whose pairs are not read (always HOLDS), worst() replaced by
    # the best verdict, better and worse swapped, NOT RUN on an empty results directory
    claim = CLAIM[claim_id]
    better, worse = methods(claim)
    # the paper's ordering (values rise with the method's level in the claim's chain)
    write(tmp_path, by_level(claim, +1), claim)
    assert run(claim_id, tmp_path)[0] is Verdict.HOLDS
    # reversed: values fall with the level -> some pair FAILS
    write(tmp_path, by_level(claim, -1), claim)
    v, detail = run(claim_id, tmp_path)
    assert v is Verdict.FAILS, detail
    # the better methods within noise of the worse: "gt" pairs INCONCLUSIVE, "ge" pairs HOLD
    write(tmp_path, {m: NOISY for m in better} | {m: LOW[:1] + [0.86, 0.87] for m in worse},
          claim)
    v, detail = run(claim_id, tmp_path)
    kinds = {p[4] for p in claim.pairs}
    assert v is (Verdict.INCONCLUSIVE if "gt" in kinds else Verdict.HOLDS), detail
    empty = tmp_path / "empty"
    empty.mkdir()
    v, detail = run(claim_id, empty)
    assert v is Verdict.NOT_RUN and detail.startswith("NOT RUN: ") and "\n" not in detail


def test_not_below_fails_only_beyond_two_standard_errors(tmp_path):
    # pFedMe Fig. 1: K = 7 not above K = 5 ("ge"); mutation caught: ge judged as gt
    # (equal means would be INCONCLUSIVE), or the sign of the threshold flipped
    cid = "transfer_fmnist.pfedme_fig1_k"
    write(tmp_path, {"pFedMe-PM K=5": HIGH, "pFedMe-PM K=7": HIGH}, CLAIM[cid])
    assert run(cid, tmp_path)[0] is Verdict.HOLDS
    write(tmp_path, {"pFedMe-PM K=5": HIGH, "pFedMe-PM K=7": [0.953, 0.954, 0.955]}, CLAIM[cid])
    assert run(cid, tmp_path)[0] is Verdict.FAILS


def test_one_seed_is_inconclusive(tmp_path):
    cid = "transfer_fmnist.ppfe_above_fedavg"
    write(tmp_path, {"PPFE": HIGH[:1], "FedAvg": LOW[:1]}, CLAIM[cid])
    v, detail = run(cid, tmp_path)
    assert v is Verdict.INCONCLUSIVE and "fewer than 2 seeds" in detail


def test_detail_says_transfer_and_reduced_t(tmp_path):
    cid = "transfer_fmnist.pfedme_pm_best"
    claim = CLAIM[cid]
    better, worse = methods(claim)
    write(tmp_path, {m: HIGH for m in better} | {m: LOW for m in worse}, claim, rounds=200)
    out = judge(claim, tmp_path)
    assert "transfer (Fashion-MNIST" in out.detail
    assert "reduced T (paper's 800)" in out.detail and "T = 200" in out.detail
    assert "transfer (Fashion-MNIST in place of MNIST)" in load_all()[cid].reference


def test_plgu_low5_is_read_from_the_companion_csv(tmp_path):
    # PLGU-LF above FedAvg on the average but below on the lowest 5 %: the claim FAILS;
    # mutation caught: the low5 pairs read from the main CSV
    cid = "transfer_fmnist.plgu_low5_without_average_loss"
    claim = CLAIM[cid]
    write(tmp_path, {"PLGU-LF": HIGH, "FedAvg": LOW, "FedSAM": LOW}, claim)
    assert run(cid, tmp_path)[0] is Verdict.HOLDS
    with (tmp_path / "plgu_table1_transfer_fmnist_low5.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for method, vals in (("PLGU-LF", LOW), ("FedAvg", HIGH), ("FedSAM", HIGH)):
            for s, v in enumerate(vals):
                w.writerow(dict(method=method, model="cnn", column="fmnist_C10", seed=s,
                                metric="global_accuracy_low5", value=v, rounds=200,
                                status="ok", command=f"c {method} {s}"))
    v, detail = run(cid, tmp_path)
    assert v is Verdict.FAILS and "lowest 5 %" in detail


def test_default_results_directory_and_context():
    assert RESULTS.name == "results" and RESULTS.parent.name == "paper_figures"
    out = judge(CLAIM["transfer_fmnist.plgu_table4_rho"], RESULTS / "nowhere")
    assert out.verdict is Verdict.NOT_RUN
    chk = load_all()["transfer_fmnist.plgu_table4_rho"]
    assert chk.fn(Context("quick", 0, {"results": "/nonexistent"}, None)).verdict is Verdict.NOT_RUN


def test_pairs_are_judged_at_a_common_t_and_groups_never_mixed(tmp_path):
    # PPFE at T = 40 (its stages scaled: --option total_rounds=40) against FedAvg at T = 40;
    # a lone FedAvg row at T = 160 far above is another group. Mutations caught: the T with
    # most rows of the column taken although one method lacks it (NOT RUN), T groups mixed
    # (the T = 160 row would drag FedAvg's mean up and the claim to INCONCLUSIVE)
    cid = "transfer_fmnist.ppfe_above_fedavg"
    rows = [("PPFE", s, v, 40, "total_rounds=40") for s, v in enumerate(HIGH)]
    rows += [("FedAvg", s, v, 40, "") for s, v in enumerate(LOW)]
    rows += [("FedAvg", 0, 0.99, 160, "")]
    with (tmp_path / "ppfe_table1_transfer_fmnist.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for m, s, v, t, o in rows:
            w.writerow(dict(method=m, model="cnn3", column="fmnist_(100,2)", seed=s,
                            metric="x_accuracy", value=v, best_value=v, rounds=t, status="ok",
                            options=o, command=f"c {m} {s} {t}"))
    out = judge(CLAIM[cid], tmp_path)
    assert out.holds and out.extra["verdict"] == "HOLDS", out.detail
    assert "T = 40, reduced T (paper's 160); PPFE: --option total_rounds=40" in out.detail


def test_pflt_verify_only_finds_the_claims_by_their_source_declarations():
    # mutation caught: a claim added without its literal declaration (pflt verify --only
    # 'transfer_fmnist.*' would not import the module and report no such check)
    from verification.core.runner import modules_declaring

    assert "reproduction_transfer" in modules_declaring("verification.checks",
                                                        "transfer_fmnist.*")
    from verification.core.registry import DECLARED
    import verification.checks.reproduction_transfer as mod
    from pathlib import Path
    text = Path(mod.__file__).read_text()
    assert [m.group(2) for m in DECLARED.finditer(text)] == [c.id for c in CLAIMS]
