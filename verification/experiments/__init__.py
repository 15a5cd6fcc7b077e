"""Experiments shared by the checks and the paper figures (engine runs on the papers' problems)."""
