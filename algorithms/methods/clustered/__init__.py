"""Methods of the clustered family (see :mod:`algorithms.methods`)."""
