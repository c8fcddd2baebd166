"""APPO (RLlib's new API stack, torch): IMPALA's asynchronous architecture with PPO's
clipped surrogate against a target network, on rlperf's networks (their RLModules
with RLlib's ``TargetNetworkAPI``: :data:`rlperf.models.rl_module.APPO_RL_MODULES`).

Config subtrees used: ``algo`` (``conf/algo/appo.yaml``), ``model``, ``env``,
``seed``; learners as for IMPALA (:mod:`rlperf.algos.impala`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlperf.algos.common import rlperf_module_spec
from rlperf.algos.impala import async_config, impala_training, validate_async
from rlperf.checks import fraction, positive
from rlperf.specs.algos import AlgoSpec

if TYPE_CHECKING:
    from rlperf.resources.plan import ResourcePlan


def build_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """RLlib's ``APPOConfig`` ``config`` with the composed config and resource plan."""
    # rlperf's RLModules subclass RLlib's: deferred, importing rlperf.algos must not import Ray.
    from rlperf.models.rl_module import APPO_RL_MODULES

    a = cfg.algo
    return (
        async_config(config, cfg, plan)
        .training(
            **impala_training(a, plan),
            lambda_=float(a.lambda_),
            clip_param=float(a.clip_param),
            use_kl_loss=bool(a.use_kl_loss),
            kl_coeff=float(a.kl_coeff),
            kl_target=float(a.kl_target),
            target_network_update_freq=int(a.target_network_update_freq),
            tau=float(a.tau),
            circular_buffer_num_batches=int(a.circular_buffer_num_batches),
            circular_buffer_iterations_per_batch=int(a.circular_buffer_iterations_per_batch),
        )
        .rl_module(rl_module_spec=rlperf_module_spec(cfg, APPO_RL_MODULES))
    )


def validate(cfg: DictConfig) -> None:
    """``algo.*`` of APPO: what it shares with IMPALA, its clip and target network."""
    validate_async(cfg)
    a = cfg.algo
    positive("algo.clip_param", a.clip_param)
    fraction("algo.tau", a.tau, low_open=True)
    positive("algo.target_network_update_freq", a.target_network_update_freq)
    positive("algo.circular_buffer_num_batches", a.circular_buffer_num_batches)
    positive("algo.circular_buffer_iterations_per_batch", a.circular_buffer_iterations_per_batch)


SPEC = AlgoSpec(
    name="appo",
    rllib_class="ray.rllib.algorithms.appo:APPO",
    builder=build_config,
    validator=validate,
    timing="rlperf.algos.timing:AsyncTiming",
    default_learners=1,  # as IMPALA: one remote learner; 0 makes it synchronous
)
