"""What every algorithm's ``AlgorithmConfig`` shares: API stack, env, env runners,
learners, seed. Each algorithm's module (:mod:`rlperf.algos.ppo`, ...) adds its
training keys and its RLModule."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlperf.algos.env_runner import env_runner_class
from rlperf.envs.factory import register_rllib_env
from rlperf.envs.from_config import env_config

if TYPE_CHECKING:
    from rlperf.resources.plan import ResourcePlan


def common_config(
    config: Any, cfg: DictConfig, plan: ResourcePlan, learner_class: type | None = None
) -> Any:
    """``config`` (an RLlib ``AlgorithmConfig``) with the settings every rlperf algorithm
    shares: new API stack, torch, the env, env runners and learners of ``plan``,
    ``algo.rollout_fragment_length``, ``seed``."""
    learners: dict[str, Any] = {}
    if learner_class is not None:
        learners["learner_class"] = learner_class
    return (
        config.api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .environment(register_rllib_env(), env_config=env_config(cfg))
        .env_runners(
            num_env_runners=plan.num_env_runners,
            num_envs_per_env_runner=plan.envs_per_env_runner,
            gym_env_vectorize_mode=plan.vectorize_mode,
            env_runner_cls=env_runner_class(plan.env_runner_torch_threads),
            num_cpus_per_env_runner=plan.cpus_per_env_runner,  # type: ignore[arg-type]
            num_gpus_per_env_runner=plan.gpus_per_worker_scheduled,
            rollout_fragment_length=cfg.algo.rollout_fragment_length,
        )
        .learners(
            num_learners=plan.num_learners,
            num_gpus_per_learner=plan.gpus_per_learner,
            **learners,
        )
        .debugging(seed=int(cfg.seed), log_level="WARN")
    )


def rlperf_module_spec(cfg: DictConfig, modules: dict[str, type] | None = None) -> Any:
    """The ``RLModuleSpec`` of rlperf's network for ``model.kind`` (from ``modules``,
    default :data:`rlperf.models.rl_module.RL_MODULES`)."""
    # RLlib, and rlperf's RLModules that subclass its: deferred (importing rlperf.algos
    # must not import Ray or torch).
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rlperf.models.rl_module import RL_MODULES, rl_module_model_config

    kind = str(cfg.model.get("kind") or "vision")
    return RLModuleSpec(
        module_class=(modules or RL_MODULES)[kind],
        model_config=rl_module_model_config(cfg.model),
    )


def rllib_mlp_module_spec(cfg: DictConfig, module_class: type | None = None) -> Any:
    """An ``RLModuleSpec`` of the algorithm's RLlib module (DQN's Q-network, SAC's policy
    and Q-networks; ``module_class``, default RLlib's) shaped by the MLP model's
    ``hiddens`` and ``activation``."""
    # RLlib: deferred, importing rlperf.algos must not import Ray.
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    return RLModuleSpec(
        module_class=module_class,
        model_config={
            "fcnet_hiddens": list(cfg.model.hiddens),
            "fcnet_activation": str(cfg.model.activation),
        },
    )


def optional_reporting(config: Any, a: DictConfig) -> Any:
    """``min_time_s_per_iteration`` / ``min_sample_timesteps_per_iteration`` where ``algo``
    has them (how long one ``train()`` call loops ``training_step``)."""
    keys = ("min_time_s_per_iteration", "min_sample_timesteps_per_iteration")
    return config.reporting(**{k: a[k] for k in keys if k in a})
