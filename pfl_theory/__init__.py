"""pfl-theory: the theory of personalized federated learning as code.

Sub-packages (top level, installed side by side):

* ``pfl_theory`` — the papers' quantities as pure functions (this package), the CLI.
* ``algorithms`` — batched torch implementations of the algorithms, one registry.
* ``synthetic`` — data generators and the :class:`~synthetic.federation.Federation`.
* ``verification`` — named checks putting measurement next to theory.
* ``paper_figures`` — scripts drawing empirical-versus-theoretical curves.
"""

__version__ = "0.1.0"
