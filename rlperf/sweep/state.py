"""What a sweep holds while it runs: its cells, the groups they run in, its settings.

:class:`SweepSetup` is what Hydra hands a launcher (the sweep's config, the
context, the task function, the launcher's options); :class:`Sweep` is the state
the engine and the Tune callback share. The launcher plugin and the sweeper build
a :class:`SweepSetup` from their Hydra objects; nothing here knows the plugins.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.utils import configure_log, setup_globals
from omegaconf import DictConfig, OmegaConf

from rlperf.config.schema import RayConfig
from rlperf.console import Console, terminal_session
from rlperf.errors import SweepError
from rlperf.layout import INDEX_FILE, MULTIRUN_FILE, SEARCH_FILE
from rlperf.results.storage import Storage, parse_storage
from rlperf.sweep.index import CellRecord, SweepIndex, summary_status, write_cell_file
from rlperf.sweep.progress import SweepProgress
from rlperf.sweep.resources import CellRequest, RayStart
from rlperf.tracking.live import sweep_tracking
from rlperf.vocabulary import FINAL_STATUSES

log = logging.getLogger(__name__)

#: Tune's own files (experiment state, trial error files) under the sweep folder.
TUNE_DIR = ".tune"
#: The launcher's log (everything this process and Ray's driver wrote); each cell's
#: job log is in its folder.
SWEEP_LOG = "sweep.log"


@dataclass(frozen=True)
class SweepSetup:
    """What Hydra gives a launcher: the sweep's config and context, the task function, and
    the launcher's options (``hydra.launcher.*``, hydra_plugins/rlperf_tune_launcher/config.py)."""

    config: DictConfig
    hydra_context: Any  # hydra.types.HydraContext
    task_function: Any  # hydra.types.TaskFunction
    options: DictConfig


@dataclass
class Cell:
    """One override list of the multirun, and what the launcher knows about it."""

    record: CellRecord
    sweep_config: DictConfig
    task_cfg: DictConfig
    out_dir: Path
    rlperf: bool
    request: CellRequest | None = None
    kept: bool = False  # completed in an earlier run of this sweep folder
    error: BaseException | None = None  # pre-flight failure (invalid config)
    job_blob: str | None = None  # the trial's pickled JobReturn
    t0: float | None = None  # monotonic time its trial started


@dataclass
class Group:
    """Cells that share how Ray is started: one Ray instance, one Tune experiment."""

    gid: int  # index into sweep.json "groups" (unique across resumed runs)
    start: RayStart
    cells: list[Cell]
    capacity: dict[str, float] | None = None  # what Ray has for them (local: what we start)


@dataclass
class Sweep:
    """State shared by the launcher and the Tune callback."""

    setup: SweepSetup
    sweep_dir: Path
    index: SweepIndex
    cells: list[Cell]
    progress: SweepProgress
    ray_cfg: DictConfig  # the job config's ``ray`` node (rlperf.config.schema.RayConfig)
    by_hash: dict[str, Cell] = field(default_factory=dict)
    # hydra.launcher.storage: where the trials' files go (None: the sweep folder itself).
    storage: Storage | None = None
    ray_address: str | None = None  # the Ray the cells run in (the address joined, or local)

    @property
    def options(self) -> DictConfig:
        """The launcher's options (``hydra.launcher.*``)."""
        return self.setup.options

    @property
    def records(self) -> list[CellRecord]:
        return [c.record for c in self.cells]

    def save(self, cell: Cell | None = None) -> None:
        if cell is not None:
            self.index.cells[cell.record.hash] = cell.record
            write_cell_file(cell.out_dir, cell.record)
        self.index.save()


def ray_options(config: DictConfig) -> DictConfig:
    """The ``ray`` node of the sweep's config (rlperf's :class:`RayConfig`); for another
    Hydra app, RayConfig's defaults under whatever ``ray`` keys it set (``+ray.address=...``
    sends its cells to an existing cluster)."""
    node = OmegaConf.select(config, "ray")
    if node is not None and OmegaConf.get_type(node) is RayConfig:
        return node
    defaults = OmegaConf.structured(RayConfig)
    return defaults if node is None else OmegaConf.merge(defaults, node)  # type: ignore[return-value]


def check_options(opts: DictConfig) -> None:
    """``hydra.launcher.*`` values the engine cannot run with (before anything starts)."""
    if int(opts.max_concurrent_trials) < 1:
        raise SweepError(
            f"hydra.launcher.max_concurrent_trials={opts.max_concurrent_trials} must be >= 1"
        )
    if int(opts.max_failures) < -1:
        raise SweepError(
            f"hydra.launcher.max_failures={opts.max_failures} must be >= 0 (or -1: unlimited)"
        )
    parse_storage(opts.get("storage"))


@contextlib.contextmanager
def sweep_session(setup: SweepSetup) -> Iterator[tuple[Path, Console]]:
    """Hydra's per-process setup and logging, the launcher's options checked, the sweep
    folder made; yields it with the terminal session whose log is its ``sweep.log``. With
    ``tracking=mlflow`` the sweep's MLflow parent run is open meanwhile (docs/tracking.md)."""
    setup_globals()
    config = setup.config
    configure_log(config.hydra.hydra_logging, config.hydra.verbose)
    check_options(setup.options)
    sweep_dir = Path(str(config.hydra.sweep.dir)).resolve()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    verbosity = str(OmegaConf.select(config, "verbosity", default="normal"))
    with terminal_session(verbosity, sweep_dir / SWEEP_LOG) as console, sweep_tracking(config):
        yield sweep_dir, console


#: The sweep folder's own files a storage gets a copy of (:func:`publish_index`).
PUBLISHED = (INDEX_FILE, MULTIRUN_FILE, SEARCH_FILE)


def fetch_finished(index: SweepIndex, storage: Storage) -> None:
    """On resume with a storage: the finished cells whose folder here lacks their files (a
    sweep folder copied elsewhere, or a cell folder deleted) are fetched again, before the
    index decides which cells are kept."""
    for rec in index.cells.values():
        out_dir = index.sweep_dir / rec.subdir
        if rec.status in FINAL_STATUSES and rec.storage and summary_status(out_dir) is None:
            n = storage.fetch(rec.storage, out_dir)
            log.info("cell #%s: %d file(s) fetched from %s", rec.job_num, n, rec.storage)


def publish_index(sweep: Sweep) -> None:
    """The launcher's index files (:data:`PUBLISHED`) copied to the top of the storage,
    which then describes the sweep on its own (``rlperf-report s3://...``)."""
    assert sweep.storage is not None
    try:
        for name in PUBLISHED:
            if (sweep.sweep_dir / name).is_file():
                sweep.storage.put(sweep.sweep_dir / name, name)
    except OSError as exc:
        sweep.progress.say(f"{sweep.storage.describe()}: the sweep's index was not copied: {exc}")
