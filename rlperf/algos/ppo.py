"""PPO (RLlib's new API stack, torch) with the study's network and rlperf's timed learner.

Config subtrees used: ``algo`` (PPO hyperparameters, see ``conf/algo/ppo.yaml``),
``model`` (its kind picks the RLModule), ``env``, ``seed``; the plan gives env
runners (with ``env_runner.*``), learners and GPUs.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from rlperf.resources.plan import ResourcePlan


def build_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """A ``PPOConfig`` for the composed config and resource plan (nothing started yet)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from rlperf.algos.env_runner import env_runner_class
    from rlperf.algos.timed_learner import TimedPPOTorchLearner
    from rlperf.envs.factory import register_rllib_env
    from rlperf.envs.from_config import env_config
    from rlperf.models.rl_module import RL_MODULES, rl_module_model_config

    a = cfg.algo
    return (
        PPOConfig()
        .api_stack(enable_rl_module_and_learner=True, enable_env_runner_and_connector_v2=True)
        .framework("torch")
        .environment(register_rllib_env(), env_config=env_config(cfg))
        .env_runners(
            num_env_runners=plan.num_env_runners,
            num_envs_per_env_runner=plan.envs_per_env_runner,
            gym_env_vectorize_mode=plan.vectorize_mode,
            env_runner_cls=env_runner_class(plan.env_runner_torch_threads),
            num_cpus_per_env_runner=plan.cpus_per_env_runner,  # type: ignore[arg-type]
            num_gpus_per_env_runner=plan.gpus_per_worker_scheduled,
            rollout_fragment_length=a.rollout_fragment_length,
        )
        .learners(
            num_learners=plan.num_learners,
            num_gpus_per_learner=plan.gpus_per_learner,
            learner_class=TimedPPOTorchLearner,
        )
        .training(
            train_batch_size_per_learner=int(a.train_batch_size) // max(plan.num_learners, 1),
            minibatch_size=int(a.minibatch_size),
            num_epochs=int(a.num_epochs),
            lr=float(a.lr),
            gamma=float(a.gamma),
            lambda_=float(a.lambda_),
            clip_param=float(a.clip_param),
            vf_clip_param=float(a.vf_clip_param),
            kl_coeff=float(a.kl_coeff),
            kl_target=float(a.kl_target),
            entropy_coeff=float(a.entropy_coeff),
            vf_loss_coeff=float(a.vf_loss_coeff),
            grad_clip=a.grad_clip,
        )
        .rl_module(
            rl_module_spec=RLModuleSpec(
                module_class=RL_MODULES[str(cfg.model.get("kind") or "vision")],
                model_config=rl_module_model_config(cfg.model),
            )
        )
        .debugging(seed=int(cfg.seed), log_level="WARN")
    )
