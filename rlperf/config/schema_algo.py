"""The ``algo`` group's schema: the keys of each algorithm and their types.

Each ``conf/algo/<name>.yaml`` starts with ``defaults: [/schema/algo/<name>@_here_,
_self_]`` and gives every key its value: the dataclasses here carry the types and
what a key means, the YAML options the values (one place per default). What rlperf
does with an algorithm is its spec (:mod:`rlperf.algos`). Keys carry RLlib's names
(docs/configuration.md#algo).

A dataclass registered with :func:`algo_schema` is an algorithm: its name is a
member of :data:`AlgoName` (so composition rejects any other ``algo.name``) and its
schema is stored as ``schema/algo/<name>``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from omegaconf import MISSING

#: Algorithms users ask for that RLlib 2.60 does not have: ``algo=<name>`` is refused with
#: this reason (:func:`gone_algorithm_hint`), nothing home-made in their place
#: (docs/algorithms.md#not-in-rllib).
NOT_IN_RLLIB = {
    "td3": "TD3 left RLlib in 2.8 (moved to rllib_contrib) and is gone since 2.9",
    "ddpg": "DDPG left RLlib in 2.8 (moved to rllib_contrib) and is gone since 2.9",
    "trpo": "RLlib never had TRPO",
}


def gone_algorithm_hint(cause: BaseException | None) -> str:
    """``algo=td3`` (an option Hydra did not find) for an algorithm RLlib lacks: why, and
    which of rlperf's algorithms does continuous control instead."""
    missing = str(getattr(cause, "missing_cfg_file", "") or "")
    group, _, name = missing.partition("/")
    if group != "algo" or name not in NOT_IN_RLLIB:
        return ""
    return (f"; {NOT_IN_RLLIB[name]}, so rlperf has no algo={name}: for continuous control "
            "use algo=sac (or tqc, ppo, appo, impala) (docs/algorithms.md)")  # fmt: skip


#: ``algo.name`` -> the schema of its keys, in registration order.
ALGO_SCHEMAS: dict[str, type[AlgoConfig]] = {}


def algo_schema(name: str) -> Callable[[type[AlgoConfig]], type[AlgoConfig]]:
    """Register the decorated dataclass as the schema of ``algo.name`` ``name``."""

    def register(cls: type[AlgoConfig]) -> type[AlgoConfig]:
        ALGO_SCHEMAS[name] = cls
        return cls

    return register


@dataclass
class AlgoConfig:
    """``algo``: what every algorithm has. An option extends its algorithm's schema, so a
    PPO key given to DQN is an error at composition."""

    # The annotation is resolved when the schema is stored (register_configs), after
    # AlgoName is made from the registered schemas below.
    name: AlgoName = MISSING
    gamma: float = MISSING
    grad_clip: float | None = MISSING


@algo_schema("ppo")
@dataclass
class PpoAlgoConfig(AlgoConfig):
    """``algo=ppo``: the study's hyperparameters (RLlib 1.1 defaults)."""

    train_batch_size: int = MISSING
    rollout_fragment_length: Any = MISSING  # int or "auto" (the study's 200: see algo/ppo.yaml)
    minibatch_size: int = MISSING
    num_epochs: int = MISSING
    lr: float = MISSING
    lambda_: float = MISSING
    clip_param: float = MISSING
    vf_clip_param: float = MISSING
    kl_coeff: float = MISSING
    kl_target: float = MISSING
    entropy_coeff: float = MISSING
    vf_loss_coeff: float = MISSING


@dataclass
class AsyncAlgoConfig(AlgoConfig):
    """What IMPALA and APPO share: asynchronous actor-learner with V-trace (RLlib 2.60
    defaults)."""

    train_batch_size: int = MISSING  # env steps per learner update (all learners together)
    rollout_fragment_length: Any = MISSING  # int or "auto"
    # train() loops training_step for at least this long (RLlib: 10 s) and at least
    # until this many env steps are sampled (RLlib: 0).
    min_time_s_per_iteration: float = MISSING
    min_sample_timesteps_per_iteration: int = MISSING
    lr: float = MISSING
    vtrace_clip_rho_threshold: float = MISSING
    vtrace_clip_pg_rho_threshold: float = MISSING
    vf_loss_coeff: float = MISSING
    entropy_coeff: float = MISSING
    broadcast_interval: int = MISSING  # training_step calls between weight broadcasts
    num_epochs: int = MISSING
    # null = the whole batch; else a multiple of rollout_fragment_length.
    minibatch_size: int | None = MISSING
    # RLlib 2.60 defaults to true (env runners pull weights from a state-server actor);
    # false: the driver pushes them. Measured on 2 cores: with true, no env steps in 16 s.
    use_env_runner_state_server: bool = MISSING


