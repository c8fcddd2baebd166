"""The rollout stage: a trained policy acting inside RLlib, timed per step.

The training run (``run=`` / ``checkpoint=``) is found, checked and merged into
the rollout's effective config by :mod:`rlperf.runs`; :mod:`~rlperf.rollout.policy`
is RLlib's new-API-stack action path (connectors → ``RLModule.forward_inference``
→ connectors) for one observation; :mod:`~rlperf.rollout.timing` holds the
nanosecond timers and their measured cost; :func:`rlperf.rollout.rollout_job.run_rollout`
is the Hydra job. See ``docs/rollout.md``. Importing this package is cheap: Ray
and torch are imported by the modules that use them.
"""

from __future__ import annotations
