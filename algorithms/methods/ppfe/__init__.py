"""Methods of the ppfe family (see :mod:`algorithms.methods`)."""
