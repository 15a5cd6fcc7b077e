"""Methods of the prototypes family (see :mod:`algorithms.methods`)."""
