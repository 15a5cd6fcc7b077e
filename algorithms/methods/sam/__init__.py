"""Methods of the sam family (see :mod:`algorithms.methods`)."""
