"""Benchmarks: one command each, printing medians and ratios against a named peer."""
