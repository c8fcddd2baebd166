"""The sweep engine: every cell of a Hydra multirun, or every trial of a search, as a Ray
Tune trial. The ``rlperf_tune`` launcher and the ``rlperf`` sweeper
(hydra_plugins/) are thin Hydra plugins over it.

Running a sweep (:func:`rlperf.sweep.launch.launch`), in the order a sweep goes:

- :mod:`~rlperf.sweep.state` -- what the launcher hands over (``SweepSetup``) and
  what a running sweep holds (cells, groups);
- :mod:`~rlperf.sweep.prepare` -- each cell's config, identity and folder; resume;
- :mod:`~rlperf.sweep.preflight` -- validation, feasibility, grouping by Ray start;
- :mod:`~rlperf.sweep.groups` -- one Tune experiment per group in its own Ray;
- :mod:`~rlperf.sweep.trial` -- inside a trial: Hydra's ``run_job``, rows to Tune;
- :mod:`~rlperf.sweep.callback` -- Tune's events as cell records and progress lines.

A search (:func:`rlperf.sweep.search.run_search`): :mod:`~rlperf.sweep.space`
(its space and the refusals before Ray starts), :mod:`~rlperf.sweep.searchers`
(Tune's searcher and scheduler), :mod:`~rlperf.sweep.search_trial` (a proposed
trial's config and pre-flight), :mod:`~rlperf.sweep.search_results` (a trial's
score, ``search.json``, the best trial's preset; docs/search.md).

Parts that need neither Hydra's launcher API nor a running Ray:
:mod:`~rlperf.sweep.cells` (the cell hash, ``cell.json``), :mod:`~rlperf.sweep.index`
(``sweep.json``, the resume index), :mod:`~rlperf.sweep.resources` (what a cell asks
Ray for, which Ray it needs, the capacity check), :mod:`~rlperf.sweep.progress` (the
progress lines and the final table), :mod:`~rlperf.sweep.upstream` (a downstream
sweep's cells over an upstream sweep's jobs).
"""
