"""DQN, SAC and TQC (RLlib's new API stack, torch): off-policy learning from an episode
replay buffer in the driver, on RLlib's default RLModules shaped by the MLP model.

Config subtrees used: ``algo`` (``conf/algo/dqn.yaml``, ``sac.yaml``, ``tqc.yaml``),
``model`` (``kind=mlp``: ``hiddens`` and ``activation`` become RLlib's
``fcnet_hiddens``/``fcnet_activation``), ``env``, ``seed``. DQN needs ``Discrete``
actions, SAC and TQC a ``Box`` (their specs' ``actions``, checked on the built env before Ray
starts). Their timing is :class:`rlperf.algos.timing.ReplayTiming`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rlperf.algos.common import common_config, optional_reporting, rllib_mlp_module_spec
from rlperf.checks import fraction, positive
from rlperf.errors import ConfigError
from rlperf.specs.algos import ActionSpace, AlgoSpec

if TYPE_CHECKING:
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


def build_dqn_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """RLlib's ``DQNConfig`` ``config`` with the composed config and resource plan."""
    a = cfg.algo
    config = common_config(config, cfg, plan)
    return (
        optional_reporting(config, a)
        .training(
            **_replay_training(a, plan),
            lr=float(a.lr),
            double_q=bool(a.double_q),
            dueling=bool(a.dueling),
            epsilon=[(int(t), float(e)) for t, e in a.epsilon],
        )
        .rl_module(rl_module_spec=rllib_mlp_module_spec(cfg, _dqn_module()))
    )


def _entropy_training(a: DictConfig) -> dict[str, Any]:
    """The actor's and the entropy's keys SAC and TQC share."""
    te = a.target_entropy
    return {
        "actor_lr": float(a.actor_lr),
        "critic_lr": float(a.critic_lr),
        "alpha_lr": float(a.alpha_lr),
        "initial_alpha": float(a.initial_alpha),
        "target_entropy": te if te == "auto" else float(te),
    }


def build_sac_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """RLlib's ``SACConfig`` ``config`` with the composed config and resource plan."""
    a = cfg.algo
    config = common_config(config, cfg, plan)
    return (
        optional_reporting(config, a)
        .training(**_replay_training(a, plan), **_entropy_training(a), twin_q=bool(a.twin_q))
        .rl_module(rl_module_spec=rllib_mlp_module_spec(cfg, _sac_module()))
    )


def build_tqc_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """RLlib's ``TQCConfig`` ``config`` with the composed config and resource plan."""
    a = cfg.algo
    config = common_config(config, cfg, plan)
    return (
        optional_reporting(config, a)
        .training(
            **_replay_training(a, plan),
            **_entropy_training(a),
            n_quantiles=int(a.n_quantiles),
            n_critics=int(a.n_critics),
            top_quantiles_to_drop_per_net=int(a.top_quantiles_to_drop_per_net),
        )
        .rl_module(rl_module_spec=rllib_mlp_module_spec(cfg, _tqc_module()))
    )


def _dqn_module() -> type:
    """rlperf's DQN module: RLlib's, its greedy forward also giving its Q-values."""
    # rlperf's RLModules subclass RLlib's: deferred, importing rlperf.algos must not import Ray.
    from rlperf.models.rl_module import DqnRLModule

    return DqnRLModule


def _sac_module() -> type:
    """rlperf's SAC module: RLlib's, acting greedily with the reference actor."""
    # rlperf's RLModules subclass RLlib's: deferred, importing rlperf.algos must not import Ray.
    from rlperf.models.rl_module import SacRLModule

    return SacRLModule


def _tqc_module() -> type:
    """rlperf's TQC module: RLlib's, acting greedily with the reference actor."""
    # rlperf's RLModules subclass RLlib's: deferred, importing rlperf.algos must not import Ray.
    from rlperf.models.rl_module import TqcRLModule

    return TqcRLModule


