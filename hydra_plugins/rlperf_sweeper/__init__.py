"""rlperf's Hydra sweeper: Hydra's basic sweeper, plus the jobs of an upstream sweep as an axis.

A downstream sweep (``stage=rollout|edge``) whose ``run`` is a sweep folder gets
one cell per training job it takes (:mod:`rlperf.sweep.upstream`); everything
else is Hydra's ``basic`` sweeper unchanged (``hydra.sweeper.params``,
``max_batch_size``). :mod:`.config` registers it in group ``hydra/sweeper`` as
``rlperf``. See docs/sweeps.md.
"""
