"""Estimators that need the engine: a federation's constants, complexity and generalization measures, rate fitting."""
