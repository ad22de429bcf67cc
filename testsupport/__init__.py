"""Helpers shared by the end-to-end tests and the benchmarks (no pytest here)."""
