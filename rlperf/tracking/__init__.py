"""Results where users already look: TensorBoard, MLflow and Weights & Biases (docs/tracking.md).

A job with ``tracking=...`` sends, besides writing its run folder, every row it writes (a
training iteration; a rollout or edge episode's latency window; a serve level) to each
chosen tool, live, with the composed config as parameters, the fingerprint and the env
protocol as tags, and its result files as artifacts at the end. ``rlperf-report PATH --to
TOOL`` sends run folders already written, under the same names.

- :mod:`~rlperf.tracking.tools` -- the tools, their extras, the check before anything runs;
- :mod:`~rlperf.tracking.record` -- what is sent: a job's names, parameters and tags
  (:class:`TrackedJob`), its rows (:class:`TrackedRow`), from a live job or from a folder;
- :mod:`~rlperf.tracking.redact` -- secrets kept out of everything sent or written;
- :mod:`~rlperf.tracking.mlflow_sink`, :mod:`~rlperf.tracking.tensorboard_sink`,
  :mod:`~rlperf.tracking.wandb_sink` -- one sink per tool;
- :mod:`~rlperf.tracking.dispatch` -- the background queue that keeps every sink out of
  the measured time, and stops a failing one after its first failure;
- :mod:`~rlperf.tracking.live` -- a job's tracking, opened and closed by the job wrapper;
  a sweep's parent run, by the sweep engine.

Nothing here imports a tool's package before a job asks for that tool.
"""
