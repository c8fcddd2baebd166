"""A downstream job's effective config: its own, with the upstream run's ``model``, ``env`` and
``algo`` in force.

A downstream stage (rollout, edge, serve) takes ``model``, ``env`` and ``algo``
from its training run's config (:func:`merge_run_config`): ``env.*`` given on the
command line apply on top, and an explicit ``model=`` that differs from the run's
is an error. :func:`upstream_run` is the whole step for a stage (find and check the
run, then merge); :func:`write_effective_config` records what actually ran, which
the report reads before ``.hydra/config.yaml``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import ConfigError
from rlperf.layout import EFFECTIVE_CONFIG_FILE
from rlperf.runs.checkpoint import TrainedRun, load_trained_run
from rlperf.runs.geometry import geometry_text, model_geometry
from rlperf.runs.jobs import job_query
from rlperf.runs.overrides import command_line_overrides, override_keys
from rlperf.specs.engines import ENGINE_KEYS
from rlperf.validation.groups import validate_env, validate_env_model, validate_model


def _plain(cfg: DictConfig, key: str) -> dict[str, Any]:
    node = OmegaConf.select(cfg, key)
    out = OmegaConf.to_container(node, resolve=True) if node is not None else {}
    assert isinstance(out, dict)
    return {str(k): v for k, v in out.items()}


def _check_explicit_model(cfg: DictConfig, trained: TrainedRun, keys: set[str]) -> None:
    run_model = model_geometry(trained.config.model)
    for key in sorted(keys):
        if (key == "model" or key.startswith("model.")) and (
            model_geometry(cfg.model) != run_model
            or (key == "model" and cfg.model.name != trained.config.model.name)
        ):
            given = cfg.model.name if key == "model" else OmegaConf.select(cfg, key)
            raise ConfigError(
                f"{key}={given} was given, but the run {trained.run_dir} trained "
                f"model={trained.config.model.name} ({geometry_text(run_model)}); the "
                f"{cfg.stage} takes the model from the run: drop {key}= or give that model's run"
            )


def merge_run_config(
    cfg: DictConfig, trained: TrainedRun, overrides: Iterable[str] = ()
) -> DictConfig:
    """A downstream job's config with ``model``, ``env`` and ``algo`` taken from the run.

    Everything else (``seed``, ``workers``, ``gpu_layout``, ``rollout``, ``edge``,
    ...) is the job's own. ``overrides`` are the job's command-line overrides: an
    ``env=`` / ``env.<key>=`` among them is applied on top of the run's env; a
    ``model=`` / ``model.<key>=`` that disagrees with the run's model is a
    :class:`~rlperf.errors.ConfigError`.
    """
    keys = override_keys(overrides)
    _check_explicit_model(cfg, trained, keys)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    plain["model"] = {"kind": "vision", **_plain(trained.config, "model")}
    plain["env"] = _effective_env(dict(plain["env"]), trained, keys)
    plain["algo"] = {**plain["algo"], **_plain(trained.config, "algo")}
    out = OmegaConf.create(plain)
    OmegaConf.set_struct(out, True)
    validate_env(out)
    validate_model(out)
    validate_env_model(out)
    return out


def _effective_env(own_env: dict[str, Any], trained: TrainedRun, keys: set[str]) -> dict[str, Any]:
    """The run's env; the job's own where ``env=`` was given; ``env.<key>=`` on top.

    Keys the job's env has and the run's lacks (newer than the run) keep the job's
    defaults where both are of the same kind (a run without ``kind`` is Atari).
    """
    run_env = {"kind": "atari", **_plain(trained.config, "env")}
    if "env" in keys:
        return own_env
    env = {**own_env, **run_env} if own_env.get("kind") == run_env["kind"] else dict(run_env)
    # What stepped the run's env is not what the env is: a downstream job steps it its own
    # way (env.engine=ale_vector trains; a rollout plays the same game with rlperf's wrappers).
    for key in ENGINE_KEYS:
        env[key] = own_env.get(key)
    for key in sorted(keys):
        if not key.startswith("env."):
            continue
        top = key[4:].split(".")[0]
        if top not in env:
            raise ConfigError(
                f"{key} was given, but the run {trained.run_dir} trained on an env of kind "
                f"{run_env['kind']}, which has no {top!r}; its keys are {sorted(env)}"
            )
        env[top] = own_env[top]
    return env


def upstream_run(cfg: DictConfig, *, rllib: bool = True) -> tuple[TrainedRun, DictConfig]:
    """The checked training run of a downstream job, and the job's effective config.

    Config keys used: ``run``, ``checkpoint``, ``model`` (an explicit ``model=``
    picks the job of a sweep folder and must match the run's), ``run_match`` and
    ``run_select`` (which job of a sweep folder, :func:`job_query`); ``env.*``
    given on the command line apply on top of the run's env
    (:func:`merge_run_config`). ``rllib`` as for :func:`load_trained_run`.
    """
    overrides = command_line_overrides()
    query = job_query(cfg, overrides)
    trained = load_trained_run(cfg.run, cfg.checkpoint, query=query, rllib=rllib)
    return trained, merge_run_config(cfg, trained, overrides)


def write_effective_config(out_dir: Path, cfg: DictConfig) -> Path:
    """A downstream job's config with the upstream run's ``model`` / ``env`` in force.

    ``.hydra/config.yaml`` holds what was composed (the default model, say); this
    file holds what actually ran, and the report reads it first.
    """
    path = out_dir / EFFECTIVE_CONFIG_FILE
    OmegaConf.save(cfg, path, resolve=True)
    return path
