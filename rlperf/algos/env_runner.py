"""The env runner class rlperf's algorithms sample with: RLlib's, plus torch threads.

RLlib 2.60 has no setting for the torch threads of an env runner: a remote
env runner's torch uses ``OMP_NUM_THREADS``, which Ray sets to the actor's
``num_cpus`` (at least 1). ``env_runner.torch_threads`` sets it explicitly —
in remote env runners only: with ``workers=0`` the driver samples and
``train.torch_threads`` applies. Each runner's threads as set are recorded in
``summary.json`` ``env_runners`` (:mod:`rlperf.resources.placement`).
:func:`env_runner_class` returns RLlib's
``SingleAgentEnvRunner`` where nothing is to be set, else a subclass (one per
thread count, cached) whose constructor calls ``torch.set_num_threads``.
Import is cheap; RLlib is imported by :func:`env_runner_class`.
"""

from __future__ import annotations

from functools import cache
from typing import Any


def _threads_env_runner(base: type) -> type:
    class ThreadsEnvRunner(base):  # type: ignore[valid-type, misc]
        """``SingleAgentEnvRunner`` whose remote instances run torch with ``torch_threads``."""

        torch_threads: int = 0

        def __init__(self, *, config: Any, **kwargs: Any) -> None:
            # torch: inside the env runner actor only (importing rlperf.algos must not import it).
            import torch

            if kwargs.get("worker_index", 0) > 0:
                torch.set_num_threads(self.torch_threads)
            super().__init__(config=config, **kwargs)

    return ThreadsEnvRunner


@cache
def env_runner_class(torch_threads: int | None) -> type | None:
    """The env runner class for ``env_runner.torch_threads`` (None: RLlib's default class)."""
    if torch_threads is None:
        return None
    # RLlib: deferred, importing rlperf.algos must not import Ray.
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    base = _threads_env_runner(SingleAgentEnvRunner)
    return type(
        f"SingleAgentEnvRunnerTorchThreads{torch_threads}",
        (base,),
        {"torch_threads": int(torch_threads), "__module__": __name__},
    )
