"""Repeats: cells that differ only in ``seed`` are runs of one configuration.

A *configuration* is what a cell measures: its axes and every config leaf
except the keys in :data:`REPEAT_KEYS` (what differs between repeats), the
keys that say where a stage found its input (:data:`LOCATION_KEYS`), the
nodes that never make two cells different (``hydra``, ``ray``:
:data:`rlperf.layout.NON_IDENTITY_KEYS`) and the sweep folder. Cells of one
configuration recorded on the same hardware and software (one fingerprint
group) are its runs; the report pools them (:func:`group_repeats`), ranks the
configuration on its runs' values (:func:`rlperf.stats.intervals.across_runs`)
and keeps every run's own row in ``runs.csv``. The same configuration on
another machine is another configuration (never pooled), and
:func:`configuration_key` is what ``--gate`` matches a candidate's
configurations on in a baseline folder.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlperf.layout import NON_IDENTITY_KEYS
from rlperf.report.read.cells import Cell

#: Config keys that differ between repeats of one configuration.
REPEAT_KEYS: tuple[str, ...] = ("seed",)

#: Config keys naming where a stage found its input (the upstream run, a checkpoint),
#: not what it measured: rollouts of two training runs are runs of one configuration.
LOCATION_KEYS: tuple[str, ...] = ("run", "checkpoint", "model_path", "edge.cache_dir")


def is_identity_key(key: str) -> bool:
    """Whether a config value under ``key`` (dotted) is part of a configuration."""
    if key in REPEAT_KEYS or key in LOCATION_KEYS or key == "group":
        return False
    return key.split(".", 1)[0] not in NON_IDENTITY_KEYS


def configuration_values(cell: Cell) -> dict[str, Any]:
    """The axis and leaf values that make up the cell's configuration."""
    values = {**cell.leaves, **cell.axes}
    return {k: v for k, v in values.items() if is_identity_key(k)}


def configuration_key(cell: Cell) -> str:
    """A stable digest of :func:`configuration_values` (equal for repeats)."""
    blob = json.dumps(configuration_values(cell), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass
class Configuration:
    """One configuration on one fingerprint, and its runs (cells, any status, in id order).

    ``id`` is its first run's cell id; analyses, tables and findings key
    configurations by it.
    """

    id: str
    key: str
    family: str
    model: str
    fingerprint: str
    cells: list[Cell] = field(default_factory=list)
    #: The label of its comparison set (:mod:`rlperf.report.compare.workloads`), set by
    #: :func:`rlperf.report.compare.comparison.compare_cells`; configurations are ranked within it.
    workload: str = ""

    @property
    def completed(self) -> list[Cell]:
        """The runs that count (status completed)."""
        return [c for c in self.cells if c.completed]

    @property
    def repeats(self) -> int:
        """How many completed runs the configuration has."""
        return len(self.completed)


def group_repeats(cells: Sequence[Cell], fingerprint_of: Mapping[str, str]) -> list[Configuration]:
    """Group cells into configurations: same family, configuration key and fingerprint group.

    Configurations come in the order of their first cell.
    """
    found: dict[tuple[str, str, str], Configuration] = {}
    for cell in cells:
        key = configuration_key(cell)
        fp = fingerprint_of.get(cell.id, "")
        slot = (cell.family, key, fp)
        if slot not in found:
            model = str(cell.axes.get("model"))
            found[slot] = Configuration(cell.id, key, cell.family, model, fp)
        found[slot].cells.append(cell)
    return list(found.values())


def run_suffixes(configuration: Configuration) -> dict[str, str]:
    """What tells the runs of a repeated configuration apart in labels: ``seed=N`` where
    the seeds differ, else ``run k``; nothing for a configuration run once."""
    cells = configuration.cells
    if len(cells) < 2:
        return {}
    seeds = [c.leaves.get("seed") for c in cells]
    if len(set(map(str, seeds))) == len(seeds):
        return {c.id: f"seed={s}" for c, s in zip(cells, seeds, strict=True)}
    return {c.id: f"run {k}" for k, c in enumerate(cells, 1)}
