"""Methods of the decoupled family (see :mod:`algorithms.methods`)."""
