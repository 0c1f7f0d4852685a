"""Runnable examples and synthetic workloads, outside the library core."""
