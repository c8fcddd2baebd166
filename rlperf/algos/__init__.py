"""RLlib algorithm configs: one :class:`~rlperf.specs.algos.AlgoSpec` per ``algo.name``.

:func:`build_algo_config` turns the composed config and a resource plan into an
RLlib ``AlgorithmConfig`` (nothing started). The training job trains with it,
the rollout restores its checkpoint into it, and the sweep pre-flight asks it
which resources a cell needs. An algorithm is its spec (its RLlib class, the
actions it takes, RLlib's default learners, its timing, validator and builder),
defined in its module (:mod:`rlperf.algos.ppo`, ...) and listed in :data:`SPECS`;
its keys are its schema (:mod:`rlperf.config.schema_algo`) and their values
``conf/algo/<name>.yaml`` (docs/algorithms.md). Importing this package is cheap:
RLlib is imported when a config is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlperf.algos import appo, impala, ppo, replay
from rlperf.errors import ConfigError
from rlperf.resources.plan import resource_plan
from rlperf.specs.algos import AlgoSpec

if TYPE_CHECKING:
    from rlperf.resources.plan import ResourcePlan

#: ``algo.name`` -> its spec.
SPECS: dict[str, AlgoSpec] = {
    s.name: s
    for s in (ppo.SPEC, appo.SPEC, impala.SPEC, replay.DQN_SPEC, replay.SAC_SPEC, replay.TQC_SPEC)
}


def spec_of(cfg: DictConfig) -> AlgoSpec:
    """The spec of ``cfg.algo.name``."""
    name = str(cfg.algo.name)
    if name not in SPECS:
        raise ConfigError(f"algo.name={name!r} is not valid; choose one of: {', '.join(SPECS)}")
    return SPECS[name]


def build_algo_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """The RLlib ``AlgorithmConfig`` of ``cfg.algo.name`` for the config and resource plan.

    Config subtrees used: ``algo``, ``model``, ``env``, ``seed`` (and what the
    algorithm's module documents); ``plan`` gives env runners, learners and GPUs.
    """
    spec = spec_of(cfg)
    return spec.builder(spec.rllib_config(), cfg, plan)


def plan_resources(cfg: DictConfig) -> ResourcePlan:
    """The resource plan of ``cfg`` (:func:`rlperf.resources.plan.resource_plan`) with its
    algorithm's RLlib default learners (what ``learners=null`` gives)."""
    return resource_plan(cfg, spec_of(cfg).default_learners)


__all__ = ["SPECS", "AlgoSpec", "build_algo_config", "plan_resources", "spec_of"]
