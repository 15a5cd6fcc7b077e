"""Exact worst cases of the papers' methods over their theorems' function classes
(performance estimation with PEPit, the optional ``[pep]`` extra; docs/worst_case.md).

``pep`` (PEPit adapter, solve), ``problems`` (the PEPs, over the oracle-form methods of
:mod:`pfl_theory.oracle_methods`), ``quadratic_clients`` and ``instances`` (concrete
instances run by the engine), ``outcome`` (verdicts of the ``worst_case`` kind),
``counterexample`` (extract / save / replay a worst case), ``analysis`` (what ``pflt
worst-case`` prints).  Nothing here imports PEPit at import time.
"""