def validate_replay(cfg: DictConfig) -> None:
    """``algo.*`` DQN and SAC share: replay keys, and RLlib's MLP modules (``model.kind=mlp``)."""
    a = cfg.algo
    kind = str(OmegaConf.select(cfg, "model.kind", default=None) or "vision")
    if kind != "mlp":
        raise ConfigError(
            f"algo={a.name} with model={cfg.model.name} (kind {kind}): rlperf runs {a.name} on "
            f"RLlib's own networks shaped by an MLP model; use model=mlp64 (or mlp256). "
            f"Image observations (Atari) with {a.name} are not supported yet"
        )
    if a.replay_buffer_capacity < a.train_batch_size:
        raise ConfigError(
            f"algo.replay_buffer_capacity={a.replay_buffer_capacity} is smaller than "
            f"algo.train_batch_size={a.train_batch_size}; it must hold at least one batch"
        )
    positive("algo.n_step", a.n_step)
    fraction("algo.tau", a.tau, low_open=True)
    for key in ("num_steps_sampled_before_learning_starts", "target_network_update_freq"):
        positive(f"algo.{key}", a[key], allow_zero=True)
    positive("algo.min_sample_timesteps_per_iteration", a.min_sample_timesteps_per_iteration, True)
    for key in ("training_intensity", "min_time_s_per_iteration"):
        if a[key] is not None:
            positive(f"algo.{key}", a[key], allow_zero=key != "training_intensity")


def validate_dqn(cfg: DictConfig) -> None:
    """``algo.*`` of DQN: the replay keys and the epsilon schedule."""
    validate_replay(cfg)
    schedule = list(cfg.algo.epsilon)
    ok = bool(schedule) and all(
        len(p) == 2 and isinstance(p[0], int) and isinstance(p[1], int | float) and 0 <= p[1] <= 1
        for p in schedule
    )
    ok = ok and all(a[0] < b[0] for a, b in zip(schedule, schedule[1:], strict=False))
    if not ok:
        raise ConfigError(
            f"algo.epsilon={schedule} must be [[env_step, epsilon], ...] with increasing "
            f"steps and epsilon in [0, 1] (e.g. [[0, 1.0], [10000, 0.05]])"
        )


def validate_sac(cfg: DictConfig) -> None:
    """``algo.*`` of SAC (and TQC): the replay keys and the target entropy."""
    validate_replay(cfg)
    te = cfg.algo.target_entropy
    if te != "auto" and not isinstance(te, int | float):
        raise ConfigError(f"algo.target_entropy={te!r} must be 'auto' (-dim(actions)) or a number")


def validate_tqc(cfg: DictConfig) -> None:
    """``algo.*`` of TQC: SAC's, and quantiles that leave some in the target."""
    validate_sac(cfg)
    a = cfg.algo
    for key in ("n_quantiles", "n_critics"):
        positive(f"algo.{key}", a[key])
    positive("algo.top_quantiles_to_drop_per_net", a.top_quantiles_to_drop_per_net, True)
    if a.top_quantiles_to_drop_per_net >= a.n_quantiles:
        raise ConfigError(
            f"algo.top_quantiles_to_drop_per_net={a.top_quantiles_to_drop_per_net} leaves no "
            f"quantile of algo.n_quantiles={a.n_quantiles} in the target; drop fewer than "
            f"n_quantiles (RLlib's default: 2 of 25)"
        )


#: SAC's and TQC's actions.
BOX_ACTIONS = ActionSpace("Box", "env=pendulum", "algo=dqn or ppo for discrete actions")

DQN_SPEC = AlgoSpec(
    name="dqn",
    rllib_class="ray.rllib.algorithms.dqn:DQN",
    builder=build_dqn_config,
    validator=validate_dqn,
    timing="rlperf.algos.timing:ReplayTiming",
    default_learners=0,  # the learner runs in the driver
    actions=ActionSpace(
        "Discrete", "env=cartpole (or frozenlake)", "algo=sac for continuous actions"
    ),
)

SAC_SPEC = AlgoSpec(
    name="sac",
    rllib_class="ray.rllib.algorithms.sac:SAC",
    builder=build_sac_config,
    validator=validate_sac,
    timing="rlperf.algos.timing:ReplayTiming",
    default_learners=0,  # the learner runs in the driver
    actions=BOX_ACTIONS,
)

TQC_SPEC = AlgoSpec(
    name="tqc",
    rllib_class="ray.rllib.algorithms.tqc:TQC",
    builder=build_tqc_config,
    validator=validate_tqc,
    timing="rlperf.algos.timing:ReplayTiming",
    default_learners=0,  # the learner runs in the driver
    actions=BOX_ACTIONS,
)
