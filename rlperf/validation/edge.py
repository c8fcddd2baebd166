"""The edge stage's checks of the composed config (``stage=edge``), before any work starts.

Config keys: ``run`` / ``checkpoint`` / ``model_path``, ``backend.name`` and ``edge.*``
(``fidelity_threshold``, ``action_tolerance``, ``edgetpu_source``, ``finetune_steps``,
``finetune_lr``, ``finetune_batch``). Which backends compress the policy and which files
the Edge TPU compiler takes come from the backend specs (:mod:`rlperf.specs.backends`).
"""

from __future__ import annotations

from omegaconf import DictConfig

from rlperf.errors import ConfigError
from rlperf.specs.backends import COMPRESSION_BACKENDS, EDGETPU_SOURCES, backend_spec
from rlperf.tflite.finetune import learning_rates


def validate_edge(cfg: DictConfig) -> None:
    """``stage=edge``: a policy or a model file, and ``edge.*``."""
    if cfg.run is None and cfg.checkpoint is None and cfg.model_path is None:
        raise ConfigError(
            "stage=edge needs run=<training job folder>, checkpoint=<path> or "
            "model_path=<file.tflite>"
        )
    if not 0 <= cfg.edge.fidelity_threshold <= 1:
        raise ConfigError(
            f"edge.fidelity_threshold={cfg.edge.fidelity_threshold} must be in [0, 1]"
        )
    if not 0 < cfg.edge.action_tolerance <= 1:
        raise ConfigError(
            f"edge.action_tolerance={cfg.edge.action_tolerance} must be in (0, 1] (a share of "
            f"each action dimension's range)"
        )
    _validate_compression(cfg)
    source = str(cfg.edge.edgetpu_source)
    if source not in EDGETPU_SOURCES:
        raise ConfigError(
            f"edge.edgetpu_source={source} is not an int8 variant the Edge TPU compiler takes; "
            f"valid: {', '.join(EDGETPU_SOURCES)}"
        )
    compressed_source = backend_spec(source).compressed  # built from the trained policy
    on_edgetpu = backend_spec(cfg.backend.name).on_edgetpu
    if on_edgetpu and compressed_source and cfg.model_path is not None:
        raise ConfigError(
            f"edge.edgetpu_source={source} builds that variant from the trained policy: give "
            "run=<training job folder> or checkpoint=<path> instead of model_path"
        )


def _validate_compression(cfg: DictConfig) -> None:
    """A compression backend needs the torch policy and positive fine-tuning settings."""
    name = str(cfg.backend.name)
    if backend_spec(name).on_edgetpu and cfg.model_path is None:
        name = str(cfg.edge.edgetpu_source)  # the variant compiled is built here
    if name not in COMPRESSION_BACKENDS:
        return
    if cfg.run is None and cfg.checkpoint is None:
        raise ConfigError(
            f"backend={name} compresses the trained policy (fine-tuned by distillation from "
            f"it): give run=<training job folder> or checkpoint=<path>, not only model_path"
        )
    for key in ("finetune_steps", "finetune_batch"):
        if not cfg.edge[key] > 0:
            raise ConfigError(f"edge.{key}={cfg.edge[key]} must be > 0 for backend={name}")
    lr = cfg.edge.finetune_lr
    shown = lr if isinstance(lr, (int, float, str)) else list(lr)
    try:
        rates = learning_rates(lr)
    except (TypeError, ValueError):
        rates = []
    if not rates or not all(r > 0 for r in rates):
        raise ConfigError(
            f"edge.finetune_lr={shown} must be a learning rate > 0 or a non-empty list of "
            f"them (e.g. [3e-3,1e-3,3e-4]) for backend={name}"
        )
