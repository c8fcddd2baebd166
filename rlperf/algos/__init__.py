"""RLlib algorithm configs, one module per ``algo.name``.

:func:`build_algo_config` turns the composed config and a resource plan into an
RLlib ``AlgorithmConfig`` (nothing started). The training job trains with it,
the rollout restores its checkpoint into it, and the sweep pre-flight asks it
which resources a cell needs. To add an algorithm: a module beside
:mod:`rlperf.algos.ppo` with a ``build_config(cfg, plan)`` (the settings all share are
:mod:`rlperf.algos.common`), its line in :data:`ALGORITHMS`, its member in ``AlgoName``
and its schema in ``KIND_SCHEMAS["algo"]`` (:mod:`rlperf.config.schema`, which make
composition accept the name and its keys), ``conf/algo/<name>.yaml``, and its timing in
:data:`rlperf.algos.timing.TIMINGS`. Importing this package is cheap: RLlib is imported by the
algorithm's module.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

if TYPE_CHECKING:
    from rlperf.resources.plan import ResourcePlan

#: ``algo.name`` -> ``module:function``, the ``function(cfg, plan)`` that builds its
#: AlgorithmConfig.
ALGORITHMS = {
    "ppo": "rlperf.algos.ppo:build_config",
    "appo": "rlperf.algos.appo:build_config",
    "impala": "rlperf.algos.impala:build_config",
    "dqn": "rlperf.algos.replay:build_dqn_config",
    "sac": "rlperf.algos.replay:build_sac_config",
}

#: RLlib 2.60's default ``num_learners`` per algorithm, what ``learners=null`` gives
#: (without a multi-GPU layout). PPO, DQN and SAC learn in the driver (0). APPO and
#: IMPALA default to one remote learner actor (a CPU of its own) and become
#: *synchronous* with ``num_learners=0`` (``do_async_updates = num_learners > 0`` in
#: RLlib's IMPALA.training_step): ``learners=0`` changes what they measure.
RLLIB_DEFAULT_LEARNERS = {"ppo": 0, "appo": 1, "impala": 1, "dqn": 0, "sac": 0}


def build_algo_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """The RLlib ``AlgorithmConfig`` of ``cfg.algo.name`` for the config and resource plan.

    Config subtrees used: ``algo``, ``model``, ``env``, ``seed`` (and what the
    algorithm's module documents); ``plan`` gives env runners, learners and GPUs.
    """
    from rlperf.errors import ConfigError

    name = str(cfg.algo.name)
    if name not in ALGORITHMS:
        raise ConfigError(
            f"algo.name={name!r} is not valid; choose one of: {', '.join(ALGORITHMS)}"
        )
    module, function = ALGORITHMS[name].split(":")
    return getattr(import_module(module), function)(cfg, plan)


__all__ = ["ALGORITHMS", "RLLIB_DEFAULT_LEARNERS", "build_algo_config"]
