"""The run-folder contract every stage shares: what a job folder holds, and how a downstream
stage (rollout, edge, serve) finds, checks and reuses a training run.

The names themselves (files and folders of job, sweep and checkpoint folders,
:class:`~rlperf.vocabulary.RunStatus`, the exclusion column, the probe tolerance) are
:mod:`rlperf.layout`, at the bottom of the package with :mod:`rlperf.errors`: the
models, the results and the report read them without this package. Here, one module
per concern, from the bottom up (import the module you need; this package imports
none of them):

- :mod:`~rlperf.runs.overrides`: a job's command-line overrides and the keys they set;
- :mod:`~rlperf.runs.jobs`: the jobs of an upstream sweep folder and which of them a
  downstream job takes (``model=``, ``run_match``, ``run_select``);
- :mod:`~rlperf.runs.locate`: ``run=`` / ``checkpoint=`` to a run folder and a
  checkpoint folder;
- :mod:`~rlperf.runs.geometry`: the network a config or a policy file describes;
- :mod:`~rlperf.runs.probe`: ``probe.npz``, written with a checkpoint and checked on
  every reload;
- :mod:`~rlperf.runs.checkpoint`: the checked training run
  (:func:`~rlperf.runs.checkpoint.load_trained_run`, :class:`~rlperf.runs.checkpoint.TrainedRun`);
- :mod:`~rlperf.runs.merge`: a downstream job's effective config (the run's ``model``,
  ``env``, ``algo``; :func:`~rlperf.runs.merge.upstream_run`).

Everything is checked before Ray or an env starts, and every error
(:class:`~rlperf.errors.CheckpointError`) names the path and what was expected.
numpy, torch and Ray are imported by the functions that need them.
"""
