"""Independent transcriptions of the papers' formulas (sympy), for the identity checks."""
