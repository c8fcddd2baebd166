"""A sweep's cells from Hydra's override lists: each cell's config, identity and folder.

Every cell's sweep config comes from Hydra's config loader; its identity is the
hash of its resolved config (:mod:`rlperf.sweep.cells`), and the cells the sweep
folder's index says completed (and whose ``summary.json`` agrees) are kept, not
run again. A search builds its trials' configs with the same pieces
(:func:`load_cell_config`, :func:`freeze_folder`, :func:`task_config`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from rlperf.layout import CELL_FILE
from rlperf.results.columns import WALL_S
from rlperf.sweep.cells import cell_hash, is_rlperf_config
from rlperf.sweep.index import CellRecord, SweepIndex
from rlperf.sweep.state import Cell, SweepSetup
from rlperf.sweep.upstream import upstream_label

#: What a kept cell's record carries over from the run that completed it.
_KEPT_FIELDS = (
    "status",
    WALL_S,
    "started_at",
    "finished_at",
    "return_value",
    "trial_entered_at",
    "request",
    "concurrent_cells",
    "group",
    "ray_address",
    "node",
    "storage",
)


def load_cell_config(
    config: DictConfig, hydra_context: object, overrides: Sequence[str], job_num: int
) -> DictConfig:
    """One cell's sweep config (Hydra's config loader), numbered ``job_num``."""
    loader = hydra_context.config_loader  # type: ignore[attr-defined]
    sweep_config: DictConfig = loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = job_num
        sweep_config.hydra.job.num = job_num
    return sweep_config


def freeze_folder(sweep_config: DictConfig, sweep_dir: Path, subdir: str) -> Path:
    """Write the cell's folder into its config: the trial (in another process and working
    directory) must find the same one. Returns the folder."""
    out_dir = sweep_dir / subdir
    with read_write(sweep_config.hydra), open_dict(sweep_config.hydra):
        sweep_config.hydra.sweep.dir = str(sweep_dir)
        sweep_config.hydra.sweep.subdir = subdir
        sweep_config.hydra.runtime.output_dir = str(out_dir)
    return out_dir


def task_config(sweep_config: DictConfig) -> DictConfig:
    """The job's config: the sweep config without its ``hydra`` node."""
    task_cfg = copy.deepcopy(sweep_config)
    with read_write(task_cfg), open_dict(task_cfg):
        del task_cfg["hydra"]
    return task_cfg


def prepare_cells(
    setup: SweepSetup,
    job_overrides: Sequence[Sequence[str]],
    initial_job_idx: int,
    sweep_dir: Path,
    index: SweepIndex,
) -> list[Cell]:
    """Load each cell's sweep config, hash it, choose its folder, find the ones already done."""
    cells: list[Cell] = []
    seen: dict[str, int] = {}
    taken: set[str] = set()
    for i, overrides in enumerate(job_overrides):
        cell = prepare_cell(setup, overrides, initial_job_idx + i, sweep_dir, index, seen, taken)
        cells.append(cell)
    return cells


def prepare_cell(
    setup: SweepSetup,
    overrides: Sequence[str],
    job_num: int,
    sweep_dir: Path,
    index: SweepIndex,
    seen: dict[str, int],
    taken: set[str],
    repeat: tuple[Cell, int] | None = None,
) -> Cell:
    """One cell: its sweep config, hash and folder, kept when the index says it completed.

    ``seen`` and ``taken`` (hashes and folders of the sweep so far) keep the same config
    twice distinct and folders apart. ``repeat``: the cell is repeat ``r`` of the base
    cell, in the folder ``<base folder>-r<r>``.
    """
    previous_hydra = HydraConfig.instance().cfg
    try:
        sweep_config = load_cell_config(setup.config, setup.hydra_context, overrides, job_num)
        HydraConfig.instance().set_config(sweep_config)
        default_subdir = str(OmegaConf.select(sweep_config, "hydra.sweep.subdir"))
        if repeat is not None:
            default_subdir = f"{repeat[0].record.subdir}-r{repeat[1]}"
        task_cfg = task_config(sweep_config)
        h = cell_hash(task_cfg)
        # The same config twice in one sweep: distinct cells.
        seen[h] = seen.get(h, 0) + 1
        if seen[h] > 1:
            h = f"{h}~{seen[h]}"
        prev = index.cells.get(h)
        subdir = prev.subdir if prev is not None else default_subdir
        owned = _folder_owned_by_other(sweep_dir, index, subdir, h)
        if prev is None and (owned or subdir in taken):
            subdir = f"{default_subdir}-{h[:8]}"
        taken.add(subdir)
        out_dir = freeze_folder(sweep_config, sweep_dir, subdir)
    finally:
        HydraConfig.instance().cfg = previous_hydra
    record = CellRecord(
        hash=h,
        overrides=[str(o) for o in overrides],
        subdir=subdir,
        job_num=job_num,
        concurrent_cells=int(setup.options.max_concurrent_trials),
        upstream=upstream_label(task_cfg),
        repeat=0 if repeat is None else repeat[1],
        base=None if repeat is None else repeat[0].record.hash,
    )
    kept = prev is not None and index.is_done(h)
    if prev is not None:
        record.runs = prev.runs
        if kept:
            for name in _KEPT_FIELDS:
                setattr(record, name, getattr(prev, name))
    return Cell(record, sweep_config, task_cfg, out_dir, is_rlperf_config(task_cfg), kept=kept)


def _folder_owned_by_other(sweep_dir: Path, index: SweepIndex, subdir: str, h: str) -> bool:
    """Whether ``subdir`` already holds another cell (per the index or its cell.json)."""
    owner = index.subdir_owner(subdir)
    if owner is not None and owner != h:
        return True
    try:
        data = json.loads((sweep_dir / subdir / CELL_FILE).read_text())
        return bool(data.get("hash") != h)
    except (OSError, ValueError):
        return False
