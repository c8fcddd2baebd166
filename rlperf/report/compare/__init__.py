"""Comparing cells: axes and labels, comparison sets and fingerprints, analyses and findings,
the gate, and the comparisons across workloads, machines, scales and returns."""
