"""Benchmarks on your own fleet: traffic shapes, the load generator, metrics and result files."""
