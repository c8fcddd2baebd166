"""PPO (RLlib's new API stack, torch) with the study's network and rlperf's timed learner.

Config subtrees used: ``algo`` (PPO hyperparameters, see ``conf/algo/ppo.yaml``),
``model`` (its kind picks the RLModule), ``env``, ``seed``; the plan gives env
runners (with ``env_runner.*``), learners and GPUs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlperf.algos.common import common_config, rlperf_module_spec
from rlperf.checks import positive
from rlperf.errors import ConfigError
from rlperf.specs.algos import AlgoSpec

if TYPE_CHECKING:
    from rlperf.resources.plan import ResourcePlan


def build_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """RLlib's ``PPOConfig`` ``config`` with the composed config and resource plan."""
    # RLlib's module: deferred, importing rlperf.algos must not import Ray.
    from rlperf.algos.timed_learner import TimedPPOTorchLearner

    a = cfg.algo
    return (
        common_config(config, cfg, plan, TimedPPOTorchLearner)
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
        .rl_module(rl_module_spec=rlperf_module_spec(cfg))
    )


def validate(cfg: DictConfig) -> None:
    """``algo.*`` of PPO: the minibatch fits in the train batch."""
    a = cfg.algo
    positive("algo.minibatch_size", a.minibatch_size)
    positive("algo.num_epochs", a.num_epochs)
    if a.minibatch_size > a.train_batch_size:
        raise ConfigError(
            f"algo.minibatch_size={a.minibatch_size} exceeds algo.train_batch_size="
            f"{a.train_batch_size}"
        )


SPEC = AlgoSpec(
    name="ppo",
    rllib_class="ray.rllib.algorithms.ppo:PPO",
    builder=build_config,
    validator=validate,
    timing="rlperf.algos.timing:SequentialTiming",
    default_learners=0,  # the learner runs in the driver
)
