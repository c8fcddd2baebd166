"""The one lifecycle of a sweep, a grid's (:mod:`rlperf.sweep.launch`) or a search's
(:mod:`rlperf.sweep.search`): join or start Ray, pre-flight against what Ray has, run, and
on Ctrl-C mark the cells interrupted and say how to resume; shut down what it started.

What differs between the two is a small :class:`Strategy`: what is checked before Ray
(a grid validates and groups every cell; a search checks its space's first point), what is
checked on a cluster, how a local Ray starts (a grid starts one per group as it runs
them; a search starts one for all its trials), what runs, and what is written at the end.
"""

from __future__ import annotations

import logging
from typing import Protocol

import ray

from rlperf.errors import interrupt_reason
from rlperf.resources.ray_session import init_ray
from rlperf.results.storage import credential_env
from rlperf.sweep.callback import mark_interrupted
from rlperf.sweep.preflight import check_sweep_shared
from rlperf.sweep.state import Sweep

log = logging.getLogger(__name__)


class Strategy(Protocol):
    """What a grid and a search do differently within :func:`run_lifecycle`."""

    #: What a resumed run keeps, in the Ctrl-C line ("completed cells are kept").
    kept: str
    #: What the same command does after Ctrl-C ("resume", "resume the search").
    resumes: str

    def before_ray(self, existing: bool) -> None:
        """Checks that need no Ray (``existing``: the sweep runs on a Ray already there)."""

    def stored(self) -> bool:
        """Whether the trials read or write a storage (their keys must reach the nodes)."""

    def on_cluster(self) -> None:
        """Checks against the cluster joined (its resources, its nodes)."""

    def start_local(self) -> bool:
        """Start this process's own Ray for the whole sweep, if the strategy does; whether
        it did (a grid starts one per group, as it runs them)."""

    def run(self) -> None:
        """Run the cells (every round of a grid; the searcher's trials)."""

    def close(self) -> None:
        """Stop the Ray instances the strategy started itself (a grid's group's)."""

    def finish(self) -> None:
        """What is written when the sweep ends, in any case (index, storage, the table)."""


def run_lifecycle(sweep: Sweep, strategy: Strategy) -> None:
    """Run ``sweep`` with ``strategy``, joining the Ray of ``ray.address`` (or the one this
    process already runs: a notebook, a test) and never stopping it, else starting its own."""
    existing = sweep.ray_cfg.address is not None or ray.is_initialized()
    joined = False
    try:
        strategy.before_ray(existing)
        if existing:
            if not ray.is_initialized():
                log.info("joining the Ray cluster at %s", sweep.ray_cfg.address)
                # The storage's credentials reach the worker nodes (where the uploads run)
                # through the Ray job's environment, never through a file.
                env = credential_env() if strategy.stored() else None
                init_ray(sweep.ray_cfg, env_vars=env)
                joined = True
            strategy.on_cluster()
            check_sweep_shared(sweep)
        else:
            joined = strategy.start_local()
        strategy.run()
    except KeyboardInterrupt:
        strategy.close()
        if joined:  # the cluster ends this driver's trials when it disconnects
            ray.shutdown()
            joined = False
        mark_interrupted(sweep)
        sweep.progress.say(
            f"{interrupt_reason()}: {strategy.kept} are kept; run the same command with "
            f"hydra.sweep.dir={sweep.sweep_dir} to {strategy.resumes}"
        )
        raise
    finally:
        strategy.close()
        if joined:
            ray.shutdown()
        strategy.finish()
