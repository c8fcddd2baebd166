"""Read every cell under the report's paths: discover the folders (:mod:`.discover`),
read each one (:mod:`.load` for rlperf job folders, :mod:`.legacy` for the 2021
study's), and keep one copy of a run found twice.

A cell that fails to read is returned as :class:`~rlperf.report.read.discover.Skipped`
with its reason; it never breaks the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rlperf.errors import CellError, NoRunsFoundError
from rlperf.report.read.cells import Cell
from rlperf.report.read.discover import CellRef, Discovery, Skipped, discover
from rlperf.report.read.legacy import is_legacy, load_legacy
from rlperf.report.read.load import load_rlperf_cell

Progress = Callable[[str], None]


def load_cells(
    refs: Sequence[CellRef], progress: Progress | None = None
) -> tuple[list[Cell], list[Skipped]]:
    """Read every cell; a cell that fails to read is returned as :class:`Skipped`."""
    cells: list[Cell] = []
    skipped: list[Skipped] = []
    step = max(1, len(refs) // 10)
    for i, ref in enumerate(refs, 1):
        try:
            cell = load_legacy(ref) if is_legacy(ref) else load_rlperf_cell(ref)
        except CellError as exc:
            skipped.append(Skipped(ref.path, str(exc)))
        except Exception as exc:  # noqa: BLE001 - a broken cell must never break the report
            skipped.append(Skipped(ref.path, f"unexpected {exc.__class__.__name__}: {exc}"))
        else:
            cells.append(cell)
        if progress is not None and (i % step == 0 or i == len(refs)):
            progress(f"read {i}/{len(refs)} cells ({len(skipped)} skipped)")
    return dedupe(cells, skipped)


def dedupe(cells: list[Cell], skipped: list[Skipped]) -> tuple[list[Cell], list[Skipped]]:
    """Keep one copy of a run found twice (same ``run_key``); list the others as skipped.

    The 2021 study's ``volta1_cpus/*_no_cpu_limit_8_workers`` runs are byte-identical
    copies of ``volta1_def/*_8_workers`` runs; counting them twice would bias rankings.
    """
    kept: list[Cell] = []
    first: dict[str, Cell] = {}
    for cell in cells:
        other = first.get(cell.run_key) if cell.run_key else None
        if other is None:
            if cell.run_key:
                first[cell.run_key] = cell
            kept.append(cell)
        else:
            skipped.append(
                Skipped(
                    cell.path,
                    f"same run as `{other.id}` ({cell.run_key}); counted once",
                    duplicate=True,
                )
            )
    return kept, skipped


def read_cells(
    paths: Sequence[Path], progress: Progress | None = None
) -> tuple[Discovery, list[Cell], list[Skipped]]:
    """Discover and read every cell under ``paths``; raise if none could be read."""
    found = discover(paths, progress)
    cells, skipped = load_cells(found.refs, progress)
    skipped = [*found.skipped, *skipped]
    if not cells:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:5])
        raise NoRunsFoundError(f"no readable cell under {', '.join(map(str, paths))} ({reasons})")
    return found, cells, skipped
