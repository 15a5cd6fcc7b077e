"""Mutation run: plausible bugs applied one at a time, and whether the suite notices."""
