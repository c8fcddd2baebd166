"""DQN and SAC (RLlib's new API stack, torch): off-policy learning from an episode
replay buffer in the driver, on RLlib's default RLModules shaped by the MLP model.

Config subtrees used: ``algo`` (``conf/algo/dqn.yaml``, ``conf/algo/sac.yaml``),
``model`` (``kind=mlp``: ``hiddens`` and ``activation`` become RLlib's
``fcnet_hiddens``/``fcnet_activation``), ``env``, ``seed``. DQN needs ``Discrete``
actions, SAC a ``Box`` (checked before Ray starts: :mod:`rlperf.config.validate`).
Their timing is :class:`rlperf.algos.timing.ReplayTiming`.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from rlperf.resources.plan import ResourcePlan


def _replay_training(a: DictConfig, plan: ResourcePlan) -> dict[str, Any]:
    return {
        "train_batch_size_per_learner": int(a.train_batch_size),
        "gamma": float(a.gamma),
        "grad_clip": a.grad_clip,
        "replay_buffer_config": {
            "type": "PrioritizedEpisodeReplayBuffer",
            "capacity": int(a.replay_buffer_capacity),
        },
        "num_steps_sampled_before_learning_starts": int(a.num_steps_sampled_before_learning_starts),
        "training_intensity": a.training_intensity,
        "n_step": int(a.n_step),
        "target_network_update_freq": int(a.target_network_update_freq),
        "tau": float(a.tau),
    }


def build_dqn_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """A ``DQNConfig`` for the composed config and resource plan (nothing started yet)."""
    from ray.rllib.algorithms.dqn import DQNConfig

    from rlperf.algos.common import common_config, optional_reporting, rllib_mlp_module_spec

    a = cfg.algo
    config = common_config(DQNConfig(), cfg, plan)
    return (
        optional_reporting(config, a)
        .training(
            **_replay_training(a, plan),
            lr=float(a.lr),
            double_q=bool(a.double_q),
            dueling=bool(a.dueling),
            epsilon=[(int(t), float(e)) for t, e in a.epsilon],
        )
        .rl_module(rl_module_spec=rllib_mlp_module_spec(cfg))
    )


def build_sac_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """A ``SACConfig`` for the composed config and resource plan (nothing started yet)."""
    from ray.rllib.algorithms.sac import SACConfig

    from rlperf.algos.common import common_config, optional_reporting, rllib_mlp_module_spec

    a = cfg.algo
    te = a.target_entropy
    config = common_config(SACConfig(), cfg, plan)
    return (
        optional_reporting(config, a)
        .training(
            **_replay_training(a, plan),
            actor_lr=float(a.actor_lr),
            critic_lr=float(a.critic_lr),
            alpha_lr=float(a.alpha_lr),
            initial_alpha=float(a.initial_alpha),
            target_entropy=te if te == "auto" else float(te),
            twin_q=bool(a.twin_q),
        )
        .rl_module(rl_module_spec=rllib_mlp_module_spec(cfg))
    )
