"""rlperf's one statistical engine: every interval a user reads, every verdict and every
stopping rule comes from here, one rule per quantity (docs/report.md#statistics).

- :mod:`rlperf.stats.intervals`: an estimate and its interval, within one run (batch means
  over its iterations or windows) or run to run (Student's t on the runs' logarithms), the
  ratio of two (a speedup) and whether it separates them; the rules for degenerate input.
- :mod:`rlperf.stats.stopping`: the planned looks and the precision stops within a run and
  across runs.
- :mod:`rlperf.stats.race`: a sweep's race within a comparison set, and how many runs would
  separate two configurations.
- :mod:`rlperf.stats.prior`: the machine's run-to-run variance learnt from its history of
  repeated configurations (an empirical-Bayes prior), and the test that says whether a
  sweep's own spreads agree with it.

numpy and scipy only; nothing here knows what is measured. ``scipy`` is imported inside the
functions that need it: the sweeper reads a grid's design (the looks) on every ``-m``, and
``scipy.stats`` takes most of a second to import.
"""
