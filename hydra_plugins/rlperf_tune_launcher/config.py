"""Options of the ``rlperf_tune`` launcher (``hydra.launcher.*``), registered in ``hydra/launcher``.

This module is imported by Hydra's plugin discovery (its name has no leading
underscore), so it must stay light: dataclasses and the ConfigStore only.

No ``from __future__ import annotations`` here, unlike the rest of rlperf:
Hydra's scanner executes this module without registering it in ``sys.modules``,
and ``dataclasses`` resolves string annotations through ``sys.modules``.
"""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore


@dataclass
class RlperfTuneLauncherConf:
    """``hydra.launcher``: every cell of a multirun is a Ray Tune trial (docs/sweeps.md)."""

    _target_: str = "hydra_plugins.rlperf_tune_launcher.launcher.RlperfTuneLauncher"
    # Cells running at the same time. 1 isolates measurements; more is an explicit
    # choice that sweep.json and every cell.json record (concurrent_cells).
    max_concurrent_trials: int = 1
    # true: an infeasible cell (e.g. asks for a GPU this machine lacks) fails the sweep
    # before anything runs, instead of being recorded as skipped.
    strict: bool = False
    # Retries of a failed cell (Tune's FailureConfig.max_failures; -1 = unlimited).
    max_failures: int = 0
    # Keep the completed cells of an earlier run into the same sweep folder.
    resume: bool = True
    # Where the cells' files go (docs/sweeps.md#storage): null = the sweep folder, which
    # every node of a cluster must then see; or a URI (s3://bucket/prefix, gs://...) or an
    # absolute path every node mounts, from which the launcher fetches each finished cell
    # into the sweep folder. Credentials come from the environment, never from here.
    storage: str | None = None
    # How Ray is started (or which cluster is joined) is the job config's ``ray`` node
    # (rlperf.config.schema.RayConfig): one definition for single runs and sweeps.


ConfigStore.instance().store(
    group="hydra/launcher",
    name="rlperf_tune",
    node=RlperfTuneLauncherConf,
    provider="rlperf_tune_launcher",
)
