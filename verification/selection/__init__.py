"""Benchmarks of the selection tools: CGPFL's K and PPFE's number of stages T against the best."""
