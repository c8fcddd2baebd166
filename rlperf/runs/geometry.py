"""Which network a config or a policy file describes, and the check that they agree.

A network is identified by its geometry, not its name: a vision network by its
input ``obs_shape`` (``dim``, ``dim``, ``framestack``) and ``conv_filters``, an
MLP by its ``hiddens`` and ``activation`` (the spaces come from the env). A run's
``.hydra/config.yaml`` and the ``model_config`` saved in its ``rlperf_policy.pt``
must give the same geometry (:func:`check_same_model`); a downstream job's
explicit ``model=`` must too (:mod:`rlperf.runs.merge`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlperf.errors import CheckpointError


def _normalize_filters(filters: Iterable[Any]) -> list[list[Any]]:
    out = []
    for f in filters:
        k = f[1]
        kernel = [int(k[0]), int(k[1])] if isinstance(k, list | tuple) else [int(k), int(k)]
        out.append([int(f[0]), kernel, int(f[2])])
    return out


def model_kind_of(cfg_model: Any) -> str:
    """``kind`` of a config's ``model`` subtree (``vision`` for configs of rlperf 0.1, which
    had only the study's networks)."""
    kind = cfg_model.get("kind") if cfg_model is not None else None
    return str(kind or "vision")


def model_geometry(cfg_model: Any) -> dict[str, Any]:
    """What identifies a config's network: vision ``obs_shape`` and ``conv_filters``; mlp
    ``hiddens`` and ``activation`` (the spaces come from the env)."""
    if model_kind_of(cfg_model) == "mlp":
        hiddens = OmegaConf.to_container(cfg_model.hiddens, resolve=True)
        assert isinstance(hiddens, list)
        return {
            "kind": "mlp",
            "hiddens": [int(h) for h in hiddens],
            "activation": str(cfg_model.activation),
        }
    filters = OmegaConf.to_container(cfg_model.conv_filters, resolve=True)
    assert isinstance(filters, list)
    dim, stack = int(cfg_model.dim), int(cfg_model.framestack)
    return {"obs_shape": [dim, dim, stack], "conv_filters": _normalize_filters(filters)}


def _saved_geometry(model_config: dict[str, Any]) -> dict[str, Any]:
    """:func:`model_geometry` of a policy file's ``model_config``."""
    if str(model_config.get("kind", "vision")) == "mlp":
        return {
            "kind": "mlp",
            "hiddens": [int(h) for h in model_config.get("hiddens", [])],
            "activation": str(model_config.get("activation")),
        }
    return {
        "obs_shape": [int(v) for v in model_config.get("obs_shape", [])],
        "conv_filters": _normalize_filters(model_config.get("conv_filters", [])),
    }


def check_same_model(ckpt: Path, run_cfg: DictConfig, model_config: dict[str, Any]) -> None:
    """The checkpoint's network is the one its run's config describes."""
    want = model_geometry(run_cfg.model)
    have = _saved_geometry(model_config)
    if want != have:
        raise CheckpointError(
            f"checkpoint {ckpt} holds another model than its run's config: the checkpoint's "
            f"network is {geometry_text(have)}, the run's config (model={run_cfg.model.name}) "
            f"expects {geometry_text(want)}"
        )


def geometry_text(geometry: dict[str, Any]) -> str:
    """A :func:`model_geometry` in words, for error messages."""
    if geometry.get("kind") == "mlp":
        return f"an MLP with hiddens {geometry['hiddens']} ({geometry['activation']})"
    return f"input {geometry['obs_shape']} with conv_filters {geometry['conv_filters']}"
