"""IMPALA (RLlib's new API stack, torch): asynchronous actor-learner with V-trace, on
rlperf's networks (the same RLModules as PPO: policy and value).

Config subtrees used: ``algo`` (``conf/algo/impala.yaml``), ``model``, ``env``,
``seed``; the plan gives env runners, learners (RLlib's default: one remote learner,
asynchronous; ``learners=0`` makes it synchronous) and GPUs. Its timing is
:class:`rlperf.algos.timing.AsyncTiming`: no sequential phase columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlperf.algos.common import common_config, optional_reporting, rlperf_module_spec
from rlperf.checks import positive
from rlperf.errors import ConfigError
from rlperf.specs.algos import AlgoSpec

if TYPE_CHECKING:
    from rlperf.resources.plan import ResourcePlan


def impala_training(a: DictConfig, plan: ResourcePlan) -> dict[str, Any]:
    """The ``.training(...)`` keywords IMPALA and APPO share."""
    return {
        "train_batch_size_per_learner": int(a.train_batch_size) // max(plan.num_learners, 1),
        "lr": float(a.lr),
        "gamma": float(a.gamma),
        "grad_clip": a.grad_clip,
        "vtrace_clip_rho_threshold": float(a.vtrace_clip_rho_threshold),
        "vtrace_clip_pg_rho_threshold": float(a.vtrace_clip_pg_rho_threshold),
        "vf_loss_coeff": float(a.vf_loss_coeff),
        "entropy_coeff": float(a.entropy_coeff),
        "broadcast_interval": int(a.broadcast_interval),
        "num_epochs": int(a.num_epochs),
        "minibatch_size": None if a.minibatch_size is None else int(a.minibatch_size),
    }


def async_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """What IMPALA's and APPO's RLlib configs share before their training settings: the
    common settings, the env runners' state server and the optional reporting."""
    config = common_config(config, cfg, plan).env_runners(
        use_env_runner_state_server=bool(cfg.algo.use_env_runner_state_server)
    )
    return optional_reporting(config, cfg.algo)


def build_config(config: Any, cfg: DictConfig, plan: ResourcePlan) -> Any:
    """RLlib's ``IMPALAConfig`` ``config`` with the composed config and resource plan."""
    a = cfg.algo
    return (
        async_config(config, cfg, plan)
        .training(**impala_training(a, plan), learner_queue_size=int(a.learner_queue_size))
        .rl_module(rl_module_spec=rlperf_module_spec(cfg))
    )


def validate_async(cfg: DictConfig) -> None:
    """``algo.*`` IMPALA and APPO share: iteration bounds, epochs, the minibatch."""
    a = cfg.algo
    positive("algo.min_time_s_per_iteration", a.min_time_s_per_iteration, allow_zero=True)
    positive("algo.min_sample_timesteps_per_iteration", a.min_sample_timesteps_per_iteration, True)
    positive("algo.num_epochs", a.num_epochs)
    positive("algo.broadcast_interval", a.broadcast_interval)
    mb = a.minibatch_size
    rfl = a.rollout_fragment_length
    fits = isinstance(mb, int) and 0 < mb <= a.train_batch_size and isinstance(rfl, int)
    if mb is not None and not (fits and mb % rfl == 0):
        raise ConfigError(
            f"algo.minibatch_size={mb!r} must be null (the whole batch) or a multiple of "
            f"algo.rollout_fragment_length={a.rollout_fragment_length} up to "
            f"algo.train_batch_size={a.train_batch_size}"
        )


def validate(cfg: DictConfig) -> None:
    """``algo.*`` of IMPALA: what it shares with APPO, and its learner queue."""
    validate_async(cfg)
    positive("algo.learner_queue_size", cfg.algo.learner_queue_size)


SPEC = AlgoSpec(
    name="impala",
    rllib_class="ray.rllib.algorithms.impala:IMPALA",
    builder=build_config,
    validator=validate,
    timing="rlperf.algos.timing:AsyncTiming",
    # One remote learner actor (a CPU of its own); with num_learners=0 IMPALA is
    # synchronous (do_async_updates = num_learners > 0 in RLlib's training_step), so
    # learners=0 changes what it measures.
    default_learners=1,
)
