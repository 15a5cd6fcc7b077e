"""Methods of the averaging family (see :mod:`algorithms.methods`)."""
