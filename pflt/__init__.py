"""``pflt`` — the command line of pfl-theory, the top floor.

It sits above every other package (``pfl_theory`` theory, ``synthetic`` data, ``algorithms``
engine and its Flower leaf, ``verification`` checks, ``paper_figures`` figures) and is
imported by none of them.  Sub-commands live in :mod:`pflt.commands`.
"""

from pfl_theory import __version__

__all__ = ["__version__"]
