"""Methods of the regularized family (see :mod:`algorithms.methods`)."""
