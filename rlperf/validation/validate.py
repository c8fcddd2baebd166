"""One validation step over the composed config, before anything expensive starts.

Allowed values of single keys are Enum fields of the schema
(:mod:`rlperf.config.schema`), so composition already rejects them. Checks that need
several keys or groups at once run here: the groups' (:mod:`rlperf.validation.groups`),
then the stage's own (its spec's ``validator``: :mod:`rlperf.validation.stages`,
:mod:`rlperf.validation.edge`). Every error names the keys involved, the value and what
would be valid.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from rlperf.checks import positive
from rlperf.specs import load
from rlperf.specs.stages import stage_spec
from rlperf.tracking.tools import check_tools
from rlperf.validation.groups import (
    validate_algo,
    validate_env,
    validate_gpu_layout,
    validate_model,
    validate_resources,
    validate_telemetry,
)


def validate_config(cfg: DictConfig) -> None:
    """Run the common checks, then the stage's; raise :class:`ConfigError` naming the keys."""
    validate_env(cfg)
    spec = stage_spec(cfg.stage)
    if not spec.env_only or cfg.run is not None or cfg.checkpoint is not None:
        validate_model(cfg)  # stage=env with random actions builds no network
    validate_resources(cfg)
    validate_gpu_layout(cfg)
    validate_algo(cfg)
    validate_telemetry(cfg)
    positive("console.heartbeat_s", cfg.console.heartbeat_s, allow_zero=True)
    check_tools(OmegaConf.select(cfg, "tracking"))
    load(spec.validator)(cfg)  # the stage's own checks (a function of this module)
