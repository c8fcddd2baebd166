"""The ``rlperf`` command: a thin Hydra shell around the stages.

Composition and ``--help`` import only Hydra and the schemas; the stage that
runs imports Ray, torch or TensorFlow itself.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from rlperf.config.schema import register_configs


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from rlperf.stages import run_stage

    return run_stage(cfg)


def main() -> None:
    """Console-script entry point."""
    register_configs()
    _hydra_main()


if __name__ == "__main__":
    main()
