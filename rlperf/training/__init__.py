"""The training stage: any algorithm of :mod:`rlperf.algos` in RLlib, with per-iteration
phase timing, evaluation, targets and faults recorded."""
