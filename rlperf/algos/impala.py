"""IMPALA (RLlib's new API stack, torch): asynchronous actor-learner with V-trace, on
rlperf's networks (the same RLModules as PPO: policy and value).

Config subtrees used: ``algo`` (``conf/algo/impala.yaml``), ``model``, ``env``,
``seed``; the plan gives env runners, learners (RLlib's default: one remote learner,
asynchronous; ``learners=0`` makes it synchronous) and GPUs. Its timing is
:class:`rlperf.algos.timing.AsyncTiming`: no sequential phase columns.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

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


def build_config(cfg: DictConfig, plan: ResourcePlan) -> Any:
    """An ``IMPALAConfig`` for the composed config and resource plan (nothing started yet)."""
    from ray.rllib.algorithms.impala import IMPALAConfig

    from rlperf.algos.common import common_config, optional_reporting, rlperf_module_spec

    a = cfg.algo
    config = common_config(IMPALAConfig(), cfg, plan).env_runners(
        use_env_runner_state_server=bool(a.use_env_runner_state_server)
    )
    return (
        optional_reporting(config, a)
        .training(**impala_training(a, plan), learner_queue_size=int(a.learner_queue_size))
        .rl_module(rl_module_spec=rlperf_module_spec(cfg))
    )