@algo_schema("appo")
@dataclass
class AppoAlgoConfig(AsyncAlgoConfig):
    """``algo=appo``: asynchronous PPO (IMPALA's architecture plus PPO's clipped
    surrogate against a target network; batches are reused from a circular buffer)."""

    lambda_: float = MISSING
    clip_param: float = MISSING
    use_kl_loss: bool = MISSING
    kl_coeff: float = MISSING
    kl_target: float = MISSING
    target_network_update_freq: int = MISSING
    tau: float = MISSING
    circular_buffer_num_batches: int = MISSING
    circular_buffer_iterations_per_batch: int = MISSING


@algo_schema("impala")
@dataclass
class ImpalaAlgoConfig(AsyncAlgoConfig):
    """``algo=impala``: asynchronous actor-learner with V-trace."""

    learner_queue_size: int = MISSING  # batches waiting for a remote learner's thread


@dataclass
class ReplayAlgoConfig(AlgoConfig):
    """What DQN and SAC share: an episode replay buffer in the driver."""

    train_batch_size: int = MISSING
    rollout_fragment_length: Any = MISSING
    replay_buffer_capacity: int = MISSING  # RLlib: replay_buffer_config.capacity (env steps)
    num_steps_sampled_before_learning_starts: int = MISSING
    # Trained / sampled steps; null = one update per sampled batch (RLlib's default).
    training_intensity: float | None = MISSING
    n_step: int = MISSING
    target_network_update_freq: int = MISSING
    tau: float = MISSING
    min_sample_timesteps_per_iteration: int = MISSING
    min_time_s_per_iteration: float | None = MISSING


@algo_schema("dqn")
@dataclass
class DqnAlgoConfig(ReplayAlgoConfig):
    """``algo=dqn``: (double, dueling) Q-learning; ``Discrete`` actions (RLlib 2.60 defaults)."""

    lr: float = MISSING
    double_q: bool = MISSING
    dueling: bool = MISSING
    # epsilon-greedy schedule, [[env_step, epsilon], ...] interpolated linearly.
    epsilon: list[Any] = MISSING


@algo_schema("sac")
@dataclass
class SacAlgoConfig(ReplayAlgoConfig):
    """``algo=sac``: soft actor-critic; ``Box`` actions (RLlib 2.60 defaults)."""

    actor_lr: float = MISSING
    critic_lr: float = MISSING
    alpha_lr: float = MISSING
    initial_alpha: float = MISSING
    target_entropy: Any = MISSING  # a float, or "auto" (-|A|)
    twin_q: bool = MISSING


@algo_schema("tqc")
@dataclass
class TqcAlgoConfig(ReplayAlgoConfig):
    """``algo=tqc``: truncated quantile critics (SAC's actor and entropy, critics of
    quantiles whose top ones are dropped from the target); ``Box`` actions (RLlib 2.60
    defaults)."""

    actor_lr: float = MISSING
    critic_lr: float = MISSING
    alpha_lr: float = MISSING
    initial_alpha: float = MISSING
    target_entropy: Any = MISSING  # a float, or "auto" (-|A|)
    n_quantiles: int = MISSING  # quantiles per critic
    n_critics: int = MISSING
    top_quantiles_to_drop_per_net: int = MISSING  # dropped from each critic's target


#: ``algo.name``: one member per registered schema. Built with the functional API from
#: :data:`ALGO_SCHEMAS`, so adding an algorithm's schema adds its name.
AlgoName = StrEnum("AlgoName", {name: name for name in ALGO_SCHEMAS})  # type: ignore[misc]
