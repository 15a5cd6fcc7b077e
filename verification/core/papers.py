"""The papers a check can name: one canonical id per source, its display names, and the
paper strings the checks were written with.

Checks declare their paper as free text (``@check(..., paper="PPFE (arXiv 2602.14244)")``);
over time one paper came to be cited several ways (PPFE three ways; CGPFL, pFedMe and PLGU
two ways each; FedAvg as "McMahan et al., AISTATS 2017" and "FedAvg (AISTATS 2017)"), so
grouping by the string counted 46 "papers" for 33 sources.  This module is the one table:

* :data:`PAPERS` — ``{id: Paper(short, name)}``: ``short`` labels a row of a summary
  ("pFedMe"), ``name`` is the display name (authors, venue);
* :data:`CITED` — every paper string a built-in check uses, mapped to its id (a test keeps
  it complete: tests/verification/core/test_papers.py).

:func:`paper_id` resolves any string: a known id, a short name, or a cited string; anything
else (a plugin's own paper, a results.json from elsewhere) resolves to itself, so that an
unknown source is still one row of its own and never silently merged with another.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A source of checks: ``short`` (a row label) and ``name`` (authors, venue)."""

    short: str
    name: str


#: the sources, the four papers of the mission first
PAPERS: dict[str, Paper] = {
    "pfedme": Paper("pFedMe", "pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020)"),
    "cgpfl": Paper("CGPFL", "CGPFL (Tang, Guo, Guo, IJCAI 2022; ICLR 2022 submission)"),
    "ppfe": Paper("PPFE", "PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244)"),
    "plgu": Paper("PLGU", "PLGU (Qu et al., CVPR 2023)"),
    "fedavg": Paper("FedAvg", "FedAvg (McMahan et al., AISTATS 2017)"),
    "apfl": Paper("APFL", "APFL (Deng et al., arXiv 2003.13461)"),
    "cfl": Paper("CFL", "CFL (Sattler et al., IEEE TNNLS 2020)"),
    "ditto": Paper("Ditto", "Ditto (Li et al., ICML 2021)"),
    "fedala": Paper("FedALA", "FedALA (Zhang et al., AAAI 2023)"),
    "fedamp": Paper("FedAMP", "FedAMP (Huang et al., AAAI 2021)"),
    "fedbabu": Paper("FedBABU", "FedBABU (Oh et al., ICLR 2022)"),
    "fedbn": Paper("FedBN", "FedBN (Li et al., ICLR 2021)"),
    "fedem": Paper("FedEM", "FedEM (Marfoq et al., NeurIPS 2021)"),
    "fedfomo": Paper("FedFomo", "FedFomo (Zhang et al., ICLR 2021)"),
    "fedpac": Paper("FedPAC", "FedPAC (Xu, Tong, Huang, ICLR 2023)"),
    "fedper": Paper("FedPer", "FedPer (Arivazhagan et al., arXiv 1912.00818)"),
    "fedproto": Paper("FedProto", "FedProto (Tan et al., AAAI 2022)"),
    "fedprox": Paper("FedProx", "FedProx (Li et al., MLSys 2020)"),
    "fedrep": Paper("FedRep", "FedRep (Collins et al., ICML 2021)"),
    "fedrod": Paper("FedRoD", "FedRoD (Chen & Chao, ICLR 2022)"),
    "fedsam": Paper("FedSAM", "FedSAM (Qu et al., ICML 2022)"),
    "ifca": Paper("IFCA", "IFCA (Ghosh et al., NeurIPS 2020)"),
    "knnper": Paper("kNN-Per", "kNN-Per (Marfoq et al., ICML 2022)"),
    "l2sgd": Paper("L2SGD", "L2SGD (Hanzely, Richtárik, arXiv 2002.05516)"),
    "lgfedavg": Paper("LG-FedAvg", "LG-FedAvg (Liang et al., arXiv 2001.01523)"),
    "perfedavg": Paper("Per-FedAvg", "Per-FedAvg (Fallah et al., NeurIPS 2020)"),
    "pfedfda": Paper("pFedFDA", "pFedFDA (McLaughlin, Su, NeurIPS 2024)"),
    "pfedhn": Paper("pFedHN", "pFedHN (Shamsian et al., ICML 2021)"),
    "scaffold": Paper("SCAFFOLD", "SCAFFOLD (Karimireddy et al., ICML 2020)"),
    "fedopt": Paper("FedOpt", "Adaptive Federated Optimization (Reddi et al., ICLR 2021)"),
    "fedavgm": Paper("FedAvgM", "FedAvgM (Hsu, Qi, Brown, arXiv 1909.06335)"),
    "local-sgd-lb": Paper("Local SGD (Glasgow et al.)", "Glasgow, Yuan, Ma (AISTATS 2022)"),
    "minimax-l2": Paper("Minimax personalization (Yu et al.)",
                        "Yu et al. (ICML 2025, arXiv 2410.08934)"),
    "dirichlet": Paper("Dirichlet label skew",
                       "Dirichlet label skew (Hsu et al. 2019; NIID-Bench, Li et al., ICDE 2022)"),
    "toolkit": Paper("toolkit", "the toolkit's own contracts and constructions"),
}

