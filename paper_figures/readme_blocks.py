"""The README's numbers, generated from result files — never typed by hand.

The README holds blocks between ``<!-- BEGIN generated:NAME -->`` and
``<!-- END generated:NAME -->``; :func:`render` rewrites each block from its result file:

==============  ==========================================================================
block           result file (committed, small)
==============  ==========================================================================
``quickstart``  ``benchmarks/results/quickstart_times.json`` (``benchmarks/quickstart_times.py``)
``verdicts``    ``docs/results/verify_quick.json`` (a digest of ``pflt verify``'s results.json,
                written by ``python -m paper_figures.readme_blocks --digest RESULTS.json``)
                and ``docs/results/mutation_generated.json`` (the generated formula mutants'
                kill rates: ``python -m verification.mutation --generated --out FILE``)
``real_data``   ``paper_figures/results/*.csv`` (the reproduction CSVs, paper_figures/real_data_status.py)
``coverage``    the paper ledger's items by status per paper (verification/ledger/, computed from
                the check and reproduction registries, ``verify_quick.json`` and the CSVs;
                paper_figures/ledger_pages.py)
``speed``       ``benchmarks/results/w2_fmnist_pfllib.json`` (``benchmarks/bench_fmnist_pfllib.py``)
                and ``benchmarks/results/gpu_check.json`` (``benchmarks/gpu_check.sh``)
==============  ==========================================================================

Each block states the date, commit and machine of its result. A block whose file is absent
says which command writes it. ``python -m paper_figures.readme_blocks`` rewrites README.md;
``--check`` exits 1 when README.md differs from what the files say (a test runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from paper_figures import ledger_pages

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "benchmarks" / "results" / "quickstart_times.json"
VERDICTS = ROOT / "docs" / "results" / "verify_quick.json"
RESULTS = ROOT / "paper_figures" / "results"
W2 = ROOT / "benchmarks" / "results" / "w2_fmnist_pfllib.json"
GPU = ROOT / "benchmarks" / "results" / "gpu_check.json"
MUTATION = ROOT / "docs" / "results" / "mutation_generated.json"
BLOCK = re.compile(r"(<!-- BEGIN generated:(\w+) -->\n)(.*?)(<!-- END generated:\2 -->)", re.S)
ORDER = ("HOLDS", "FAILS", "VACUOUS", "ERRATUM", "INCONCLUSIVE", "NOT RUN", "ERROR")
#: the papers of the mission, one row each in the verdict block (the rest is folded into one)
PAPERS = ("pFedMe", "CGPFL", "PPFE", "PLGU")
#: what a verdict rests on, in the order the block shows them
BASES = ("claims against measurements", "code equals our reading", "other")
BASIS_NOTE = {"claims against measurements": "bound, envelope, inequality, rate, worst case",
              "code equals our reading": "identity checks: the code against a second writing "
                                         "of our own reading (docs/formulas.md) — regression "
                                         "checks, not the papers",
              "other": "selection, ordering"}


def _conditions(env: dict) -> str:
    parts = [env.get("date", "?"), f"commit {env.get('commit', '?')}", env.get("machine", "?")]
    if "load" in env:
        parts.append(f"load {env['load']}")
    return ", ".join(str(p) for p in parts)


def digest(results: dict, *, commit: str, machine: str) -> dict:
    """A small summary of ``pflt verify``'s ``results.json``: verdict counts per paper (one
    row per paper id, :mod:`verification.core.papers`), and
    per basis — what a verdict rests on (:func:`verification.core.sensitivity.basis_of`:
    claims against measurements, code equals our reading (identity checks), other) — and
    each check's id, paper, kind, verdict, seeds holding and seconds (the docs' findings page,
    :mod:`paper_figures.docs_pages`)."""
    from verification.core.papers import display_name, entry_paper_id, short_name
    from verification.core.sensitivity import basis_of

    per_paper: dict[str, Counter] = defaultdict(Counter)
    per_basis: dict[str, Counter] = defaultdict(Counter)
    for chk in results["checks"]:
        chk = {**chk, "paper_id": entry_paper_id(chk)}      # one row per paper id
        chk["paper"] = display_name(chk["paper_id"])
        per_paper[short_name(chk["paper_id"])][chk["verdict"]] += 1
        if "kind" in chk:
            per_basis[basis_of(chk["kind"])][chk["verdict"]] += 1
    env = results.get("environment", {})
    return {"environment": {"date": str(env.get("time_utc", env.get("time", env.get(
                                 "date", "?"))))[:16].replace("T", " "),
                            "commit": commit, "machine": machine},
            "size": results.get("size"), "total": len(results["checks"]),
            "per_paper": {p: dict(c) for p, c in sorted(per_paper.items())},
            "per_basis": {b: dict(per_basis[b]) for b in BASES if b in per_basis},
            "checks": [{**{k: chk.get(k) for k in ("id", "kind", "verdict", "seeds_holding",
                                                   "n_seeds", "seconds")},
                        "paper": display_name(entry_paper_id(chk)),
                        "paper_id": entry_paper_id(chk)}
                       for chk in results["checks"]]}


def quickstart_block(data: dict | None) -> str:
    if data is None:
        return f"(no timings yet: run `python benchmarks/quickstart_times.py`, which writes " \
               f"{QUICKSTART.relative_to(ROOT)})\n"
    lines = ["```bash"]
    width = max(len(c["command"]) for c in data["commands"])
    for c in data["commands"]:
        took = f"{c['seconds']:.0f} s" if c["seconds"] >= 1 else "< 1 s"
        status = "" if c["returncode"] == 0 else f", exit {c['returncode']}"
        lines.append(f"{c['command']:<{width}}  # {took}{status}: {c['what']}")
    lines += ["```", f"Times measured by `benchmarks/quickstart_times.py`: "
              f"{_conditions(data['environment'])}.", ""]
    return "\n".join(lines)


def mutation_line(data: dict | None) -> str:
    """What the generated formula mutants say about the checks: killed by a claim against
    measurements, by an identity check, of the exercised ones (with the run's conditions)."""
    if data is None:
        return ("Generated formula mutants: not run here — `python -m verification.mutation "
                f"--generated --out {MUTATION.relative_to(ROOT)}` writes them.")
    basis = data["rates"]["basis"]
    cells = [f"{k} {a}/{b} ({100 * a / b:.0f}%)" for k, (a, b) in basis.items() if b]
    subset = "".join(f", {what} matching {data[key]!r} only" for key, what in
                     (("only", "mutants"), ("checks", "checks")) if data.get(key))
    return (f"Generated formula mutants (`python -m verification.mutation --generated`"
            f"{subset}) killed by " + "; by ".join(cells) + f": {data['date']}, commit "
            f"{data['commit']}, {data['machine']}, {data['seconds']} s.")


def verdicts_block(data: dict | None, mutation: dict | None = None) -> str:
    if data is None:
        return ("(no verification digest yet: run `pflt verify --quick --out runs/verify`, "
                "then `python -m paper_figures.readme_blocks --digest runs/verify/results.json`)\n")
    seen = [v for v in ORDER if any(v in c for c in data["per_paper"].values())]
    seen += sorted({v for c in data["per_paper"].values() for v in c} - set(seen))
    lines = ["| paper | checks | " + " | ".join(seen) + " |",
             "|---|---|" + "---|" * len(seen)]
    rows, others, folded = [], Counter(), 0
    for paper, counts in data["per_paper"].items():
        if paper in PAPERS:
            rows.append((paper, counts))
        else:                                   # an algorithm's oracle, a generator, …
            others.update(counts)
            folded += 1
    if folded:
        rows.append((f"{folded} other sources (each algorithm's oracle and isolation checks, "
                     "data generators, other papers' rates)", others))
    for paper, counts in rows:
        lines.append(f"| {paper} | {sum(counts.values())} | "
                     + " | ".join(str(counts.get(v, 0)) for v in seen) + " |")
    if data.get("per_basis"):
        lines += ["", "| what the verdicts rest on | checks | " + " | ".join(seen) + " |",
                  "|---|---|" + "---|" * len(seen)]
        for basis, counts in data["per_basis"].items():
            lines.append(f"| {basis} ({BASIS_NOTE.get(basis, '')}) | {sum(counts.values())} | "
                         + " | ".join(str(counts.get(v, 0)) for v in seen) + " |")
    lines += ["", f"`pflt verify --{data['size']}`, {data['total']} checks: "
              f"{_conditions(data['environment'])}.", "", mutation_line(mutation), ""]
    return "\n".join(lines)


def real_data_block(results_dir: Path) -> str:
    """The papers' real-data tables, one row per reproduction: paper, table, each column's
    status (measured / partial / not run here, from the reproduction CSVs) and the command
    (:func:`paper_figures.real_data_status.summary_table`; one row per column with seeds and
    T in ``paper_figures/results/real_data_status.md``), then per paper which transfer
    claims held (:func:`paper_figures.real_data_status.transfer_summary`)."""
    from paper_figures.real_data_status import summary_table, transfer_summary

    return summary_table(results_dir) + "\n" + transfer_summary(results_dir)


def speed_block(w2: dict | None, gpu: dict | None) -> str:
    """The real-data speed workload against PFLlib (W2: seconds per round, the ratio, why)
    and the GPU check — each with its command, date and conditions; an absent file says
    "not run here" and the command that writes it."""
    lines = []
    if w2 is None:
        lines.append(f"- W2 (FedAvg and pFedMe, Fashion-MNIST CNN, N = 40, against PFLlib): not "
                     f"run here — `python benchmarks/bench_fmnist_pfllib.py --pfllib PATH` "
                     f"writes {W2.relative_to(ROOT)}")
    else:
        lines.extend(w2_lines(w2))
    if gpu is None:
        lines.append(f"- GPU: not run here (no GPU on this machine) — `benchmarks/gpu_check.sh` "
                     f"writes {GPU.relative_to(ROOT)} in 8 minutes on the first GPU machine.")
    else:
        steps = gpu.get("steps", [])
        passed = sum(1 for st in steps if st.get("exit_code") == 0)
        dry = " (dry run on the CPU: checks the script, measures nothing)" if gpu.get("dry_run") \
            else ""
        lines.append(f"- GPU ({gpu.get('gpu') or gpu.get('device', '?')}, torch "
                     f"{gpu.get('torch', '?')}){dry}: {passed}/{len(steps)} steps of "
                     f"`benchmarks/gpu_check.sh` passed in {gpu.get('total_s', '?')} s, "
                     f"{str(gpu.get('date_utc', '?'))[:16].replace('T', ' ')} UTC; per step "
                     f"in {GPU.relative_to(ROOT)}.")
    return "\n".join(lines) + "\n"


#: W2 targets of issue 44: training ≥ 1.5× PFLlib and ≥ 1.2× the plain loop, with evaluation
#: ≥ 2× PFLlib, training within 2× of the FLOP floor
W2_TARGETS = {"pfllib": 1.5, "loop": 1.2, "pfllib_eval": 2.0, "floor": 2.0}


def _met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def w2_lines(w2: dict) -> list[str]:
    """One line per algorithm of W2 (process CPU seconds per training round, min / median,
    each side; the ratios against the targets), then one line per measured part (command,
    date, conditions)."""
    cpu, ratios, floor = w2["cpu_seconds"], w2["ratios"], w2["floor_seconds"]
    lines = []
    for algo, label in (("fedavg", "FedAvg"), ("pfedme", "pFedMe")):
        ours = cpu.get(f"ours_{algo}_train")
        if ours is None:
            continue
        sides = [f"{name} {cpu[f'{side}_{algo}_train']['min']:.2f} / "
                 f"{cpu[f'{side}_{algo}_train']['median']:.2f}"
                 for side, name in (("ours", "ours"), ("loop", "plain per-client loop"),
                                    ("pfllib", "PFLlib")) if f"{side}_{algo}_train" in cpu]
        parts = []
        for side, target, what in (("pfllib", W2_TARGETS["pfllib"], "PFLlib"),
                                   ("loop", W2_TARGETS["loop"], "the loop")):
            r = ratios.get(f"{side}_{algo}/ours_{algo} train median")
            if r is not None:
                parts.append(f"{what} ÷ ours **{r:.2f}×** (target ≥ {target:g}×: "
                             f"{_met(r >= target)})")
        r = ratios.get(f"pfllib_{algo}/ours_{algo} with evaluation median")
        if r is not None:
            parts.append(f"with evaluation PFLlib ÷ ours **{r:.2f}×** (target ≥ "
                         f"{W2_TARGETS['pfllib_eval']:g}×: {_met(r >= W2_TARGETS['pfllib_eval'])})")
        r = ratios.get(f"ours_{algo}/floor train min")
        if r is not None:
            parts.append(f"ours = **{r:.2f}×** the FLOP floor of {floor[f'{algo}_train']:.2f} s "
                         f"(target ≤ {W2_TARGETS['floor']:g}×: {_met(r <= W2_TARGETS['floor'])})")
        faults = w2.get("minor_faults_median", {}).get(f"ours_{algo}_train")
        lines.append(f"- W2 {label} (Fashion-MNIST, PFLlib's FedAvgCNN, N = 40, R = "
                     f"{w2['local_rounds']}, |D| = {w2['batch']}): process CPU seconds per "
                     f"training round, min / median — {', '.join(sides)}; {'; '.join(parts)}"
                     + (f"; ours {faults:,.0f} minor page faults per round" if faults is not None
                        else "") + ".")
    for part in w2.get("parts", []):
        lines.append(f"  - `{part['command']}`: {part['date_utc'][:16].replace('T', ' ')} UTC, "
                     f"{part['conditions']}"
                     + (f", PFLlib {w2['pfllib_commit'][:7]}" if w2.get("pfllib_commit") else "")
                     + ".")
    return lines


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def render(text: str, *, root: Path = ROOT) -> str:
    """``text`` with every generated block rewritten from the result files under ``root``."""
    makers = {
        "quickstart": lambda: quickstart_block(_load(root / QUICKSTART.relative_to(ROOT))),
        "verdicts": lambda: verdicts_block(_load(root / VERDICTS.relative_to(ROOT)),
                                           _load(root / MUTATION.relative_to(ROOT))),
        "real_data": lambda: real_data_block(root / RESULTS.relative_to(ROOT)),
        "coverage": lambda: ledger_pages.coverage_block(root),
        "speed": lambda: speed_block(_load(root / W2.relative_to(ROOT)),
                                     _load(root / GPU.relative_to(ROOT))),
    }

    def replace(m: re.Match) -> str:
        if m.group(2) not in makers:
            raise ValueError(f"README block {m.group(2)!r} has no generator; "
                             f"known: {', '.join(makers)}")
        return m.group(1) + makers[m.group(2)]() + m.group(4)

    return BLOCK.sub(replace, text)


def _git_commit() -> str:
    import subprocess

    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                         capture_output=True, text=True)
    return out.stdout.strip() or "?"


def _machine() -> str:
    import os
    import platform

    return f"{platform.machine()} {os.cpu_count()} cores, {platform.system()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_figures.readme_blocks",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if README.md differs from what the result files say")
    ap.add_argument("--digest", metavar="RESULTS_JSON",
                    help="first write docs/results/verify_quick.json from a pflt verify results.json")
    ap.add_argument("--commit", default=None,
                    help="with --digest: the commit whose code the pflt verify run loaded "
                         "(default: HEAD now)")
    args = ap.parse_args(argv)
    if args.digest:
        results = json.loads(Path(args.digest).read_text())
        VERDICTS.parent.mkdir(parents=True, exist_ok=True)
        VERDICTS.write_text(json.dumps(digest(results, commit=args.commit or _git_commit(),
                                              machine=_machine()), indent=2) + "\n")
    readme = ROOT / "README.md"
    text = readme.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print("README.md is stale: run python -m paper_figures.readme_blocks", file=sys.stderr)
            return 1
        return 0
    readme.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
