"""Sweep machinery behind the ``rlperf_tune`` Hydra launcher (hydra_plugins/rlperf_tune_launcher).

A Hydra multirun cell becomes a Ray Tune trial. This package holds the parts
that need neither Hydra's launcher API nor a running Ray, so they can be unit
tested on their own:

- :mod:`rlperf.sweep.cells` -- the cell hash (identity for resume) and ``cell.json``;
- :mod:`rlperf.sweep.index` -- ``sweep.json``, the resume index of a sweep folder;
- :mod:`rlperf.sweep.resources` -- what a cell asks Ray for, which Ray instance it
  needs (grouping) and the pre-flight check against the capacity;
- :mod:`rlperf.sweep.progress` -- the progress lines and the final table;
- :mod:`rlperf.sweep.space` -- a search's space (Hydra's sweep overrides -> Tune's
  search-space objects) and the refusals before Ray starts;
- :mod:`rlperf.sweep.search_results` -- a trial's score from its own files,
  ``search.json`` and the best trial's preset (docs/search.md).
"""