#: the paper strings of the built-in checks (and of the formula registry), as written
CITED: dict[str, str] = {
    "pFedMe (NeurIPS 2020)": "pfedme",
    "pFedMe (Dinh et al., NeurIPS 2020)": "pfedme",
    "pFedMe (Dinh, Tran, Nguyen, NeurIPS 2020)": "pfedme",
    "pFedMe (NeurIPS 2020) §5 MNIST label skew; synthetic/partition.py label_skew_partition":
        "pfedme",
    "CGPFL (IJCAI 2022)": "cgpfl",
    "CGPFL (Tang, Guo, Guo, IJCAI 2022)": "cgpfl",
    "CGPFL (ICLR 2022 submission)": "cgpfl",
    "CGPFL (IJCAI 2022) premise; toolkit generators synthetic/contexts.py": "cgpfl",
    "PPFE (arXiv 2602.14244)": "ppfe",
    "PPFE (arXiv 2602.14244, 2026)": "ppfe",
    "PPFE (Emrani, Najafi, Motahari, arXiv 2602.14244)": "ppfe",
    "PLGU (CVPR 2023)": "plgu",
    "PLGU (Qu et al., CVPR 2023)": "plgu",
    "McMahan et al., AISTATS 2017": "fedavg",
    "FedAvg (AISTATS 2017), baseline": "fedavg",
    "FedAvg+FT (McMahan et al., AISTATS 2017; PPFE Table 1)": "fedavg",
    "Per-FedAvg (NeurIPS 2020)": "perfedavg",
    "Per-FedAvg (Fallah et al., NeurIPS 2020)": "perfedavg",
    "FedBN (ICLR 2021) setting, toolkit transforms (synthetic/feature_shift.py)": "fedbn",
    "FedProx Synthetic(α, β) (Li et al., MLSys 2020), used by pFedMe (NeurIPS 2020) §5":
        "fedprox",
    "Glasgow, Yuan, Ma (AISTATS 2022)": "local-sgd-lb",
    "Adaptive Federated Optimization (Reddi et al., ICLR 2021)": "fedopt",
    "FedAvgM (Hsu, Qi, Brown, arXiv 1909.06335)": "fedavgm",
    "Yu et al. (ICML 2025, arXiv 2410.08934)": "minimax-l2",
    "Dirichlet label skew (Hsu et al. 2019; NIID-Bench, Li et al., ICDE 2022)": "dirichlet",
    "every registered algorithm (toolkit contract)": "toolkit",
    "toolkit construction (planted clusters, permuted labels; synthetic/permuted_labels.py)":
        "toolkit",
    **{p.name: pid for pid, p in PAPERS.items()},
}

_SHORT = {p.short: pid for pid, p in PAPERS.items()}


def known(text: str) -> bool:
    """Whether ``text`` is an id, a short name or a cited string of :data:`PAPERS`."""
    return text in PAPERS or text in _SHORT or text in CITED


def paper_id(text: str) -> str:
    """The canonical id of a paper string (an id, a short name or a cited string); an
    unknown string is its own id."""
    text = str(text)
    if text in PAPERS:
        return text
    return _SHORT.get(text) or CITED.get(text) or text


def short_name(text_or_id: str) -> str:
    """The row label of a paper (``"pFedMe"``); an unknown string as it is."""
    pid = paper_id(text_or_id)
    return PAPERS[pid].short if pid in PAPERS else pid


def display_name(text_or_id: str) -> str:
    """The display name of a paper (authors, venue); an unknown string as it is."""
    pid = paper_id(text_or_id)
    return PAPERS[pid].name if pid in PAPERS else pid


def entry_paper_id(entry: dict) -> str:
    """The paper id of a results.json / digest check entry: its ``paper_id`` when the file
    has one (written since the table exists), else resolved from its ``paper`` string."""
    return str(entry.get("paper_id") or paper_id(str(entry.get("paper") or "?")))
