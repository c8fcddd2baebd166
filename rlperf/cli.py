"""The ``rlperf`` command: a thin Hydra shell around the stages.

Composition and ``--help`` import only Hydra and the schemas; the stage that
runs imports Ray, torch or TensorFlow itself.
"""

from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig

from rlperf.config.schema import register_configs
from rlperf.config.search_path import SHIPPED_CONF, user_primary_config_clash


@hydra.main(version_base="1.3", config_path=SHIPPED_CONF, config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from rlperf.stages import run_stage

    return run_stage(cfg)


def main() -> None:
    """Console-script entry point."""
    # RLlib imports TensorFlow whenever it is installed, even for torch
    # algorithms: ~4 s and ~500 MB in the driver and in every env runner (Ray
    # workers inherit this environment). The edge stage imports TensorFlow itself.
    os.environ.setdefault("RLLIB_TEST_NO_TF_IMPORT", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    clash = user_primary_config_clash()
    if clash is not None:
        print(
            f"rlperf: {clash} would replace rlperf's primary config; a conf/ folder in the "
            f"working directory may hold group options (conf/experiment/*.yaml, ...) but "
            f"not config.yaml (docs/configuration.md#your-own-configs)",
            file=sys.stderr,
        )
        raise SystemExit(2)
    register_configs()
    try:
        _hydra_main()
    except KeyboardInterrupt:
        # Completed rows and cells are on disk; summary.json says "interrupted".
        print("rlperf: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
