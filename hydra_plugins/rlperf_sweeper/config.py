"""Options of the ``rlperf`` sweeper (``hydra.sweeper.*``), registered in ``hydra/sweeper``.

Imported by Hydra's plugin discovery: dataclasses and the ConfigStore only. No
``from __future__ import annotations`` (see the launcher's config.py for why).
"""

from dataclasses import dataclass
from typing import Dict, Optional  # noqa: UP035 -- OmegaConf reads these annotations

from hydra.core.config_store import ConfigStore


@dataclass
class RlperfSweeperConf:
    """``hydra.sweeper``: Hydra's basic sweeper's options; the upstream axis needs none."""

    _target_: str = "hydra_plugins.rlperf_sweeper.sweeper.RlperfSweeper"
    # Cells per launch (null: all at once), as in Hydra's basic sweeper.
    max_batch_size: Optional[int] = None  # noqa: UP045
    # Sweep axes of a preset (`hydra.sweeper.params` in conf/experiment/*.yaml).
    params: Optional[Dict[str, str]] = None  # noqa: UP006, UP045


ConfigStore.instance().store(
    group="hydra/sweeper",
    name="rlperf",
    node=RlperfSweeperConf,
    provider="rlperf_sweeper",
)
